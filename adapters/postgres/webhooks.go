package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// WebhookRepository stores webhook subscriptions and their deliveries
// (migration 00140), and is the delivery queue every replica claims from.
type WebhookRepository struct{ db *sqlx.DB }

// NewWebhookRepository stores webhooks through the given pool.
func NewWebhookRepository(db *sqlx.DB) *WebhookRepository { return &WebhookRepository{db: db} }

const webhookColumns = `s.id, s.url, s.event_types, s.secret, s.previous_secret, s.previous_secret_until, s.enabled,
	s.disabled_reason, s.failing_since, s.created_at, s.updated_at`

type webhookRow struct {
	ID             string         `db:"id"`
	URL            string         `db:"url"`
	EventTypes     pq.StringArray `db:"event_types"`
	Secret         string         `db:"secret"`
	PreviousSecret sql.NullString `db:"previous_secret"`
	PreviousUntil  sql.NullTime   `db:"previous_secret_until"`
	Enabled        bool           `db:"enabled"`
	DisabledReason string         `db:"disabled_reason"`
	FailingSince   sql.NullTime   `db:"failing_since"`
	CreatedAt      time.Time      `db:"created_at"`
	UpdatedAt      time.Time      `db:"updated_at"`
}

func (r webhookRow) toDomain() (domain.WebhookSubscription, error) {
	id, err := domain.ParseUUID("id", r.ID)
	if err != nil {
		return domain.WebhookSubscription{}, err
	}
	types := make([]domain.EventType, len(r.EventTypes))
	for i, t := range r.EventTypes {
		if types[i], err = domain.ParseEventType(t); err != nil {
			return domain.WebhookSubscription{}, fmt.Errorf("webhook %s has a corrupt event type: %w", r.ID, err)
		}
	}
	return domain.RehydrateWebhookSubscription(id, r.URL, types, r.Secret, r.PreviousSecret.String, fromNullTime(r.PreviousUntil),
		r.Enabled, r.DisabledReason, fromNullTime(r.FailingSince), r.CreatedAt, r.UpdatedAt), nil
}

func webhookArgs(s domain.WebhookSubscription) []any {
	types := make(pq.StringArray, 0, len(s.EventTypes()))
	for _, t := range s.EventTypes() {
		types = append(types, string(t))
	}
	prev, until := s.PreviousSecret()
	return []any{s.ID().String(), s.URL(), types, s.Secret(), sql.NullString{String: prev, Valid: prev != ""}, nullTime(until),
		s.Enabled(), s.DisabledReason(), nullTime(s.FailingSince()), dbTime(s.CreatedAt()), dbTime(s.UpdatedAt())}
}

const upsertWebhookSQL = `INSERT INTO webhook_subscriptions (id, url, event_types, secret, previous_secret, previous_secret_until,
	enabled, disabled_reason, failing_since, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
	ON CONFLICT (id) DO UPDATE SET url = $2, event_types = $3, secret = $4, previous_secret = $5, previous_secret_until = $6,
	enabled = $7, disabled_reason = $8, failing_since = $9, updated_at = $11`

// InsertWebhook stores a new subscription and its audit record.
func (r *WebhookRepository) InsertWebhook(ctx context.Context, s domain.WebhookSubscription, rec domain.AuditRecord) error {
	return inTx(ctx, r.db, readCommitted, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_subscriptions (id, url, event_types, secret, previous_secret,
			previous_secret_until, enabled, disabled_reason, failing_since, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, webhookArgs(s)...); err != nil {
			return fmt.Errorf("storing webhook %s: %w", s.ID(), mapWriteErr(err))
		}
		return writeAudit(ctx, tx, rec)
	})
}

// lockWebhook reads a subscription FOR UPDATE in tx.
func lockWebhook(ctx context.Context, tx *sqlx.Tx, id domain.UUID) (domain.WebhookSubscription, error) {
	var row webhookRow
	if err := tx.GetContext(ctx, &row, `SELECT `+webhookColumns+` FROM webhook_subscriptions s WHERE s.id = $1 FOR UPDATE`, id.String()); err != nil {
		return domain.WebhookSubscription{}, fmt.Errorf("loading webhook %s: %w", id, notFound(err))
	}
	return row.toDomain()
}

