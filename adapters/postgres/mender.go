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

// AdmissionRepository stores device public keys in device_admissions.
type AdmissionRepository struct {
	db *sqlx.DB
	// generation is Generation's statement: every Mender call runs it.
	generation *lazyStmt
}

// NewAdmissionRepository stores admissions through the given pool.
func NewAdmissionRepository(db *sqlx.DB) *AdmissionRepository {
	return &AdmissionRepository{db: db, generation: &lazyStmt{query: generationSQL}}
}

type admissionRow struct {
	DeviceID   string    `db:"device_id"`
	PublicKey  string    `db:"public_key"`
	Generation int64     `db:"token_generation"`
	UpdatedAt  time.Time `db:"updated_at"`
}

func (r admissionRow) toDomain() (domain.DeviceAdmission, error) {
	a, err := domain.RehydrateDeviceAdmission(r.DeviceID, r.PublicKey, r.Generation, r.UpdatedAt.UTC())
	if err != nil {
		return domain.DeviceAdmission{}, fmt.Errorf("admission of %q is corrupt: %w", r.DeviceID, err)
	}
	return a, nil
}

type menderExecer interface {
	GetContext(ctx context.Context, dest any, query string, args ...any) error
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Get returns the device's admission.
func (s *AdmissionRepository) Get(ctx context.Context, device domain.DeviceID) (domain.DeviceAdmission, error) {
	deviceID := device.String()
	if device.IsZero() {
		return domain.DeviceAdmission{}, fmt.Errorf("loading admission: %w", domain.ErrNotFound)
	}
	var r admissionRow
	if err := s.db.GetContext(ctx, &r, `SELECT device_id, public_key, token_generation, updated_at FROM device_admissions WHERE device_id = $1`, deviceID); err != nil {
		return domain.DeviceAdmission{}, fmt.Errorf("loading admission of %q: %w", deviceID, notFound(err))
	}
	return r.toDomain()
}

// Generation returns the device's current session token generation: one
// column by primary key, the key not parsed.
func (s *AdmissionRepository) Generation(ctx context.Context, device domain.DeviceID) (int64, error) {
	deviceID := device.String()
	if device.IsZero() {
		return 0, fmt.Errorf("loading token generation: %w", domain.ErrNotFound)
	}
	var gen int64
	if err := s.generation.queryRow(ctx, s.db, deviceID).Scan(&gen); err != nil {
		return 0, fmt.Errorf("loading token generation of %q: %w", deviceID, notFound(err))
	}
	return gen, nil
}

const generationSQL = `SELECT token_generation FROM device_admissions WHERE device_id = $1`

// putAdmission stores a as it is, replacing the device's admission if it
// has one (domain.AdmitKey decides what a new key does to the generation).
func putAdmission(ctx context.Context, q menderExecer, a domain.DeviceAdmission) error {
	_, err := q.ExecContext(ctx, `INSERT INTO device_admissions (device_id, public_key, token_generation, updated_at)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (device_id) DO UPDATE SET public_key = EXCLUDED.public_key, updated_at = EXCLUDED.updated_at,
			token_generation = EXCLUDED.token_generation`,
		a.DeviceID().String(), a.Key().PEM(), a.Generation(), dbTime(a.UpdatedAt()))
	if err != nil {
		return fmt.Errorf("storing admission of %q: %w", a.DeviceID(), mapWriteErr(err))
	}
	return nil
}

// insertDevice stores a new device in a transaction.
func insertDevice(ctx context.Context, q menderExecer, d domain.Device) error {
	r := newDeviceRow(d)
	if _, err := q.ExecContext(ctx, `INSERT INTO devices (`+deviceColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		r.DeviceID, r.Model, r.CurrentVersion, r.TokenHash, r.LastSeenAt, r.CreatedAt); err != nil {
		return fmt.Errorf("storing device %q: %w", d.ID(), mapWriteErr(err))
	}
	return nil
}

// CreateDevice registers a device with its admission in one transaction.
func (s *AdmissionRepository) CreateDevice(ctx context.Context, d domain.Device, a domain.DeviceAdmission, rec domain.AuditRecord) error {
	return inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		if err := insertDevice(ctx, tx, d); err != nil {
			return err
		}
		if err := putAdmission(ctx, tx, a); err != nil {
			return err
		}
		return writeAudit(ctx, tx, rec)
	})
}

