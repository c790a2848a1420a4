package ports

import (
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
