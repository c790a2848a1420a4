package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// EventSinks keeps the event sinks' cursors over the outbox (migration
// 00160): one replica at a time publishes a sink's events.
type EventSinks struct{ db *sqlx.DB }

// NewEventSinks keeps the sinks' cursors in db.
func NewEventSinks(db *sqlx.DB) *EventSinks { return &EventSinks{db: db} }

// pendingEventsSQL reads the events after the cursor ($1, $2) that can no
// longer be joined by one sorting before them: written by a transaction
// older than every transaction still running (migration 00160 says why).
// A test event is one subscription's, not the fleet's: sinks skip it.
const pendingEventsSQL = `SELECT id, type, at, payload, xid::text AS xid, seq FROM outbox_events
	WHERE (xid, seq) > ($1::xid8, $2) AND xid < pg_snapshot_xmin(pg_current_snapshot()) AND type <> 'webhook.test'
	ORDER BY xid, seq LIMIT $3`

type pendingEventRow struct {
	ID      string          `db:"id"`
	Type    string          `db:"type"`
	At      time.Time       `db:"at"`
	Payload json.RawMessage `db:"payload"`
	XID     string          `db:"xid"`
	Seq     int64           `db:"seq"`
}

// InSinkTx claims sink name's cursor (creating it at the start of the
// outbox) with FOR UPDATE SKIP LOCKED, so that a replica finding it held
// goes on without waiting; runs fn with the pending events; and moves the
// cursor past the first n fn reports published, in the same transaction.
func (s *EventSinks) InSinkTx(ctx context.Context, name string, limit int,
	fn func(pending []ports.WebhookEnvelope) (int, error)) (held bool, err error) {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO event_sinks (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`, name); err != nil {
		return false, fmt.Errorf("creating sink %s: %w", name, unavailable(err))
	}
	var fnErr error
	err = inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		var cursor struct {
			XID string `db:"last_xid"`
			Seq int64  `db:"last_seq"`
		}
		rows, err := tx.QueryxContext(ctx, `SELECT last_xid::text AS last_xid, last_seq FROM event_sinks WHERE name = $1 FOR UPDATE SKIP LOCKED`, name)
		if err != nil {
			return fmt.Errorf("claiming sink %s: %w", name, err)
		}
		held = rows.Next()
		if held {
			err = rows.StructScan(&cursor)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
		if !held || err != nil {
			held = false
			return err
		}
		var pending []pendingEventRow
		if err := tx.SelectContext(ctx, &pending, pendingEventsSQL, cursor.XID, cursor.Seq, limit); err != nil {
			return fmt.Errorf("reading sink %s's events: %w", name, err)
		}
		envs := make([]ports.WebhookEnvelope, 0, len(pending))
		for _, r := range pending {
			id, err := domain.ParseUUID("id", r.ID)
			if err != nil {
				return err
			}
			envs = append(envs, ports.WebhookEnvelope{ID: id, Type: domain.EventType(r.Type), Time: r.At.UTC(),
				Version: domain.EventSchemaVersion, Data: r.Payload})
		}
		var n int
		n, fnErr = fn(envs)
		if n = min(max(n, 0), len(pending)); n == 0 {
			return nil
		}
		last := pending[n-1]
		if _, err := tx.ExecContext(ctx, `UPDATE event_sinks SET last_xid = $2::xid8, last_seq = $3 WHERE name = $1`, name, last.XID, last.Seq); err != nil {
			return fmt.Errorf("moving sink %s's cursor: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return held, err
	}
	return held, fnErr
}
