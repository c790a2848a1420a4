package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// DeviceRepository stores devices in the devices table.
type DeviceRepository struct {
	db *sqlx.DB
}

var _ ports.DeviceRepository = (*DeviceRepository)(nil)

// NewDeviceRepository stores devices through the given pool.
func NewDeviceRepository(db *sqlx.DB) *DeviceRepository { return &DeviceRepository{db: db} }

type deviceRow struct {
	DeviceID       string         `db:"device_id"`
	Model          string         `db:"model"`
	CurrentVersion sql.NullString `db:"current_version"`
	TokenHash      []byte         `db:"token_hash"`
	LastSeenAt     sql.NullTime   `db:"last_seen_at"`
	CreatedAt      time.Time      `db:"created_at"`
}

const deviceColumns = `device_id, model, current_version, token_hash, last_seen_at, created_at`

func newDeviceRow(d domain.Device) deviceRow {
	h := d.TokenHash()
	return deviceRow{
		DeviceID:       d.ID(),
		Model:          d.Model(),
		CurrentVersion: nullString(d.CurrentVersion().String()),
		TokenHash:      h[:],
		LastSeenAt:     nullTime(d.LastSeenAt()),
		CreatedAt:      dbTime(d.CreatedAt()),
	}
}

func (r deviceRow) toDomain() (domain.Device, error) {
	var v domain.Version
	if r.CurrentVersion.Valid {
		var err error
		if v, err = domain.ParseVersion("current_version", r.CurrentVersion.String); err != nil {
			return domain.Device{}, fmt.Errorf("device %q has a corrupt current_version: %w", r.DeviceID, err)
		}
	}
	var h domain.TokenHash
	if len(r.TokenHash) != len(h) {
		return domain.Device{}, fmt.Errorf("device %q has a corrupt token hash (%d bytes)", r.DeviceID, len(r.TokenHash))
	}
	copy(h[:], r.TokenHash)
	return domain.RehydrateDevice(r.DeviceID, r.Model, v, h, fromNullTime(r.LastSeenAt), r.CreatedAt.UTC()), nil
}

// Create stores a new device; domain.ErrDeviceExists if the id is taken.
func (s *DeviceRepository) Create(ctx context.Context, d domain.Device) error {
	r := newDeviceRow(d)
	_, err := s.db.ExecContext(ctx, `INSERT INTO devices (`+deviceColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		r.DeviceID, r.Model, r.CurrentVersion, r.TokenHash, r.LastSeenAt, r.CreatedAt)
	if err != nil {
		return fmt.Errorf("storing device %q: %w", d.ID(), mapWriteErr(err))
	}
	return nil
}

// Get loads a device by id.
func (s *DeviceRepository) Get(ctx context.Context, id string) (domain.Device, error) {
	if !validDeviceID(id) {
		return domain.Device{}, fmt.Errorf("loading device: %w", domain.ErrNotFound)
	}
	var r deviceRow
	if err := s.db.GetContext(ctx, &r, `SELECT `+deviceColumns+` FROM devices WHERE device_id = $1`, id); err != nil {
		return domain.Device{}, fmt.Errorf("loading device %q: %w", id, notFound(err))
	}
	return r.toDomain()
}

// GetByTokenHash finds the device a presented token belongs to (an index
// lookup on the unique token_hash).
func (s *DeviceRepository) GetByTokenHash(ctx context.Context, h domain.TokenHash) (domain.Device, error) {
	var r deviceRow
	if err := s.db.GetContext(ctx, &r, `SELECT `+deviceColumns+` FROM devices WHERE token_hash = $1`, h[:]); err != nil {
		return domain.Device{}, fmt.Errorf("loading device by token: %w", notFound(err))
	}
	return r.toDomain()
}

// Update loads the device with a row lock, lets fn change it, and stores
// it, all in one transaction; it returns the device as stored. The lock is
// FOR NO KEY UPDATE: it serialises Updates of the device but does not hold
// up the foreign-key checks of tasks being created for it. fn's error is returned as is and nothing is written. A token
// rotated here stops working as soon as the transaction commits.
func (s *DeviceRepository) Update(ctx context.Context, id string, fn func(*domain.Device) error) (domain.Device, error) {
	if !validDeviceID(id) {
		return domain.Device{}, fmt.Errorf("loading device: %w", domain.ErrNotFound)
	}
	var out domain.Device
	err := inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		var r deviceRow
		if err := tx.GetContext(ctx, &r, `SELECT `+deviceColumns+` FROM devices WHERE device_id = $1 FOR NO KEY UPDATE`, id); err != nil {
			return fmt.Errorf("loading device %q: %w", id, notFound(err))
		}
		d, err := r.toDomain()
		if err != nil {
			return err
		}
		if err := fn(&d); err != nil {
			return err
		}
		w := newDeviceRow(d)
		if _, err := tx.ExecContext(ctx, `UPDATE devices SET model = $2, current_version = $3, token_hash = $4, last_seen_at = $5
			WHERE device_id = $1`, id, w.Model, w.CurrentVersion, w.TokenHash, w.LastSeenAt); err != nil {
			return fmt.Errorf("storing device %q: %w", id, mapWriteErr(err))
		}
		w.DeviceID, w.CreatedAt = r.DeviceID, r.CreatedAt
		out, err = w.toDomain()
		return err
	})
	if err != nil {
		return domain.Device{}, err
	}
	return out, nil
}

// RecordSeen stores the version a device reported and when, in one
// UPDATE. Reports may arrive out of order (two replicas, or a write-behind
// batch flushed late), so an older report never overwrites a newer one:
// last_seen_at only moves forward and current_version follows it.
func (s *DeviceRepository) RecordSeen(ctx context.Context, id string, v domain.Version, at time.Time) error {
	if !validDeviceID(id) {
		return fmt.Errorf("recording a check: %w", domain.ErrNotFound)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE devices SET
			current_version = CASE WHEN last_seen_at IS NULL OR last_seen_at <= $3 THEN $2 ELSE current_version END,
			last_seen_at = GREATEST(last_seen_at, $3)
		WHERE device_id = $1`, id, nullString(v.String()), dbTime(at))
	if err != nil {
		return fmt.Errorf("recording a check of device %q: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("recording a check of device %q: %w", id, domain.ErrNotFound)
	}
	return nil
}
