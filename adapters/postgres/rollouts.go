package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// RolloutRepository stores rollouts in the rollouts table. Every change is
// announced on the catalog channel (NOTIFY ota_catalog, '<model>') in its
// own transaction, for the caches of every replica (see CatalogCache).
type RolloutRepository struct {
	db        *sqlx.DB
	get       *sqlx.Stmt
	offers    *sqlx.Stmt
	allOffers *sqlx.Stmt
}

var _ ports.RolloutRepository = (*RolloutRepository)(nil)

// NewRolloutRepository stores rollouts through the given pool, preparing
// its hot statements; it fails when they cannot be prepared (no schema).
func NewRolloutRepository(db *sqlx.DB) (*RolloutRepository, error) {
	return prepared(db, "rollout repository", func(p *statements) *RolloutRepository {
		return &RolloutRepository{
			db:        db,
			get:       p.prepare(`SELECT ` + rolloutColumns + ` FROM rollouts WHERE id = $1`),
			offers:    p.prepare(offersQuery),
			allOffers: p.prepare(allOffersQuery),
		}
	})
}

type rolloutRow struct {
	ID                      string         `db:"id"`
	FirmwareID              string         `db:"firmware_id"`
	Percentage              int            `db:"percentage"`
	MaxAttempts             int            `db:"max_attempts"`
	FailureThresholdPercent sql.NullInt32  `db:"failure_threshold_percent"`
	MinSample               int            `db:"min_sample"`
	Status                  string         `db:"status"`
	PausedReason            sql.NullString `db:"paused_reason"`
	CreatedAt               time.Time      `db:"created_at"`
	UpdatedAt               time.Time      `db:"updated_at"`
	Policy                  []byte         `db:"policy"`
	RequestKey              sql.NullString `db:"request_key"`
	RequestFingerprint      sql.NullString `db:"request_fingerprint"`
}

// rolloutFields lists the rollouts columns in rolloutRow's order.
var rolloutFields = []string{
	"id", "firmware_id", "percentage", "max_attempts", "failure_threshold_percent", "min_sample",
	"status", "paused_reason", "created_at", "updated_at", "policy", "request_key", "request_fingerprint",
}

var rolloutColumns = columns("", rolloutFields)

func newRolloutRow(ro domain.Rollout) rolloutRow {
	rec := ro.Record()
	r := rolloutRow{
		ID:           rec.ID,
		FirmwareID:   rec.FirmwareID,
		Percentage:   rec.Percentage,
		MaxAttempts:  rec.MaxAttempts,
		MinSample:    rec.MinSample,
		Status:       rec.Status.String(),
		PausedReason: nullString(rec.PausedReason.String()),
		CreatedAt:    dbTime(rec.CreatedAt),
		UpdatedAt:    dbTime(rec.UpdatedAt),
		Policy:       encodePolicy(rec),
		RequestKey:   nullString(rec.RequestKey.Key()),
		// The fingerprint goes with its key, as the table's check wants.
		RequestFingerprint: sql.NullString{String: rec.RequestKey.Fingerprint(), Valid: rec.RequestKey.Key() != ""},
	}
	if rec.FailureThresholdPercent != nil {
		r.FailureThresholdPercent = sql.NullInt32{Int32: int32(*rec.FailureThresholdPercent), Valid: true}
	}
	return r
}

func (r rolloutRow) toDomain() (domain.Rollout, error) {
	st, err := domain.ParseRolloutStatus(r.Status)
	if err != nil {
		return domain.Rollout{}, fmt.Errorf("rollout %s has a corrupt status: %w", r.ID, err)
	}
	reason, err := domain.ParsePausedReason(r.PausedReason.String)
	if err != nil {
		return domain.Rollout{}, fmt.Errorf("rollout %s has a corrupt paused_reason: %w", r.ID, err)
	}
	rec := domain.RolloutRecord{
		ID: r.ID, FirmwareID: r.FirmwareID, Percentage: r.Percentage, MaxAttempts: r.MaxAttempts,
		MinSample: r.MinSample, Status: st, PausedReason: reason,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		RequestKey: domain.RehydrateRequestKey(r.RequestKey.String, r.RequestFingerprint.String),
	}
	if r.FailureThresholdPercent.Valid {
		t := int(r.FailureThresholdPercent.Int32)
		rec.FailureThresholdPercent = &t
	}
	if err := decodePolicy(r.Policy, &rec); err != nil {
		return domain.Rollout{}, err
	}
	return domain.RehydrateRollout(rec), nil
}