// Admit locks the device row, lets fn decide its admission, and stores it.
func (s *AdmissionRepository) Admit(ctx context.Context, device domain.DeviceID, fn func(*domain.DeviceAdmission) (domain.DeviceAdmission, error),
	rec domain.AuditRecord) (domain.DeviceAdmission, error) {
	return inDeviceTx(ctx, s.db, device, func(tx *sqlx.Tx, deviceID string) (domain.DeviceAdmission, error) {
		out, err := admitTx(ctx, tx, deviceID, fn)
		if err != nil {
			return domain.DeviceAdmission{}, err
		}
		return out, writeAudit(ctx, tx, rec)
	})
}

// UpdateDevice changes the device (fn) and, in the same transaction, its
// admission if it has one (admit), with rec: the device row, locked
// first, serialises both.
func (s *AdmissionRepository) UpdateDevice(ctx context.Context, device domain.DeviceID, fn func(*domain.Device) error,
	admit func(*domain.DeviceAdmission), rec domain.AuditRecord) (domain.Device, error) {
	return inDeviceTx(ctx, s.db, device, func(tx *sqlx.Tx, deviceID string) (domain.Device, error) {
		_, err := admitTx(ctx, tx, deviceID, func(cur *domain.DeviceAdmission) (domain.DeviceAdmission, error) {
			if cur == nil {
				return domain.DeviceAdmission{}, errNoAdmission
			}
			next := *cur
			admit(&next)
			return next, nil
		})
		if err != nil && !errors.Is(err, errNoAdmission) {
			return domain.Device{}, err
		}
		d, err := updateDeviceTx(ctx, tx, deviceID, fn)
		if err != nil {
			return domain.Device{}, err
		}
		return d, writeAudit(ctx, tx, rec)
	})
}

// errNoAdmission stops an admitTx that has nothing to change: it is
// returned before anything is written.
var errNoAdmission = errors.New("the device has no key")

// admitTx stores what fn makes of the device's admission (nil if none)
// and returns it as stored. The device row, locked first, serialises every
// change of its admission, so fn decides from what is stored now.
func admitTx(ctx context.Context, tx *sqlx.Tx, deviceID string, fn func(*domain.DeviceAdmission) (domain.DeviceAdmission, error)) (domain.DeviceAdmission, error) {
	var one int
	if err := tx.QueryRowContext(ctx, `SELECT 1 FROM devices WHERE device_id = $1 FOR NO KEY UPDATE`, deviceID).Scan(&one); err != nil {
		return domain.DeviceAdmission{}, fmt.Errorf("loading device %q: %w", deviceID, notFound(err))
	}
	var (
		cur *domain.DeviceAdmission
		r   admissionRow
	)
	err := tx.GetContext(ctx, &r, `SELECT device_id, public_key, token_generation, updated_at FROM device_admissions WHERE device_id = $1`, deviceID)
	switch {
	case err == nil:
		a, err := r.toDomain()
		if err != nil {
			return domain.DeviceAdmission{}, err
		}
		cur = &a
	case !errors.Is(err, sql.ErrNoRows):
		return domain.DeviceAdmission{}, fmt.Errorf("loading admission of %q: %w", deviceID, err)
	}
	next, err := fn(cur)
	if err != nil {
		return domain.DeviceAdmission{}, err
	}
	if err := putAdmission(ctx, tx, next); err != nil {
		return domain.DeviceAdmission{}, err
	}
	if err := tx.GetContext(ctx, &r, `SELECT device_id, public_key, token_generation, updated_at FROM device_admissions WHERE device_id = $1`, deviceID); err != nil {
		return domain.DeviceAdmission{}, err
	}
	return r.toDomain()
}

