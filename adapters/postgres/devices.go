package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// DeviceRepository stores devices in the devices table. Its hot read (by
// id) and the record of a check are prepared statements; a token is looked
// up with the device's task state (TaskRepository.CheckView).
type DeviceRepository struct {
	db        *sqlx.DB
	get       *sqlx.Stmt
	seen      *sqlx.Stmt
	seenBatch *sqlx.Stmt
}

var _ ports.DeviceRepository = (*DeviceRepository)(nil)

// NewDeviceRepository stores devices through the given pool, preparing its
// hot statements; it fails when they cannot be prepared (no schema).
func NewDeviceRepository(db *sqlx.DB) (*DeviceRepository, error) {
	return prepared(db, "device repository", func(p *statements) *DeviceRepository {
		return &DeviceRepository{
			db:        db,
			get:       p.prepare(`SELECT ` + deviceColumns + ` FROM devices WHERE device_id = $1`),
			seen:      p.prepare(recordSeenSQL),
			seenBatch: p.prepare(recordSeenBatchSQL),
		}
	})
}

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
		DeviceID:       d.ID().String(),
		Model:          d.Model(),
		CurrentVersion: nullString(d.CurrentVersion().String()),
		TokenHash:      h[:],
		LastSeenAt:     nullTime(d.LastSeenAt()),
		CreatedAt:      dbTime(d.CreatedAt()),
	}
}

// scan reads a row selected with deviceColumns.
func (r *deviceRow) scan(row interface{ Scan(...any) error }) error {
	return row.Scan(&r.DeviceID, &r.Model, &r.CurrentVersion, &r.TokenHash, &r.LastSeenAt, &r.CreatedAt)
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
func (s *DeviceRepository) Create(ctx context.Context, d domain.Device, rec domain.AuditRecord) error {
	r := newDeviceRow(d)
	const insert = `INSERT INTO devices (` + deviceColumns + `) VALUES ($1, $2, $3, $4, $5, $6)`
	if rec.IsZero() { // a fixture's, or a tool's: one statement
		if _, err := s.db.ExecContext(ctx, insert, r.DeviceID, r.Model, r.CurrentVersion, r.TokenHash, r.LastSeenAt, r.CreatedAt); err != nil {
			return fmt.Errorf("storing device %q: %w", d.ID(), mapWriteErr(err))
		}
		return nil
	}
	return inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, insert, r.DeviceID, r.Model, r.CurrentVersion, r.TokenHash, r.LastSeenAt, r.CreatedAt); err != nil {
			return fmt.Errorf("storing device %q: %w", d.ID(), mapWriteErr(err))
		}
		return writeAudit(ctx, tx, rec)
	})
}

// Get loads a device by id.
func (s *DeviceRepository) Get(ctx context.Context, devID domain.DeviceID) (domain.Device, error) {
	id := devID.String()
	if devID.IsZero() {
		return domain.Device{}, fmt.Errorf("loading device: %w", domain.ErrNotFound)
	}
	var r deviceRow
	if err := r.scan(s.get.QueryRowContext(ctx, id)); err != nil {
		return domain.Device{}, fmt.Errorf("loading device %q: %w", id, notFound(err))
	}
	return r.toDomain()
}

// Update loads the device with a row lock, lets fn change it, and stores
// it, all in one transaction; it returns the device as stored. The lock is
// FOR NO KEY UPDATE: it serialises Updates of the device but does not hold
// up the foreign-key checks of tasks being created for it. fn's error is returned as is and nothing is written. A token
// rotated here stops working as soon as the transaction commits — on the
// primary; a read replica knows the old one for up to its lag bound
// (docs/SCALING.md, "Read replicas").
func (s *DeviceRepository) Update(ctx context.Context, devID domain.DeviceID, fn func(*domain.Device) error, rec domain.AuditRecord) (domain.Device, error) {
	return inDeviceTx(ctx, s.db, devID, func(tx *sqlx.Tx, id string) (domain.Device, error) {
		d, err := updateDeviceTx(ctx, tx, id, fn)
		if err != nil {
			return domain.Device{}, err
		}
		return d, writeAudit(ctx, tx, rec)
	})
}

// updateDeviceTx locks the device row, lets fn change the device and
// stores it, in tx; it returns the device as stored.
func updateDeviceTx(ctx context.Context, tx *sqlx.Tx, id string, fn func(*domain.Device) error) (domain.Device, error) {
	var r deviceRow
	if err := tx.GetContext(ctx, &r, `SELECT `+deviceColumns+` FROM devices WHERE device_id = $1 FOR NO KEY UPDATE`, id); err != nil {
		return domain.Device{}, fmt.Errorf("loading device %q: %w", id, notFound(err))
	}
	d, err := r.toDomain()
	if err != nil {
		return domain.Device{}, err
	}
	if err := fn(&d); err != nil {
		return domain.Device{}, err
	}
	w := newDeviceRow(d)
	if _, err := tx.ExecContext(ctx, `UPDATE devices SET model = $2, current_version = $3, token_hash = $4, last_seen_at = $5
		WHERE device_id = $1`, id, w.Model, w.CurrentVersion, w.TokenHash, w.LastSeenAt); err != nil {
		return domain.Device{}, fmt.Errorf("storing device %q: %w", id, mapWriteErr(err))
	}
	w.DeviceID, w.CreatedAt = r.DeviceID, r.CreatedAt
	return w.toDomain()
}

