package ports

import (
	"cmp"
	"context"
	"time"

	"github.com/ai-device/ota/domain"
)

// AuditFilter selects audit records (GET /admin/audit). Zero fields match
// all.
type AuditFilter struct {
	// Actor is "root", a username (their sessions and their tokens) or an
	// API token's id.
	Actor  string
	Target string
	Action domain.AuditAction
	// Since and Until bound the records' time: Since <= at < Until.
	Since, Until time.Time
	// After continues a listing after this position (newest first).
	After *AuditCursor
	Limit int
}

// AuditCursor is a position in the (at, seq) order of records, newest first.
type AuditCursor struct {
	At  time.Time
	Seq int64
}

// AuditEntry is a stored record and its position.
type AuditEntry struct {
	Seq    int64
	Record domain.AuditRecord
}

// AuditLog reads the audit records; records are written by the stores
// in the transaction of the change they record, never through this port,
// and nothing changes or removes them.
type AuditLog interface {
	// ListAudit returns the records the filter selects, newest first.
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
}

// AuditQuery is the audit listing's filter as received (GET
// /admin/audit's query, the console's form): the use case parses it.
type AuditQuery struct {
	Actor, Target, Action string
	// Since and Until are RFC 3339 times: Since <= at < Until.
	Since, Until string
	Limit, After string
}

// AuditPage is one page of records, newest first, and the cursor of the
// next ("" on the last).
type AuditPage struct {
	Items []AuditEntry
	Next  string
}

// AuditService is what the edges ask of the audit log: reading it, for a
// principal holding audit:read.
type AuditService interface {
	ListAudit(ctx context.Context, who domain.Principal, q AuditQuery) (AuditPage, error)
}

// Selects is the filter as a test of one entry, paging aside: the meaning
// of each field, for a store that filters in Go rather than in SQL. An
// Actor that names no one is an error.
func (f AuditFilter) Selects() (func(AuditEntry) bool, error) {
	var want domain.AuditActorRecord
	if f.Actor != "" {
		a, err := domain.ParseAuditActor(f.Actor)
		if err != nil {
			return nil, err
		}
		want = a
	}
	return func(e AuditEntry) bool {
		r, a := e.Record, e.Record.ActorRecord()
		return (f.Actor == "" || want.Kind == "root" && a.Kind == "root" || !want.Token.IsZero() && a.Token == want.Token ||
			want.User != "" && a.User == want.User) && (f.Target == "" || r.Target() == f.Target) &&
			(f.Action == "" || r.Action() == f.Action) && (f.Since.IsZero() || !r.At().Before(f.Since)) &&
			(f.Until.IsZero() || r.At().Before(f.Until)) && (f.After == nil || f.After.Precedes(e))
	}, nil
}

// Precedes reports whether e comes after the cursor, newest first.
func (c AuditCursor) Precedes(e AuditEntry) bool {
	return cmp.Or(e.Record.At().Compare(c.At), cmp.Compare(e.Seq, c.Seq)) < 0
}