// Registered returns those of the devices that are registered, with their
// admissions, in one query.
func (s *AdmissionRepository) Registered(ctx context.Context, deviceIDs []domain.DeviceID) (map[domain.DeviceID]ports.RegisteredDevice, error) {
	out := map[domain.DeviceID]ports.RegisteredDevice{}
	if len(deviceIDs) == 0 {
		return out, nil
	}
	byID := make(map[string]domain.DeviceID, len(deviceIDs))
	ids := make([]string, 0, len(deviceIDs))
	for _, id := range deviceIDs {
		byID[id.String()] = id
		ids = append(ids, id.String())
	}
	var rows []struct {
		DeviceID   string         `db:"device_id"`
		Model      string         `db:"model"`
		PublicKey  sql.NullString `db:"public_key"`
		Generation sql.NullInt64  `db:"token_generation"`
		UpdatedAt  sql.NullTime   `db:"updated_at"`
	}
	if err := s.db.SelectContext(ctx, &rows, `SELECT d.device_id, d.model, a.public_key, a.token_generation, a.updated_at
		FROM devices d LEFT JOIN device_admissions a ON a.device_id = d.device_id
		WHERE d.device_id = ANY($1)`, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("loading registered devices: %w", unavailable(err))
	}
	for _, r := range rows {
		rd := ports.RegisteredDevice{Model: r.Model}
		if r.PublicKey.Valid {
			a, err := admissionRow{DeviceID: r.DeviceID, PublicKey: r.PublicKey.String, Generation: r.Generation.Int64,
				UpdatedAt: r.UpdatedAt.Time}.toDomain()
			if err != nil {
				return nil, err
			}
			rd.Admission = &a
		}
		out[byID[r.DeviceID]] = rd
	}
	return out, nil
}

// AuthRequestRepository stores the requests of devices waiting to be
// admitted in device_auth_requests.
type AuthRequestRepository struct{ db *sqlx.DB }

// NewAuthRequestRepository stores auth requests through the given pool.
func NewAuthRequestRepository(db *sqlx.DB) *AuthRequestRepository {
	return &AuthRequestRepository{db: db}
}

type authRequestRow struct {
	ID         string         `db:"id"`
	DeviceID   string         `db:"device_id"`
	IDData     string         `db:"id_data"`
	PublicKey  string         `db:"public_key"`
	DeviceType sql.NullString `db:"device_type"`
	Status     string         `db:"status"`
	CreatedAt  time.Time      `db:"created_at"`
	UpdatedAt  time.Time      `db:"updated_at"`
}

const authRequestColumns = `id, device_id, id_data, public_key, device_type, status, created_at, updated_at`

func (r authRequestRow) toDomain() (domain.AuthRequest, error) {
	st, err := domain.ParseAuthRequestStatus(r.Status)
	if err != nil {
		return domain.AuthRequest{}, fmt.Errorf("auth request %s is corrupt: %w", r.ID, err)
	}
	q, err := domain.RehydrateAuthRequest(r.ID, r.DeviceID, r.IDData, r.PublicKey, r.DeviceType.String, st, r.CreatedAt.UTC(), r.UpdatedAt.UTC())
	if err != nil {
		return domain.AuthRequest{}, fmt.Errorf("auth request %s is corrupt: %w", r.ID, err)
	}
	return q, nil
}

func putAuthRequest(ctx context.Context, q menderExecer, r domain.AuthRequest) error {
	_, err := q.ExecContext(ctx, `INSERT INTO device_auth_requests (`+authRequestColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (id) DO UPDATE SET id_data = EXCLUDED.id_data, public_key = EXCLUDED.public_key,
			device_type = EXCLUDED.device_type, status = EXCLUDED.status, updated_at = EXCLUDED.updated_at`,
		r.ID().String(), r.DeviceID().String(), r.Identity(), r.Key().PEM(), nullString(r.DeviceType()), r.Status().String(),
		dbTime(r.CreatedAt()), dbTime(r.UpdatedAt()))
	if err != nil {
		return fmt.Errorf("storing auth request of %q: %w", r.DeviceID(), mapWriteErr(err))
	}
	return nil
}

// Ask serialises every Ask on one transaction-scoped advisory lock, so
// that counting the pending requests and storing a new one are one step
// whatever other requests run meanwhile (new requests are rare, and each
// source address has a budget: one lock is cheap enough).
func (s *AuthRequestRepository) Ask(ctx context.Context, device domain.DeviceID, key domain.DeviceKey,
	fn func(*domain.AuthRequest, int) (*domain.AuthRequest, error)) error {
	return inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('ota:auth_requests'))`); err != nil {
			return err
		}
		var (
			cur     *domain.AuthRequest
			pending int
			r       authRequestRow
		)
		err := tx.GetContext(ctx, &r, `SELECT `+authRequestColumns+` FROM device_auth_requests WHERE device_id = $1 AND public_key = $2`,
			device.String(), key.PEM())
		switch {
		case err == nil:
			q, err := r.toDomain()
			if err != nil {
				return err
			}
			cur = &q
		case errors.Is(err, sql.ErrNoRows):
			if err := tx.GetContext(ctx, &pending, `SELECT count(*) FROM device_auth_requests WHERE status = 'pending'`); err != nil {
				return fmt.Errorf("counting pending auth requests: %w", err)
			}
		default:
			return err
		}
		next, err := fn(cur, pending)
		if err != nil || next == nil {
			return err
		}
		return putAuthRequest(ctx, tx, *next)
	})
}

