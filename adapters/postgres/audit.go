package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// insertAuditSQL writes one audit record (migration 00130). Every store
// write an operator makes runs it in the write's own transaction, so a
// change and its record commit together or not at all.
const insertAuditSQL = `INSERT INTO audit_log (at, actor_kind, actor_user, actor_token, action, target, before, after, request_id, source)
	VALUES ($1, $2, NULLIF($3, ''), $4, $5, $6, $7, $8, $9, $10)`

// writeAudit stores rec, and the events it announces, in the transaction
// of the change it records; the zero record (a change no operator made)
// writes nothing.
func writeAudit(ctx context.Context, tx sqlx.ExecerContext, rec domain.AuditRecord) error {
	if rec.IsZero() {
		return nil
	}
	if rec.Action() != "" {
		if _, err := tx.ExecContext(ctx, insertAuditSQL, auditArgs(rec)...); err != nil {
			return fmt.Errorf("recording %s of %s: %w", rec.Action(), rec.Target(), unavailable(err))
		}
	}
	for _, a := range rec.Announcements() {
		if err := announce(ctx, tx, a); err != nil {
			return err
		}
	}
	return nil
}

// announceSQL writes an event to the outbox (migration 00140) and, in the
// same statement, a pending delivery to every enabled subscription that
// wants its type. The subscriptions are read FOR KEY SHARE — the lock the
// deliveries' foreign key takes anyway — so that one being deleted
// meanwhile is waited for and then left out (READ COMMITTED re-checks a
// locked row), rather than failing the foreign key and, with it, the
// change announcing the event.
const announceSQL = `WITH ev AS (INSERT INTO outbox_events (type, at, payload) VALUES ($1, $2, $3) RETURNING id, type)
	INSERT INTO webhook_deliveries (subscription_id, event_id, next_attempt_at)
	SELECT s.id, ev.id, $2 FROM webhook_subscriptions s, ev
	WHERE s.enabled AND (cardinality(s.event_types) = 0 OR ev.type = ANY (s.event_types))
	FOR KEY SHARE OF s`

// announce writes a in the transaction of the change that announces it.
func announce(ctx context.Context, tx sqlx.ExecerContext, a domain.Announcement) error {
	_, err := tx.ExecContext(ctx, announceSQL, announceArgs(a)...)
	return announced(a, err)
}

// announceArgs are announceSQL's arguments for a.
func announceArgs(a domain.Announcement) []any {
	return []any{string(a.Type()), a.At(), string(a.Payload())}
}

// announced is the error of announcing a, if any.
func announced(a domain.Announcement, err error) error {
	if err != nil {
		return fmt.Errorf("announcing %s: %w", a.Type(), unavailable(err))
	}
	return nil
}

// writeAuditOf stores the record audit (nil: none) makes of a change from
// before to after.
func writeAuditOf[T any](ctx context.Context, tx sqlx.ExecerContext, audit ports.Audit[T], before, after T) error {
	if audit == nil {
		return nil
	}
	rec, err := audit(before, after)
	if err != nil {
		return err
	}
	return writeAudit(ctx, tx, rec)
}

func auditArgs(rec domain.AuditRecord) []any {
	a := rec.ActorRecord()
	var token any
	if !a.Token.IsZero() {
		token = a.Token.String()
	}
	return []any{rec.At(), a.Kind, a.User, token, string(rec.Action()), rec.Target(),
		jsonOrNull(rec.Before()), jsonOrNull(rec.After()), rec.RequestID(), rec.Source()}
}

func jsonOrNull(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// AuditLog reads the audit log (ports.AuditLog). It only reads: the
// records are written by the stores' writes (writeAudit), and the table
// refuses UPDATE and DELETE.
type AuditLog struct{ db *sqlx.DB }

// NewAuditLog reads the audit log on db.
func NewAuditLog(db *sqlx.DB) *AuditLog { return &AuditLog{db: db} }

type auditRow struct {
	Seq       int64          `db:"seq"`
	At        time.Time      `db:"at"`
	Kind      string         `db:"actor_kind"`
	User      sql.NullString `db:"actor_user"`
	Token     sql.NullString `db:"actor_token"`
	Action    string         `db:"action"`
	Target    string         `db:"target"`
	Before    []byte         `db:"before"`
	After     []byte         `db:"after"`
	RequestID string         `db:"request_id"`
	Source    string         `db:"source"`
}

// ListAudit returns the records f selects, newest first by (at, seq),
// keyset-paged after f.After, at most f.Limit. Each filter but root's
// leads an index of migration 00130 (actor_user, actor_token, target,
// action; the break-glass root's records are few, found along the primary
// key). Only placeholders are added to the query, never values.
func (l *AuditLog) ListAudit(ctx context.Context, f ports.AuditFilter) ([]ports.AuditEntry, error) {
	var cond conditions
	arg := cond.arg
	if f.Actor != "" {
		a, err := domain.ParseAuditActor(f.Actor)
		if err != nil {
			return nil, err
		}
		switch {
		case a.Kind == "root":
			cond.where = append(cond.where, "actor_kind = 'root'")
		case !a.Token.IsZero():
			cond.where = append(cond.where, "actor_token = "+arg(a.Token.String())+"::uuid")
		default:
			cond.where = append(cond.where, "actor_user = "+arg(a.User))
		}
	}
	if f.Target != "" {
		cond.where = append(cond.where, "target = "+arg(f.Target))
	}
	if f.Action != "" {
		cond.where = append(cond.where, "action = "+arg(string(f.Action)))
	}
	if !f.Since.IsZero() {
		cond.where = append(cond.where, "at >= "+arg(dbTime(f.Since)))
	}
	if !f.Until.IsZero() {
		cond.where = append(cond.where, "at < "+arg(dbTime(f.Until)))
	}
	if f.After != nil {
		cond.where = append(cond.where, "(at, seq) < ("+arg(dbTime(f.After.At))+"::timestamptz, "+arg(f.After.Seq)+"::bigint)")
	}
	limit := positiveOr(f.Limit, ports.DefaultListLimit)
	q := `SELECT seq, at, actor_kind, actor_user, actor_token::text AS actor_token, action, target, before, after, request_id, source FROM audit_log`
	if len(cond.where) > 0 {
		q += ` WHERE ` + strings.Join(cond.where, " AND ")
	}
	q += ` ORDER BY at DESC, seq DESC LIMIT ` + arg(limit)
	var rows []auditRow
	if err := l.db.SelectContext(ctx, &rows, q, cond.args...); err != nil {
		return nil, fmt.Errorf("listing audit records: %w", unavailable(err))
	}
	out := make([]ports.AuditEntry, 0, len(rows))
	for _, r := range rows {
		actor := domain.AuditActorRecord{Kind: r.Kind, User: r.User.String}
		if r.Token.Valid {
			id, err := domain.ParseUUID("actor_token", r.Token.String)
			if err != nil {
				return nil, fmt.Errorf("stored audit record %d: %w", r.Seq, err)
			}
			actor.Token = id
		}
		rec, err := domain.RehydrateAuditRecord(r.At, actor, domain.AuditAction(r.Action), r.Target,
			rawJSON(r.Before), rawJSON(r.After), r.RequestID, r.Source)
		if err != nil {
			return nil, err
		}
		out = append(out, ports.AuditEntry{Seq: r.Seq, Record: rec})
	}
	return out, nil
}

// rawJSON is a stored jsonb column as JSON; NULL stays nil.
func rawJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}
