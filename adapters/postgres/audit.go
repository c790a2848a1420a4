package postgres

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// insertAuditSQL writes one audit record (migration 00130). Every store
// write an operator makes runs it in the write's own transaction, so a
// change and its record commit together or not at all.
const insertAuditSQL = `INSERT INTO audit_log (at, actor_kind, actor_user, actor_token, action, target, before, after, request_id, source)
	VALUES ($1, $2, NULLIF($3, ''), $4, $5, $6, $7, $8, $9, $10)`

// writeAudit stores rec in the transaction of the change it records; the
// zero record (a change no operator made) writes nothing.
func writeAudit(ctx context.Context, tx sqlx.ExecerContext, rec domain.AuditRecord) error {
	if rec.IsZero() {
		return nil
	}
	if _, err := tx.ExecContext(ctx, insertAuditSQL, auditArgs(rec)...); err != nil {
		return fmt.Errorf("recording %s of %s: %w", rec.Action(), rec.Target(), unavailable(err))
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