// Delete deletes a request.
func (s *AuthRequestRepository) Delete(ctx context.Context, id domain.UUID, rec domain.AuditRecord) error {
	if id.IsZero() {
		return fmt.Errorf("deleting auth request: %w", domain.ErrNotFound)
	}
	err := inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM device_auth_requests WHERE id = $1`, id.String())
		if err != nil {
			return fmt.Errorf("deleting auth request %s: %w", id, unavailable(err))
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("auth request %s: %w", id, domain.ErrNotFound)
		}
		return writeAudit(ctx, tx, rec)
	})
	if err != nil {
		return err
	}
	return nil
}

// DeleteExpired deletes the requests last changed before cutoff
// (device_auth_requests_updated_idx finds them).
func (s *AuthRequestRepository) DeleteExpired(ctx context.Context, cutoff time.Time) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM device_auth_requests WHERE updated_at < $1`, dbTime(cutoff))
	if err != nil {
		return 0, fmt.Errorf("deleting expired auth requests: %w", unavailable(err))
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// Get returns a request by id.
func (s *AuthRequestRepository) Get(ctx context.Context, id domain.UUID) (domain.AuthRequest, error) {
	if id.IsZero() {
		return domain.AuthRequest{}, fmt.Errorf("loading auth request: %w", domain.ErrNotFound)
	}
	uid := id.String()
	var r authRequestRow
	if err := s.db.GetContext(ctx, &r, `SELECT `+authRequestColumns+` FROM device_auth_requests WHERE id = $1`, uid); err != nil {
		return domain.AuthRequest{}, fmt.Errorf("loading auth request %s: %w", uid, notFound(err))
	}
	return r.toDomain()
}

// List returns the requests with the status, oldest first.
func (s *AuthRequestRepository) List(ctx context.Context, status domain.AuthRequestStatus, limit int) ([]domain.AuthRequest, error) {
	var rows []authRequestRow
	if err := s.db.SelectContext(ctx, &rows, `SELECT `+authRequestColumns+` FROM device_auth_requests WHERE status = $1
		ORDER BY created_at, id LIMIT $2`, status.String(), limit); err != nil {
		return nil, fmt.Errorf("listing auth requests: %w", unavailable(err))
	}
	return domainOf(rows)
}

// Update locks a request, lets fn change it, and stores it.
func (s *AuthRequestRepository) Update(ctx context.Context, id domain.UUID, fn func(*domain.AuthRequest) error, rec domain.AuditRecord) (domain.AuthRequest, error) {
	return updateByID(ctx, s.db, "auth request", `SELECT `+authRequestColumns+` FROM device_auth_requests WHERE id = $1 FOR UPDATE`, id,
		func(tx *sqlx.Tx, _ authRequestRow, q domain.AuthRequest) (domain.AuthRequest, error) {
			if err := fn(&q); err != nil {
				return domain.AuthRequest{}, err
			}
			if err := putAuthRequest(ctx, tx, q); err != nil {
				return domain.AuthRequest{}, err
			}
			return q, writeAudit(ctx, tx, rec)
		})
}

// Accept registers the device if dev is set, stores what admit makes of
// its admission and deletes the request, in one transaction.
func (s *AuthRequestRepository) Accept(ctx context.Context, id domain.UUID, dev *domain.Device, admit func(*domain.DeviceAdmission) (domain.DeviceAdmission, error),
	rec domain.AuditRecord) error {
	if id.IsZero() {
		return fmt.Errorf("loading auth request: %w", domain.ErrNotFound)
	}
	uid := id.String()
	return inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		var deviceID string
		err := tx.QueryRowContext(ctx, `DELETE FROM device_auth_requests WHERE id = $1 AND status = 'pending' RETURNING device_id`, uid).Scan(&deviceID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("auth request %s is no longer pending: %w", uid, domain.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if dev != nil {
			if err := insertDevice(ctx, tx, *dev); err != nil {
				return err
			}
		}
		if _, err = admitTx(ctx, tx, deviceID, admit); err != nil {
			return err
		}
		return writeAudit(ctx, tx, rec)
	})
}

// ArtifactCatalogRepository finds firmware by artifact name (the unique
// index on (model, artifact_name) answers it).
type ArtifactCatalogRepository struct{ db *sqlx.DB }

// NewArtifactCatalogRepository reads firmware through the given pool.
func NewArtifactCatalogRepository(db *sqlx.DB) *ArtifactCatalogRepository {
	return &ArtifactCatalogRepository{db: db}
}

// ByArtifactName returns the model's firmware published under name.
func (s *ArtifactCatalogRepository) ByArtifactName(ctx context.Context, model, name string) (domain.Firmware, error) {
	var r firmwareRow
	if err := s.db.GetContext(ctx, &r, `SELECT `+firmwareColumns+` FROM firmwares WHERE model = $1 AND artifact_name = $2`, model, name); err != nil {
		return domain.Firmware{}, fmt.Errorf("loading artifact %q of %q: %w", name, model, notFound(err))
	}
	return r.toDomain()
}

// TaskLogRepository keeps device logs in task_logs.
type TaskLogRepository struct{ db *sqlx.DB }

// NewTaskLogRepository stores task logs through the given pool.
func NewTaskLogRepository(db *sqlx.DB) *TaskLogRepository { return &TaskLogRepository{db: db} }

type logLine struct {
	Level     string `json:"level"`
	Message   string `json:"message"`
	Timestamp string `json:"timestamp"`
}

// Put stores a task's log, replacing the previous one.
func (s *TaskLogRepository) Put(ctx context.Context, l domain.TaskLog) error {
	if l.TaskID().IsZero() {
		return fmt.Errorf("storing task log: %w", domain.ErrNotFound)
	}
	uid := l.TaskID().String()
	lines := []logLine{}
	for _, x := range l.Lines() {
		lines = append(lines, logLine{Level: x.Level, Message: x.Message, Timestamp: x.Timestamp})
	}
	raw, err := json.Marshal(lines)
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO task_logs (task_id, lines, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (task_id) DO UPDATE SET lines = EXCLUDED.lines, updated_at = EXCLUDED.updated_at`,
		uid, raw, dbTime(l.UpdatedAt())); err != nil {
		return fmt.Errorf("storing log of task %s: %w", uid, mapWriteErr(err))
	}
	return nil
}

// Get returns a task's log.
func (s *TaskLogRepository) Get(ctx context.Context, taskID domain.UUID) (domain.TaskLog, error) {
	if taskID.IsZero() {
		return domain.TaskLog{}, fmt.Errorf("loading task log: %w", domain.ErrNotFound)
	}
	uid := taskID.String()
	var (
		raw []byte
		at  time.Time
	)
	if err := s.db.QueryRowContext(ctx, `SELECT lines, updated_at FROM task_logs WHERE task_id = $1`, uid).Scan(&raw, &at); err != nil {
		return domain.TaskLog{}, fmt.Errorf("loading log of task %s: %w", uid, notFound(err))
	}
	var lines []logLine
	if err := json.Unmarshal(raw, &lines); err != nil {
		return domain.TaskLog{}, fmt.Errorf("log of task %s is corrupt: %w", uid, err)
	}
	out := make([]domain.LogLine, 0, len(lines))
	for _, x := range lines {
		out = append(out, domain.LogLine{Level: x.Level, Message: x.Message, Timestamp: x.Timestamp})
	}
	return domain.RehydrateTaskLog(uid, out, at.UTC()), nil
}