// recordSeenSQL records one check. Reports may arrive out of order (two
// replicas, or a write-behind batch flushed late), so an older report never
// overwrites a newer one: last_seen_at only moves forward and
// current_version follows it. $4 is false for a check that repeats the
// version its caller read (domain.Device.SeenChangesVersion): it moves
// last_seen_at only, so that a stale read never writes an old version
// back over a success or a report stored since.
const recordSeenSQL = `UPDATE devices SET
		current_version = CASE WHEN $4 AND (last_seen_at IS NULL OR last_seen_at <= $3) THEN $2 ELSE current_version END,
		last_seen_at = GREATEST(last_seen_at, $3)
	WHERE device_id = $1`

// recordSeenBatchSQL is recordSeenSQL for many devices in one statement:
// four parallel arrays (id, version or the empty string for none, time,
// whether the version is a new report), one element per
// device — a device may appear once only, as UPDATE … FROM applies one
// joined row per target row.
const recordSeenBatchSQL = `UPDATE devices d SET
		current_version = CASE WHEN u.changes AND (d.last_seen_at IS NULL OR d.last_seen_at <= u.at) THEN NULLIF(u.v, '') ELSE d.current_version END,
		last_seen_at = GREATEST(d.last_seen_at, u.at)
	FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::boolean[]) AS u(id, v, at, changes)
	WHERE d.device_id = u.id`

// RecordSeen stores the version a device reported and when, in one
// UPDATE (recordSeenSQL: never backwards). It writes every check; the
// write-behind (WriteBehindDevices) is what skips the ones that change
// nothing within its resolution.
func (s *DeviceRepository) RecordSeen(ctx context.Context, stored domain.Device, v domain.Version, at time.Time) error {
	id := stored.ID().String()
	if stored.ID().IsZero() {
		return fmt.Errorf("recording a check: %w", domain.ErrNotFound)
	}
	res, err := s.seen.ExecContext(ctx, id, nullString(v.String()), dbTime(at), stored.SeenChangesVersion(v))
	if err != nil {
		return fmt.Errorf("recording a check of device %q: %w", id, unavailable(err))
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("recording a check of device %q: %w", id, domain.ErrNotFound)
	}
	return nil
}

// SeenReport is one device's check, as RecordSeenBatch stores it.
type SeenReport struct {
	DeviceID string
	Version  domain.Version
	At       time.Time
	// Repeat marks a check that repeated the version its caller read
	// (domain.Device.SeenChangesVersion false): only At is stored.
	Repeat bool
}

// RecordSeenBatch stores many checks in one statement, with RecordSeen's
// never-backwards rule, and returns how many devices it updated (unknown
// ids are skipped). Each device may appear at most once: the caller
// coalesces repeats, keeping the newest. The ids are sent sorted: for a
// batch far smaller than the table Postgres joins by index in array order,
// so two replicas flushing overlapping batches lock rows in the same order;
// should a deadlock happen anyway, Postgres aborts one batch and its
// caller retries it.
func (s *DeviceRepository) RecordSeenBatch(ctx context.Context, reports []SeenReport) (int64, error) {
	if len(reports) == 0 {
		return 0, nil
	}
	sorted := make([]SeenReport, len(reports))
	copy(sorted, reports)
	slices.SortFunc(sorted, func(a, b SeenReport) int { return strings.Compare(a.DeviceID, b.DeviceID) })
	ids := make([]string, len(sorted))
	versions := make([]string, len(sorted))
	ats := make([]string, len(sorted))
	changes := make([]bool, len(sorted))
	for i, r := range sorted {
		changes[i] = !r.Repeat
		if i > 0 && sorted[i-1].DeviceID == r.DeviceID {
			return 0, fmt.Errorf("recording checks: device %q appears twice in one batch", r.DeviceID)
		}
		ids[i], versions[i], ats[i] = r.DeviceID, r.Version.String(), dbTime(r.At).Format(time.RFC3339Nano)
	}
	res, err := s.seenBatch.ExecContext(ctx, pq.StringArray(ids), pq.StringArray(versions), pq.StringArray(ats), pq.BoolArray(changes))
	if err != nil {
		return 0, fmt.Errorf("recording %d checks: %w", len(sorted), unavailable(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("recording %d checks: %w", len(sorted), unavailable(err))
	}
	return n, nil
}