// Create stores a new rollout. A firmware that does not exist is
// domain.ErrNotFound (the foreign key says so, even if the firmware was
// checked a moment before).
func (s *RolloutRepository) Create(ctx context.Context, ro domain.Rollout, rec domain.AuditRecord) error {
	if ro.ID().IsZero() { // only the zero Rollout has no id
		return errors.New("storing rollout: it has no id")
	}
	if ro.FirmwareID().IsZero() {
		return fmt.Errorf("storing rollout %s: the firmware does not exist: %w", ro.ID(), domain.ErrNotFound)
	}
	r := newRolloutRow(ro)
	// One statement: the check that the firmware is still released (FOR
	// SHARE waits for, and then sees, a concurrent revoke), the insert,
	// and its announcement; then the record, in the same transaction.
	inserted := 0
	err := inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		return s.insert(ctx, tx, r, rec, &inserted)
	})
	if err != nil {
		return err
	}
	if inserted == 0 {
		var exists bool
		if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM firmwares WHERE id = $1)`, r.FirmwareID).Scan(&exists); err != nil {
			return fmt.Errorf("storing rollout %s: %w", r.ID, unavailable(err))
		}
		if exists {
			return fmt.Errorf("storing rollout %s: %w", r.ID, domain.ErrFirmwareRevoked)
		}
		return fmt.Errorf("storing rollout %s: the firmware does not exist: %w", r.ID, domain.ErrNotFound)
	}
	return nil
}

// insert is Create's statement and, when it inserted the rollout, its
// audit record, in tx.
func (s *RolloutRepository) insert(ctx context.Context, tx *sqlx.Tx, r rolloutRow, rec domain.AuditRecord, inserted *int) error {
	rows, err := tx.QueryContext(ctx, `WITH f AS (SELECT id, model FROM firmwares WHERE id = $2 AND status = 'released' FOR SHARE),
		ins AS (INSERT INTO rollouts (`+rolloutColumns+`)
			SELECT $1, f.id, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13 FROM f RETURNING firmware_id)
		SELECT pg_notify('`+catalogChannel+`', f.model) FROM ins JOIN f ON f.id = ins.firmware_id`,
		r.ID, r.FirmwareID, r.Percentage, r.MaxAttempts, r.FailureThresholdPercent, r.MinSample,
		r.Status, r.PausedReason, r.CreatedAt, r.UpdatedAt, r.Policy, r.RequestKey, r.RequestFingerprint)
	if err != nil {
		return fmt.Errorf("storing rollout %s: %w", r.ID, mapWriteErr(err))
	}
	for rows.Next() {
		*inserted++
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("storing rollout %s: %w", r.ID, mapWriteErr(err))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("storing rollout %s: %w", r.ID, mapWriteErr(err))
	}
	if *inserted == 0 {
		return nil
	}
	return writeAudit(ctx, tx, rec)
}

// Get loads a rollout by id (parsed, canonical); the zero id is not found.
func (s *RolloutRepository) Get(ctx context.Context, id domain.UUID) (domain.Rollout, error) {
	return loadByID[domain.Rollout]("rollout", id, func(r *rolloutRow) error { return s.get.GetContext(ctx, r, id.String()) })
}

// ByRequestKey loads the rollout started with an Idempotency-Key, from
// the primary.
func (s *RolloutRepository) ByRequestKey(ctx context.Context, key string) (domain.Rollout, error) {
	var r rolloutRow
	err := s.db.GetContext(ctx, &r, `SELECT `+rolloutColumns+` FROM rollouts WHERE request_key = $1`, key)
	if err != nil {
		return domain.Rollout{}, fmt.Errorf("loading the rollout of an Idempotency-Key: %w", notFound(err))
	}
	return r.toDomain()
}

// storeRollout writes the changeable fields of ro over the stored row
// before (the id, the firmware and the start time never change: tasks
// reference the pair), in tx, and announces the change on the catalog
// channel at commit.
func storeRollout(ctx context.Context, tx *sqlx.Tx, before rolloutRow, ro domain.Rollout) (domain.Rollout, error) {
	w := newRolloutRow(ro)
	w.ID, w.FirmwareID, w.CreatedAt = before.ID, before.FirmwareID, before.CreatedAt
	if _, err := tx.ExecContext(ctx, `UPDATE rollouts SET percentage = $2, max_attempts = $3,
			failure_threshold_percent = $4, min_sample = $5, status = $6, paused_reason = $7, updated_at = $8, policy = $9
		WHERE id = $1`, w.ID, w.Percentage, w.MaxAttempts, w.FailureThresholdPercent, w.MinSample,
		w.Status, w.PausedReason, w.UpdatedAt, w.Policy); err != nil {
		return domain.Rollout{}, fmt.Errorf("storing rollout %s: %w", w.ID, mapWriteErr(err))
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify('`+catalogChannel+`', model) FROM firmwares WHERE id = $1`, w.FirmwareID); err != nil {
		return domain.Rollout{}, fmt.Errorf("announcing the change of rollout %s: %w", w.ID, err)
	}
	return w.toDomain()
}

