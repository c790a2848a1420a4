package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// AttributeRepository stores device attributes in device_attributes, one
// jsonb object per device.
type AttributeRepository struct{ db *sqlx.DB }

var _ ports.DeviceAttributes = (*AttributeRepository)(nil)

// NewAttributeRepository stores attributes through the given pool.
func NewAttributeRepository(db *sqlx.DB) *AttributeRepository { return &AttributeRepository{db: db} }

func attributesFrom(raw []byte, updatedAt sql.NullTime) (domain.DeviceAttributes, error) {
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return domain.DeviceAttributes{}, fmt.Errorf("corrupt device attributes: %w", err)
	}
	return domain.RehydrateDeviceAttributes(m, fromNullTime(updatedAt)), nil
}

// Get returns the device's attributes (the zero value if it has none).
func (s *AttributeRepository) Get(ctx context.Context, device domain.DeviceID) (domain.DeviceAttributes, error) {
	deviceID := device.String()
	if device.IsZero() {
		return domain.DeviceAttributes{}, nil
	}
	var (
		raw []byte
		at  sql.NullTime
	)
	err := s.db.QueryRowContext(ctx, `SELECT attributes, updated_at FROM device_attributes WHERE device_id = $1`, deviceID).Scan(&raw, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.DeviceAttributes{}, nil
	}
	if err != nil {
		return domain.DeviceAttributes{}, fmt.Errorf("loading attributes of device %q: %w", deviceID, unavailable(err))
	}
	return attributesFrom(raw, at)
}

// Update locks the device's attribute row (created empty, inside the same
// transaction, for a device that has none), lets fn change the attributes
// and stores them. When fn fails the transaction rolls back, the created
// row with it.
func (s *AttributeRepository) Update(ctx context.Context, device domain.DeviceID, fn func(*domain.DeviceAttributes) error) (domain.DeviceAttributes, error) {
	return inDeviceTx(ctx, s.db, device, func(tx *sqlx.Tx, deviceID string) (domain.DeviceAttributes, error) {
		// The foreign key refuses an unknown device: told apart from other
		// failures by a plain existence check first.
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM devices WHERE device_id = $1`, deviceID).Scan(&one); err != nil {
			return domain.DeviceAttributes{}, fmt.Errorf("loading device %q: %w", deviceID, notFound(err))
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO device_attributes (device_id) VALUES ($1) ON CONFLICT (device_id) DO NOTHING`, deviceID); err != nil {
			return domain.DeviceAttributes{}, fmt.Errorf("creating attributes of device %q: %w", deviceID, mapWriteErr(err))
		}
		var (
			raw []byte
			at  sql.NullTime
		)
		if err := tx.QueryRowContext(ctx, `SELECT attributes, updated_at FROM device_attributes WHERE device_id = $1 FOR UPDATE`, deviceID).Scan(&raw, &at); err != nil {
			return domain.DeviceAttributes{}, fmt.Errorf("loading attributes of device %q: %w", deviceID, notFound(err))
		}
		a, err := attributesFrom(raw, at)
		if err != nil {
			return domain.DeviceAttributes{}, err
		}
		if err := fn(&a); err != nil {
			return domain.DeviceAttributes{}, err
		}
		encoded, err := json.Marshal(a.Values())
		if err != nil {
			return domain.DeviceAttributes{}, fmt.Errorf("encoding attributes: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE device_attributes SET attributes = $2, updated_at = $3 WHERE device_id = $1`,
			deviceID, encoded, nullTime(a.UpdatedAt())); err != nil {
			return domain.DeviceAttributes{}, fmt.Errorf("storing attributes of device %q: %w", deviceID, mapWriteErr(err))
		}
		return domain.RehydrateDeviceAttributes(a.Values(), dbTime(a.UpdatedAt())), nil
	})
}

// TaskActionRepository finds tasks by action id and keeps their cancel
// notices in tasks.cancel_confirmed_at.
type TaskActionRepository struct {
	db *sqlx.DB
	// pending is PendingCancel's statement: every DDI poll runs it.
	pending *lazyStmt
}

// NewTaskActionRepository reads and writes through the given pool.
func NewTaskActionRepository(db *sqlx.DB) *TaskActionRepository {
	return &TaskActionRepository{db: db, pending: &lazyStmt{query: noticeSelect + pendingCancelWhere}}
}

