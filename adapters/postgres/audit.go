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
// wants its type.
const announceSQL = `WITH ev AS (INSERT INTO outbox_events (type, at, payload) VALUES ($1, $2, $3) RETURNING id, type)
	INSERT INTO webhook_deliveries (subscription_id, event_id, next_attempt_at)
	SELECT s.id, ev.id, $2 FROM webhook_subscriptions s, ev
	WHERE s.enabled AND (cardinality(s.event_types) = 0 OR ev.type = ANY (s.event_types))`

// announce writes a in the transaction of the change that announces it.
func announce(ctx context.Context, tx sqlx.ExecerContext, a domain.Announcement) error {
	if _, err := tx.ExecContext(ctx, announceSQL, string(a.Type()), a.At(), string(a.Payload())); err != nil {
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
