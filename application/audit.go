package application

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Audit listing bounds, as adapters/rest/openapi.yaml documents them.
const (
	defaultAuditLimit = 50
	maxAuditLimit     = 500
)

// Audit reads the audit log for operators holding audit:read. It only
// reads: records are written by the stores, in the transaction of the
// change each records, and nothing in the service changes one.
type Audit struct {
	log ports.AuditLog
}

var _ ports.AuditService = (*Audit)(nil)

// NewAudit builds the audit listing over a store's reader.
func NewAudit(log ports.AuditLog) (*Audit, error) {
	if err := required(log); err != nil {
		return nil, err
	}
	return &Audit{log: log}, nil
}

// ListAudit pages through the records q selects, newest first by (at,
// seq), with an opaque cursor, so pages neither skip nor repeat while
// records are being added. The edges check audit:read before calling;
// it is checked again here, since the log names every operator and what
// they did.
func (a *Audit) ListAudit(ctx context.Context, who domain.Principal, q ports.AuditQuery) (ports.AuditPage, error) {
	if err := authorize(who, domain.PermAuditRead); err != nil {
		return ports.AuditPage{}, err
	}
	f, err := parseAuditQuery(q)
	if err != nil {
		return ports.AuditPage{}, err
	}
	items, next, err := listPage(&f.Limit, func() ([]ports.AuditEntry, error) { return a.log.ListAudit(ctx, f) },
		func(last ports.AuditEntry) string {
			return encodeAuditCursor(ports.AuditCursor{At: last.Record.At(), Seq: last.Seq})
		})
	if err != nil {
		return ports.AuditPage{}, fmt.Errorf("listing audit records: %w", err)
	}
	return ports.AuditPage{Items: items, Next: next}, nil
}

func parseAuditQuery(q ports.AuditQuery) (ports.AuditFilter, error) {
	f := ports.AuditFilter{Limit: defaultAuditLimit, Target: q.Target}
	if q.Actor != "" {
		if _, err := domain.ParseAuditActor(q.Actor); err != nil {
			return f, err
		}
		f.Actor = q.Actor
	}
	if err := domain.ValidateText("target", q.Target, 256); err != nil { // a NUL would reach the query: Postgres refuses it
		return f, err
	}
	if q.Action != "" {
		act, err := domain.ParseAuditAction(q.Action)
		if err != nil {
			return f, err
		}
		f.Action = act
	}
	for _, t := range []struct {
		field, s string
		dst      *time.Time
	}{{"since", q.Since, &f.Since}, {"until", q.Until, &f.Until}} {
		if t.s == "" {
			continue
		}
		v, err := domain.ParseInstant(t.field, t.s)
		if err != nil {
			return f, err
		}
		*t.dst = v
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, &domain.ValidationError{Field: "until", Reason: "must be after since"}
	}
	var err error
	f.Limit, f.After, err = parsePage(q.Limit, q.After, defaultAuditLimit, maxAuditLimit, decodeAuditCursor)
	return f, err
}

// encodeAuditCursor makes an opaque, URL-safe position (timeCursor): the
// record's time and seq.
func encodeAuditCursor(c ports.AuditCursor) string {
	return encodeTimeCursor(c.At, strconv.FormatInt(c.Seq, 10))
}

func decodeAuditCursor(s string) (ports.AuditCursor, error) {
	at, seq, err := decodeTimeCursor(s)
	if err != nil {
		return ports.AuditCursor{}, err
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil || n < 1 {
		return ports.AuditCursor{}, errBadCursor
	}
	return ports.AuditCursor{At: at, Seq: n}, nil
}