// UpdateWebhook changes a subscription under its row lock, with the audit
// record of the change.
func (r *WebhookRepository) UpdateWebhook(ctx context.Context, id domain.UUID, fn func(*domain.WebhookSubscription) error,
	audit ports.Audit[domain.WebhookSubscription]) (domain.WebhookSubscription, error) {
	var out domain.WebhookSubscription
	err := inTx(ctx, r.db, readCommitted, func(tx *sqlx.Tx) error {
		before, err := lockWebhook(ctx, tx, id)
		if err != nil {
			return err
		}
		out = before
		if err := fn(&out); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, upsertWebhookSQL, webhookArgs(out)...); err != nil {
			return fmt.Errorf("storing webhook %s: %w", id, unavailable(err))
		}
		return writeAuditOf(ctx, tx, audit, before, out)
	})
	return out, err
}

// DeleteWebhook removes a subscription; its deliveries go with it (ON
// DELETE CASCADE), the events stay for the other subscriptions.
func (r *WebhookRepository) DeleteWebhook(ctx context.Context, id domain.UUID, audit ports.Audit[domain.WebhookSubscription]) error {
	return inTx(ctx, r.db, readCommitted, func(tx *sqlx.Tx) error {
		before, err := lockWebhook(ctx, tx, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_subscriptions WHERE id = $1`, id.String()); err != nil {
			return fmt.Errorf("deleting webhook %s: %w", id, unavailable(err))
		}
		return writeAuditOf(ctx, tx, audit, before, domain.WebhookSubscription{})
	})
}

// Webhooks lists every subscription, oldest first.
func (r *WebhookRepository) Webhooks(ctx context.Context) ([]domain.WebhookSubscription, error) {
	var rows []webhookRow
	if err := r.db.SelectContext(ctx, &rows, `SELECT `+webhookColumns+` FROM webhook_subscriptions s ORDER BY s.created_at, s.id`); err != nil {
		return nil, fmt.Errorf("listing webhooks: %w", unavailable(err))
	}
	return domainOf(rows)
}

// Webhook reads one subscription.
func (r *WebhookRepository) Webhook(ctx context.Context, id domain.UUID) (domain.WebhookSubscription, error) {
	return loadByID("webhook", id, func(row *webhookRow) error {
		return r.db.GetContext(ctx, row, `SELECT `+webhookColumns+` FROM webhook_subscriptions s WHERE s.id = $1`, id.String())
	})
}

type deliveryRow struct {
	ID             int64         `db:"id"`
	EventID        string        `db:"event_id"`
	EventType      string        `db:"type"`
	Status         string        `db:"status"`
	Attempts       int           `db:"attempts"`
	NextAttemptAt  time.Time     `db:"next_attempt_at"`
	LastAttemptAt  sql.NullTime  `db:"last_attempt_at"`
	LastStatusCode sql.NullInt64 `db:"last_status_code"`
	LastError      string        `db:"last_error"`
	CreatedAt      time.Time     `db:"created_at"`
}

// WebhookDeliveries is a page of a subscription's delivery log, newest
// first (webhook_deliveries_subscription_idx).
func (r *WebhookRepository) WebhookDeliveries(ctx context.Context, id domain.UUID, limit int, before int64) ([]ports.WebhookDelivery, error) {
	var rows []deliveryRow
	err := r.db.SelectContext(ctx, &rows, `SELECT d.id, d.event_id, e.type, d.status, d.attempts, d.next_attempt_at, d.last_attempt_at,
		d.last_status_code, d.last_error, d.created_at
		FROM webhook_deliveries d JOIN outbox_events e ON e.id = d.event_id
		WHERE d.subscription_id = $1 AND ($2::bigint = 0 OR d.id < $2::bigint) ORDER BY d.id DESC LIMIT $3`, id.String(), before, max(limit, 0))
	if err != nil {
		return nil, fmt.Errorf("listing deliveries of webhook %s: %w", id, unavailable(err))
	}
	out := make([]ports.WebhookDelivery, 0, len(rows))
	for _, row := range rows {
		eid, err := domain.ParseUUID("event_id", row.EventID)
		if err != nil {
			return nil, err
		}
		out = append(out, ports.WebhookDelivery{ID: row.ID, EventID: eid, EventType: domain.EventType(row.EventType),
			Status: ports.DeliveryStatus(row.Status), Attempts: row.Attempts, NextAttemptAt: row.NextAttemptAt.UTC(),
			LastAttemptAt: fromNullTime(row.LastAttemptAt), LastStatusCode: int(row.LastStatusCode.Int64),
			LastError: row.LastError, CreatedAt: row.CreatedAt.UTC()})
	}
	return out, nil
}

// AnnounceTo writes a test event and its one delivery, to subscription id
// only, with its audit record.
func (r *WebhookRepository) AnnounceTo(ctx context.Context, id, eventID domain.UUID, a domain.Announcement, rec domain.AuditRecord) error {
	return inTx(ctx, r.db, readCommitted, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `WITH ev AS (INSERT INTO outbox_events (id, type, at, payload) VALUES ($2, $3, $4, $5) RETURNING id)
			INSERT INTO webhook_deliveries (subscription_id, event_id, next_attempt_at, created_at)
			SELECT s.id, ev.id, $4, $4 FROM webhook_subscriptions s, ev WHERE s.id = $1 FOR KEY SHARE OF s`, // deleted meanwhile: none, NOT_FOUND
			id.String(), eventID.String(), string(a.Type()), a.At(), string(a.Payload()))
		if err != nil {
			return fmt.Errorf("announcing %s to webhook %s: %w", a.Type(), id, unavailable(err))
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("webhook %s: %w", id, domain.ErrNotFound)
		}
		return writeAudit(ctx, tx, rec)
	})
}

// claimSQL leases due pending deliveries of enabled subscriptions, oldest
// due first, skipping rows another replica's claim holds: attempts + 1
// and next_attempt_at at the lease's end, committed with the claim, so a
// replica that dies mid-delivery leaves them due again after the lease.
// The same statement reads what to send: the event and the subscription.
const claimSQL = `WITH due AS (
		SELECT d.id FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
		WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND s.enabled
		ORDER BY d.next_attempt_at LIMIT $2 FOR UPDATE OF d SKIP LOCKED),
	claimed AS (
		UPDATE webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = $3 FROM due WHERE d.id = due.id
		RETURNING d.id, d.attempts, d.subscription_id, d.event_id)
	SELECT c.id AS delivery_id, c.attempts, e.id AS ev_id, e.type AS ev_type, e.at AS ev_at, e.payload AS ev_payload, ` + webhookColumns + `
	FROM claimed c JOIN outbox_events e ON e.id = c.event_id JOIN webhook_subscriptions s ON s.id = c.subscription_id
	ORDER BY c.id`

type claimRow struct {
	DeliveryID int64     `db:"delivery_id"`
	Attempts   int       `db:"attempts"`
	EventID    string    `db:"ev_id"`
	EventType  string    `db:"ev_type"`
	EventAt    time.Time `db:"ev_at"`
	Payload    []byte    `db:"ev_payload"`
	webhookRow
}

// ClaimDeliveries leases up to limit due deliveries until leaseUntil.
func (r *WebhookRepository) ClaimDeliveries(ctx context.Context, now time.Time, limit int, leaseUntil time.Time) ([]ports.ClaimedDelivery, error) {
	var rows []claimRow
	if err := r.db.SelectContext(ctx, &rows, claimSQL, dbTime(now), limit, dbTime(leaseUntil)); err != nil {
		return nil, fmt.Errorf("claiming deliveries: %w", unavailable(err))
	}
	out := make([]ports.ClaimedDelivery, 0, len(rows))
	for _, row := range rows {
		sub, err := row.toDomain()
		if err != nil {
			return nil, err
		}
		eid, err := domain.ParseUUID("event_id", row.EventID)
		if err != nil {
			return nil, err
		}
		out = append(out, ports.ClaimedDelivery{ID: row.DeliveryID, Attempts: row.Attempts, Subscription: sub,
			Envelope: ports.WebhookEnvelope{ID: eid, Type: domain.EventType(row.EventType), Time: row.EventAt.UTC(),
				Version: domain.EventSchemaVersion, Data: json.RawMessage(row.Payload)}})
	}
	return out, nil
}

// finishSQL stores an attempt's outcome unless the delivery was claimed
// again since (its attempts moved on) or is no longer pending.
const finishSQL = `UPDATE webhook_deliveries SET status = $3, next_attempt_at = $4, last_attempt_at = $5,
	last_status_code = NULLIF($6, 0), last_error = $7 WHERE id = $1 AND attempts = $2 AND status = 'pending'
	RETURNING subscription_id`

// FinishDelivery stores an attempt's outcome, unless the delivery was
// claimed again since, and settles the subscription's failing state under
// its row lock.
func (r *WebhookRepository) FinishDelivery(ctx context.Context, o ports.DeliveryOutcome, settle func(*domain.WebhookSubscription)) error {
	if settle == nil {
		return r.FinishDeliveries(ctx, []ports.DeliveryOutcome{o})
	}
	args := []any{o.ID, o.Attempts, string(o.Status), dbTime(o.NextAttemptAt), dbTime(o.At), o.StatusCode, o.Error}
	return inTx(ctx, r.db, readCommitted, func(tx *sqlx.Tx) error {
		var sub string
		err := tx.GetContext(ctx, &sub, finishSQL, args...)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // claimed again since, or deleted: the newer claim's outcome counts
		}
		if err != nil {
			return fmt.Errorf("storing delivery %d: %w", o.ID, unavailable(err))
		}
		id, err := domain.ParseUUID("subscription_id", sub)
		if err != nil {
			return err
		}
		s, err := lockWebhook(ctx, tx, id)
		if err != nil {
			return err
		}
		settle(&s)
		if _, err := tx.ExecContext(ctx, upsertWebhookSQL, webhookArgs(s)...); err != nil {
			return fmt.Errorf("storing webhook %s: %w", id, unavailable(err))
		}
		return nil
	})
}

// finishManySQL is finishSQL over arrays, one element per outcome.
const finishManySQL = `WITH done AS (
	UPDATE webhook_deliveries d SET status = o.status, next_attempt_at = o.next_at, last_attempt_at = o.at,
	last_status_code = NULLIF(o.code, 0), last_error = o.error
	FROM unnest($1::bigint[], $2::int[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::int[], $7::text[])
		AS o(id, attempts, status, next_at, at, code, error)
	WHERE d.id = o.id AND d.attempts = o.attempts AND d.status = 'pending'
	RETURNING d.subscription_id, o.status, o.at)
	UPDATE webhook_subscriptions s SET failing_since = NULL, updated_at = greatest(s.updated_at, x.at)
	FROM (SELECT subscription_id, max(at) AS at FROM done WHERE status = 'delivered' GROUP BY subscription_id) x
	WHERE s.id = x.subscription_id AND s.failing_since <= x.at`

// FinishDeliveries stores outcomes in one statement, each unless its
// delivery was claimed again since; a delivered one ends its
// subscription's failing period begun at or before it (Succeeded's rule,
// here for a period begun since the claim read the subscription). A
// healthy subscription's row is not written: its failing_since is NULL.
func (r *WebhookRepository) FinishDeliveries(ctx context.Context, os []ports.DeliveryOutcome) error {
	ids, attempts, codes := make([]int64, len(os)), make([]int64, len(os)), make([]int64, len(os))
	statuses, nexts, ats, errs := make([]string, len(os)), make([]string, len(os)), make([]string, len(os)), make([]string, len(os))
	for i, o := range os {
		ids[i], attempts[i], codes[i] = o.ID, int64(o.Attempts), int64(o.StatusCode)
		statuses[i], errs[i] = string(o.Status), o.Error
		nexts[i], ats[i] = dbTime(o.NextAttemptAt).Format(time.RFC3339Nano), dbTime(o.At).Format(time.RFC3339Nano)
	}
	if _, err := r.db.ExecContext(ctx, finishManySQL, pq.Array(ids), pq.Array(attempts), pq.Array(statuses), pq.Array(nexts),
		pq.Array(ats), pq.Array(codes), pq.Array(errs)); err != nil {
		return fmt.Errorf("storing %d deliveries: %w", len(os), unavailable(err))
	}
	return nil
}