// queryer is what both a pool and a transaction offer.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// notice reads one task with its confirmation by a WHERE clause on tasks.
func noticeWhere(ctx context.Context, q queryer, where string, args ...any) (domain.CancelNotice, error) {
	return scanNotice(q.QueryRowContext(ctx, noticeSelect+where, args...))
}

// noticeSelect reads a task with its confirmation; a WHERE clause follows.
const noticeSelect = `SELECT ` + taskColumns + `, cancel_confirmed_at FROM tasks WHERE `

// scanNotice reads the row of a noticeSelect.
func scanNotice(row *sql.Row) (domain.CancelNotice, error) {
	var (
		r  taskRow
		at sql.NullTime
	)
	err := row.Scan(&r.ID, &r.ActionID, &r.DeviceID, &r.FirmwareID, &r.RolloutID, &r.Status, &r.Progress,
		&r.Attempt, &r.ErrorCode, &r.ErrorMessage, &r.CreatedAt, &r.UpdatedAt, &r.Stage, &at)
	if err != nil {
		return domain.CancelNotice{}, notFound(err)
	}
	t, err := r.toDomain()
	if err != nil {
		return domain.CancelNotice{}, err
	}
	return domain.RehydrateCancelNotice(t, fromNullTime(at)), nil
}

// Cancel returns the notice of the device's task numbered actionID.
func (s *TaskActionRepository) Cancel(ctx context.Context, device domain.DeviceID, actionID int64) (domain.CancelNotice, error) {
	deviceID := device.String()
	if device.IsZero() || actionID <= 0 {
		return domain.CancelNotice{}, fmt.Errorf("loading action: %w", domain.ErrNotFound)
	}
	n, err := noticeWhere(ctx, s.db, `device_id = $1 AND action_id = $2`, deviceID, actionID)
	if err != nil {
		return domain.CancelNotice{}, fmt.Errorf("loading action %d of device %q: %w", actionID, deviceID, err)
	}
	return n, nil
}

// PendingCancel returns the device's newest unconfirmed cancel, or nil
// (an index scan of tasks_unconfirmed_cancel_idx).
func (s *TaskActionRepository) PendingCancel(ctx context.Context, device domain.DeviceID) (*domain.CancelNotice, error) {
	deviceID := device.String()
	if device.IsZero() {
		return nil, nil
	}
	n, err := scanNotice(s.pending.queryRow(ctx, s.db, deviceID))
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loading pending cancel of device %q: %w", deviceID, err)
	}
	return &n, nil
}

// pendingCancelWhere selects the device's newest unconfirmed cancel.
const pendingCancelWhere = `device_id = $1 AND status = 'cancelled' AND cancel_confirmed_at IS NULL
	ORDER BY updated_at DESC, id DESC LIMIT 1`

// UpdateCancel locks the task's row, lets fn change its notice, and stores
// the confirmation. The lock is FOR NO KEY UPDATE, like every task update.
func (s *TaskActionRepository) UpdateCancel(ctx context.Context, device domain.DeviceID, actionID int64, fn func(*domain.CancelNotice) error) (domain.CancelNotice, error) {
	deviceID := device.String()
	if device.IsZero() || actionID <= 0 {
		return domain.CancelNotice{}, fmt.Errorf("loading action: %w", domain.ErrNotFound)
	}
	var out domain.CancelNotice
	err := inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		n, err := noticeWhere(ctx, tx, `device_id = $1 AND action_id = $2 FOR NO KEY UPDATE`, deviceID, actionID)
		if err != nil {
			return fmt.Errorf("loading action %d of device %q: %w", actionID, deviceID, err)
		}
		if err := fn(&n); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET cancel_confirmed_at = $2 WHERE id = $1`,
			n.Task().ID().String(), nullTime(n.ConfirmedAt())); err != nil {
			return fmt.Errorf("storing cancel confirmation: %w", mapWriteErr(err))
		}
		out = domain.RehydrateCancelNotice(n.Task(), dbTime(n.ConfirmedAt()))
		return nil
	})
	if err != nil {
		return domain.CancelNotice{}, err
	}
	return out, nil
}