// offerRow is one row of the offers join: sqlx fills F from the columns
// named "f.*" and R from "r.*".
type offerRow struct {
	F firmwareRow `db:"f"`
	R rolloutRow  `db:"r"`
}

var offersQuery = `SELECT ` + columns("f", firmwareFields) + `, ` + columns("r", rolloutFields) + `
	FROM firmwares f
	JOIN rollouts r ON r.firmware_id = f.id
	WHERE f.model = $1 AND f.status = 'released' AND r.status = 'active'
	ORDER BY f.id, r.created_at, r.id`

// allOffersQuery is offersQuery for every model at once (the cache's
// periodic refresh).
var allOffersQuery = `SELECT ` + columns("f", firmwareFields) + `, ` + columns("r", rolloutFields) + `
	FROM firmwares f
	JOIN rollouts r ON r.firmware_id = f.id
	WHERE f.status = 'released' AND r.status = 'active'
	ORDER BY f.model, f.id, r.created_at, r.id`

// Offers returns every active rollout of released firmware of a model with
// its firmware, in one query (every device check runs it), highest version
// first (domain.SortOffers). Never nil.
func (s *RolloutRepository) Offers(ctx context.Context, model string) ([]domain.Offer, error) {
	if domain.ValidateIdentifier("model", model) != nil {
		return []domain.Offer{}, nil // no firmware can be published for it
	}
	var rows []offerRow
	if err := s.offers.SelectContext(ctx, &rows, model); err != nil {
		return nil, fmt.Errorf("loading the offers for model %q: %w", model, unavailable(err))
	}
	out, err := offersFrom(rows)
	if err != nil {
		return nil, err
	}
	domain.SortOffers(out)
	return out, nil
}

// AllOffers is Offers for every model, by model (models without offers are
// absent), in one query.
func (s *RolloutRepository) AllOffers(ctx context.Context) (map[string][]domain.Offer, error) {
	var rows []offerRow
	if err := s.allOffers.SelectContext(ctx, &rows); err != nil {
		return nil, fmt.Errorf("loading every model's offers: %w", unavailable(err))
	}
	all, err := offersFrom(rows)
	if err != nil {
		return nil, err
	}
	out := map[string][]domain.Offer{}
	for _, o := range all {
		out[o.Firmware.Model()] = append(out[o.Firmware.Model()], o)
	}
	for _, offers := range out {
		domain.SortOffers(offers)
	}
	return out, nil
}

func offersFrom(rows []offerRow) ([]domain.Offer, error) {
	out := make([]domain.Offer, 0, len(rows))
	for _, r := range rows {
		f, err := r.F.toDomain()
		if err != nil {
			return nil, err
		}
		ro, err := r.R.toDomain()
		if err != nil {
			return nil, err
		}
		out = append(out, domain.Offer{Firmware: f, Rollout: ro})
	}
	return out, nil
}
