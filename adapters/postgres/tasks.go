package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// TaskRepository stores tasks in the tasks table and the events applied to
// them in task_events. The statements of the check and the event paths are
// prepared once; in a transaction they are bound to it (tx.Stmtx).
type TaskRepository struct {
	db              *sqlx.DB
	get             *sqlx.Stmt
	active          *sqlx.Stmt
	activeForUpdate *sqlx.Stmt
	activeAndFailed *sqlx.Stmt
	failed          *sqlx.Stmt
	insert          *sqlx.Stmt
	update          *sqlx.Stmt
	lock            *sqlx.Stmt
	event           *sqlx.Stmt
	insertEvent     *sqlx.Stmt
	stats           *sqlx.Stmt
}

var _ ports.TaskRepository = (*TaskRepository)(nil)

// NewTaskRepository stores tasks through the given pool, preparing its hot
// statements; it fails when they cannot be prepared (no schema).
func NewTaskRepository(db *sqlx.DB) (*TaskRepository, error) {
	p := newStatements(db)
	r := &TaskRepository{
		db:              db,
		get:             p.prepare(`SELECT ` + taskColumns + ` FROM tasks WHERE id = $1`),
		active:          p.prepare(activeTaskSQL),
		activeForUpdate: p.prepare(activeTaskSQL + ` FOR UPDATE`),
		activeAndFailed: p.prepare(activeAndFailedSQL),
		failed: p.prepare(`SELECT firmware_id, count(*) FROM tasks
			WHERE device_id = $1 AND status = 'failed' GROUP BY firmware_id`),
		insert: p.prepare(insertTaskSQL),
		update: p.prepare(`UPDATE tasks SET status = $2, progress = $3, attempt = $4, error_code = $5,
				error_message = $6, updated_at = $7
			WHERE id = $1
			RETURNING ` + taskColumns),
		lock:        p.prepare(`SELECT ` + taskColumns + ` FROM tasks WHERE id = $1 FOR UPDATE`),
		event:       p.prepare(`SELECT fingerprint FROM task_events WHERE task_id = $1 AND event_id = $2`),
		insertEvent: p.prepare(`INSERT INTO task_events (task_id, event_id, fingerprint, created_at) VALUES ($1, $2, $3, $4)`),
		stats:       p.prepare(`SELECT status, count(*) FROM tasks WHERE rollout_id = $1 GROUP BY status`),
	}
	if err := p.done("task repository"); err != nil {
		return nil, err
	}
	return r, nil
}

type taskRow struct {
	ID           string         `db:"id"`
	ActionID     int64          `db:"action_id"`
	DeviceID     string         `db:"device_id"`
	FirmwareID   string         `db:"firmware_id"`
	RolloutID    string         `db:"rollout_id"`
	Status       string         `db:"status"`
	Progress     int            `db:"progress"`
	Attempt      int            `db:"attempt"`
	ErrorCode    sql.NullString `db:"error_code"`
	ErrorMessage sql.NullString `db:"error_message"`
	CreatedAt    time.Time      `db:"created_at"`
	UpdatedAt    time.Time      `db:"updated_at"`
}

const taskColumns = `id, action_id, device_id, firmware_id, rollout_id, status, progress, attempt,
	error_code, error_message, created_at, updated_at`

// activeStatusSQL is the predicate of the tasks_one_active_per_device
// index, written exactly as in the migration: INSERT … ON CONFLICT names it
// to pick that index as its arbiter. TestActiveStatusSQL keeps it in step
// with domain.ActiveTaskStatuses.
const activeStatusSQL = `status IN ('pending', 'downloading', 'downloaded', 'installing')`

func newTaskRow(t domain.Task) taskRow {
	rec := t.Record()
	return taskRow{
		ID:           rec.ID,
		ActionID:     rec.ActionID,
		DeviceID:     rec.DeviceID,
		FirmwareID:   rec.FirmwareID,
		RolloutID:    rec.RolloutID,
		Status:       rec.Status.String(),
		Progress:     rec.Progress,
		Attempt:      rec.Attempt,
		ErrorCode:    nullString(rec.ErrorCode),
		ErrorMessage: nullString(rec.ErrorMessage),
		CreatedAt:    dbTime(rec.CreatedAt),
		UpdatedAt:    dbTime(rec.UpdatedAt),
	}
}

// scan reads a row selected with taskColumns.
func (r *taskRow) scan(row interface{ Scan(...any) error }) error {
	return row.Scan(&r.ID, &r.ActionID, &r.DeviceID, &r.FirmwareID, &r.RolloutID, &r.Status, &r.Progress,
		&r.Attempt, &r.ErrorCode, &r.ErrorMessage, &r.CreatedAt, &r.UpdatedAt)
}

func (r taskRow) toDomain() (domain.Task, error) {
	st, err := domain.ParseTaskStatus(r.Status)
	if err != nil {
		return domain.Task{}, fmt.Errorf("task %s has a corrupt status: %w", r.ID, err)
	}
	return domain.RehydrateTask(domain.TaskRecord{
		ID: r.ID, ActionID: r.ActionID, DeviceID: r.DeviceID, FirmwareID: r.FirmwareID, RolloutID: r.RolloutID,
		Status: st, Progress: r.Progress, Attempt: r.Attempt, ErrorCode: r.ErrorCode.String,
		ErrorMessage: r.ErrorMessage.String, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}), nil
}

// Get loads a task by id; an id that is not a UUID is not found.
func (s *TaskRepository) Get(ctx context.Context, id string) (domain.Task, error) {
	uid, ok := canonicalUUID(id)
	if !ok {
		return domain.Task{}, fmt.Errorf("loading task: %w", domain.ErrNotFound)
	}
	var r taskRow
	if err := r.scan(s.get.QueryRowContext(ctx, uid)); err != nil {
		return domain.Task{}, fmt.Errorf("loading task %s: %w", uid, notFound(err))
	}
	return r.toDomain()
}

// Active returns the device's active task, or domain.ErrNotFound. It takes
// no lock: a check that only reuses a task needs none.
func (s *TaskRepository) Active(ctx context.Context, deviceID string) (domain.Task, error) {
	if !validDeviceID(deviceID) {
		return domain.Task{}, fmt.Errorf("loading the active task: %w", domain.ErrNotFound)
	}
	return activeTask(ctx, s.active, deviceID)
}

// activeTaskSQL reads a device's active task (on the partial unique index).
const activeTaskSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE device_id = $1 AND ` + activeStatusSQL

// activeTask reads the device's active task with stmt (activeTaskSQL, or
// it FOR UPDATE).
func activeTask(ctx context.Context, stmt *sqlx.Stmt, deviceID string) (domain.Task, error) {
	var r taskRow
	if err := r.scan(stmt.QueryRowContext(ctx, deviceID)); err != nil {
		return domain.Task{}, fmt.Errorf("loading the active task of device %q: %w", deviceID, notFound(err))
	}
	return r.toDomain()
}

// activeAndFailedSQL reads the device's active task (NULLs when none) and
// the firmware ids of its failed tasks, one per failed task, in one row:
// both are index lookups on the device (the partial unique index of active
// tasks, the partial index of failed ones).
const activeAndFailedSQL = `SELECT a.id, a.action_id, a.device_id, a.firmware_id, a.rollout_id, a.status, a.progress,
		a.attempt, a.error_code, a.error_message, a.created_at, a.updated_at,
		ARRAY(SELECT firmware_id::text FROM tasks WHERE device_id = $1 AND status = 'failed') AS failed
	FROM (SELECT 1) AS one
	LEFT JOIN LATERAL (SELECT ` + taskColumns + ` FROM tasks WHERE device_id = $1 AND ` + activeStatusSQL + `) AS a ON true`

// ActiveAndFailedCounts returns the device's active task (nil if none) and
// its failed tasks counted by firmware id — Active and FailedCounts in one
// round trip, for checks that have a target to offer. The failed map is
// never nil.
func (s *TaskRepository) ActiveAndFailedCounts(ctx context.Context, deviceID string) (*domain.Task, map[string]int, error) {
	failed := map[string]int{}
	if !validDeviceID(deviceID) {
		return nil, failed, nil
	}
	var (
		id, deviceCol, fw, ro, status, code, msg sql.NullString
		actionID                                 sql.NullInt64
		progress, attempt                        sql.NullInt32
		created, updated                         sql.NullTime
		failedIDs                                pq.StringArray
	)
	err := s.activeAndFailed.QueryRowContext(ctx, deviceID).Scan(&id, &actionID, &deviceCol, &fw, &ro, &status, &progress,
		&attempt, &code, &msg, &created, &updated, &failedIDs)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the active and failed tasks of device %q: %w", deviceID, unavailable(err))
	}
	for _, f := range failedIDs {
		failed[f]++
	}
	if !id.Valid {
		return nil, failed, nil
	}
	t, err := taskRow{
		ID: id.String, ActionID: actionID.Int64, DeviceID: deviceCol.String, FirmwareID: fw.String, RolloutID: ro.String,
		Status: status.String, Progress: int(progress.Int32), Attempt: int(attempt.Int32), ErrorCode: code, ErrorMessage: msg,
		CreatedAt: created.Time, UpdatedAt: updated.Time,
	}.toDomain()
	if err != nil {
		return nil, nil, err
	}
	return &t, failed, nil
}

// insertTaskSQL inserts a task unless the device already has an active
// one: the partial unique index is the arbiter, so a conflicting insert
// waits for the transaction that made the other active task, and does
// nothing (no row returned) if that one commits.
const insertTaskSQL = `INSERT INTO tasks (id, device_id, firmware_id, rollout_id, status, progress, attempt,
		error_code, error_message, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
	ON CONFLICT (device_id) WHERE ` + activeStatusSQL + ` DO NOTHING
	RETURNING action_id`

// maxInsertRounds bounds ReplaceActive's insert-or-read-the-winner loop. A
// second round happens only when the winner finished between the two
// statements; more than a few means the device's task is churning.
const maxInsertRounds = 5

// ReplaceActive runs fn with the device's active task locked (SELECT … FOR
// UPDATE), stores any change fn made to it, and inserts the task fn returns
// as the new active one, all in one READ COMMITTED transaction.
//
// The partial unique index, not the caller's lock, guarantees one active
// task per device: the insert is INSERT … ON CONFLICT DO NOTHING against
// it. When it inserts nothing, a concurrent transaction won; its committed
// task is read back (a new statement under READ COMMITTED sees it) and
// returned with created false. A transaction that waited on the row lock of
// a pending task that the winner then cancelled (a supersede) re-checks the
// row after the wait, no longer sees it active, and so calls fn with nil,
// then loses the insert to the winner in the same way.
func (s *TaskRepository) ReplaceActive(ctx context.Context, deviceID string, fn func(active *domain.Task) (*domain.Task, error)) (domain.Task, bool, error) {
	if !validDeviceID(deviceID) {
		return domain.Task{}, false, fmt.Errorf("replacing the active task: the device does not exist: %w", domain.ErrNotFound)
	}
	var (
		result  domain.Task
		created bool
	)
	err := inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		result, created = domain.Task{}, false
		var active *domain.Task
		cur, err := activeTask(ctx, tx.StmtxContext(ctx, s.activeForUpdate), deviceID)
		switch {
		case err == nil:
			active = &cur
		case !errors.Is(err, domain.ErrNotFound):
			return err
		}
		var before domain.TaskRecord
		if active != nil {
			before = active.Record()
		}
		ins, err := fn(active)
		if err != nil {
			return err
		}
		if active != nil {
			if active.Record() != before {
				stored, err := s.updateTask(ctx, tx, before.ID, *active)
				if err != nil {
					return err
				}
				*active = stored
			}
			result = *active
		}
		if ins == nil {
			return nil
		}
		result, created, err = s.insertOrWinner(ctx, tx, deviceID, *ins)
		return err
	})
	if err != nil {
		return domain.Task{}, false, err
	}
	return result, created, nil
}

// insertOrWinner inserts t unless the device has an active task, in which
// case that task (the winner of a race) is returned with created false.
func (s *TaskRepository) insertOrWinner(ctx context.Context, tx *sqlx.Tx, deviceID string, t domain.Task) (domain.Task, bool, error) {
	r := newTaskRow(t)
	if r.DeviceID != deviceID {
		return domain.Task{}, false, fmt.Errorf("inserting task %s: it is for device %q, not %q", r.ID, r.DeviceID, deviceID)
	}
	if _, ok := canonicalUUID(r.ID); !ok {
		return domain.Task{}, false, fmt.Errorf("inserting task: id %q is not a UUID", r.ID)
	}
	fw, ok1 := canonicalUUID(r.FirmwareID)
	ro, ok2 := canonicalUUID(r.RolloutID)
	if !ok1 || !ok2 {
		return domain.Task{}, false, fmt.Errorf("inserting task %s: the firmware or rollout does not exist: %w", r.ID, domain.ErrNotFound)
	}
	insert := tx.StmtxContext(ctx, s.insert)
	for round := 1; ; round++ {
		err := insert.QueryRowxContext(ctx, r.ID, r.DeviceID, fw, ro, r.Status, r.Progress, r.Attempt,
			r.ErrorCode, r.ErrorMessage, r.CreatedAt, r.UpdatedAt).Scan(&r.ActionID)
		if err == nil {
			r.FirmwareID, r.RolloutID = fw, ro
			out, err := r.toDomain()
			return out, true, err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return domain.Task{}, false, fmt.Errorf("inserting task %s: %w", r.ID, mapWriteErr(err))
		}
		winner, err := activeTask(ctx, tx.StmtxContext(ctx, s.active), deviceID)
		if err == nil {
			return winner, false, nil
		}
		if !errors.Is(err, domain.ErrNotFound) {
			return domain.Task{}, false, err
		}
		// The winner finished between the insert and the read: try again.
		if round == maxInsertRounds {
			return domain.Task{}, false, fmt.Errorf("inserting task %s: the device's active task kept changing: %w", r.ID, domain.ErrServiceBusy)
		}
	}
}

// updateTask stores the mutable fields of t (its device, firmware, rollout
// and creation are fixed) and returns it as stored.
func (s *TaskRepository) updateTask(ctx context.Context, tx *sqlx.Tx, id string, t domain.Task) (domain.Task, error) {
	w := newTaskRow(t)
	var r taskRow
	err := r.scan(tx.StmtxContext(ctx, s.update).QueryRowContext(ctx, id, w.Status, w.Progress, w.Attempt, w.ErrorCode, w.ErrorMessage, w.UpdatedAt))
	if err != nil {
		return domain.Task{}, fmt.Errorf("storing task %s: %w", id, notFound(mapWriteErr(err)))
	}
	return r.toDomain()
}

// Update loads the task with a row lock, lets fn change it, and stores it
// in one transaction; it returns the task as stored. fn's error is
// returned as is and nothing is written.
func (s *TaskRepository) Update(ctx context.Context, id string, fn func(*domain.Task) error) (domain.Task, error) {
	uid, ok := canonicalUUID(id)
	if !ok {
		return domain.Task{}, fmt.Errorf("loading task: %w", domain.ErrNotFound)
	}
	var out domain.Task
	err := inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		t, err := s.lockTask(ctx, tx, uid)
		if err != nil {
			return err
		}
		if err := fn(&t); err != nil {
			return err
		}
		out, err = s.updateTask(ctx, tx, uid, t)
		return err
	})
	if err != nil {
		return domain.Task{}, err
	}
	return out, nil
}

func (s *TaskRepository) lockTask(ctx context.Context, tx *sqlx.Tx, id string) (domain.Task, error) {
	var r taskRow
	if err := r.scan(tx.StmtxContext(ctx, s.lock).QueryRowContext(ctx, id)); err != nil {
		return domain.Task{}, fmt.Errorf("loading task %s: %w", id, notFound(err))
	}
	return r.toDomain()
}

// ApplyEvent loads the task with a row lock and the event already recorded
// under ev's id, calls fn, and when fn reports a change stores the task and
// records the event in the same transaction. The row lock serialises every
// event of a task, so the same event id sent many times at once is applied
// once: the later transactions find it recorded after their wait. It
// returns the task as it now is (changed or not).
func (s *TaskRepository) ApplyEvent(ctx context.Context, taskID string, ev domain.Event, fn func(t *domain.Task, prior *domain.Event) (bool, error)) (domain.Task, error) {
	uid, ok := canonicalUUID(taskID)
	if !ok {
		return domain.Task{}, fmt.Errorf("loading task: %w", domain.ErrNotFound)
	}
	var out domain.Task
	err := inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		t, err := s.lockTask(ctx, tx, uid)
		if err != nil {
			return err
		}
		var prior *domain.Event
		var fingerprint string
		err = tx.StmtxContext(ctx, s.event).QueryRowContext(ctx, uid, ev.ID()).Scan(&fingerprint)
		switch {
		case err == nil:
			p := domain.RehydrateEvent(ev.ID(), fingerprint)
			prior = &p
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("loading event %q of task %s: %w", ev.ID(), uid, unavailable(err))
		}
		loaded := t
		changed, err := fn(&t, prior)
		if err != nil {
			return err
		}
		if !changed {
			out = loaded // as stored: whatever fn did to its copy is dropped
			return nil
		}
		if out, err = s.updateTask(ctx, tx, uid, t); err != nil {
			return err
		}
		if _, err := tx.StmtxContext(ctx, s.insertEvent).ExecContext(ctx, uid, ev.ID(), ev.Fingerprint(), dbTime(out.UpdatedAt())); err != nil {
			return fmt.Errorf("recording event %q of task %s: %w", ev.ID(), uid, mapWriteErr(err))
		}
		return nil
	})
	if err != nil {
		return domain.Task{}, err
	}
	return out, nil
}

// FailedCounts counts the device's failed tasks by firmware id, in one
// grouped query (on a partial index of failed tasks). Never nil.
func (s *TaskRepository) FailedCounts(ctx context.Context, deviceID string) (map[string]int, error) {
	out := map[string]int{}
	if !validDeviceID(deviceID) {
		return out, nil
	}
	rows, err := s.failed.QueryContext(ctx, deviceID)
	if err != nil {
		return nil, fmt.Errorf("counting failed tasks of device %q: %w", deviceID, unavailable(err))
	}
	defer rows.Close()
	for rows.Next() {
		var fw string
		var n int
		if err := rows.Scan(&fw, &n); err != nil {
			return nil, fmt.Errorf("counting failed tasks of device %q: %w", deviceID, unavailable(err))
		}
		out[fw] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting failed tasks of device %q: %w", deviceID, unavailable(err))
	}
	return out, nil
}

// RolloutStats counts a rollout's tasks by status in one aggregate query.
// An unknown rollout (or an id that is not a UUID) has no tasks.
func (s *TaskRepository) RolloutStats(ctx context.Context, rolloutID string) (domain.TaskStats, error) {
	var stats domain.TaskStats
	uid, ok := canonicalUUID(rolloutID)
	if !ok {
		return stats, nil
	}
	rows, err := s.stats.QueryContext(ctx, uid)
	if err != nil {
		return stats, fmt.Errorf("counting tasks of rollout %s: %w", uid, unavailable(err))
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return domain.TaskStats{}, fmt.Errorf("counting tasks of rollout %s: %w", uid, unavailable(err))
		}
		st, err := domain.ParseTaskStatus(status)
		if err != nil {
			return domain.TaskStats{}, fmt.Errorf("rollout %s has tasks with a corrupt status: %w", uid, err)
		}
		stats.Add(st, n)
	}
	if err := rows.Err(); err != nil {
		return domain.TaskStats{}, fmt.Errorf("counting tasks of rollout %s: %w", uid, unavailable(err))
	}
	return stats, nil
}

// DefaultListLimit is the page size List uses when the filter sets none.
const DefaultListLimit = 50

// List returns tasks matching f in (created_at, id) order, at most f.Limit
// (DefaultListLimit when not positive), continuing after f.After. It is
// keyset pagination — WHERE (created_at, id) > (cursor) ORDER BY created_at,
// id — so a page costs the same however deep it is, and each filter has an
// index that leads with it. Only placeholders are added to the query, never
// values. Never nil.
func (s *TaskRepository) List(ctx context.Context, f ports.TaskFilter) ([]domain.Task, error) {
	out := []domain.Task{}
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.DeviceID != "" {
		if !validDeviceID(f.DeviceID) {
			return out, nil
		}
		where = append(where, "device_id = "+arg(f.DeviceID))
	}
	if f.RolloutID != "" {
		uid, ok := canonicalUUID(f.RolloutID)
		if !ok {
			return out, nil
		}
		where = append(where, "rollout_id = "+arg(uid))
	}
	if f.Status != nil {
		where = append(where, "status = "+arg(f.Status.String()))
	}
	if f.After != nil {
		uid, ok := canonicalUUID(f.After.ID)
		if !ok {
			return nil, &domain.ValidationError{Field: "after", Reason: "is not a valid cursor"}
		}
		where = append(where, "(created_at, id) > ("+arg(dbTime(f.After.CreatedAt))+"::timestamptz, "+arg(uid)+"::uuid)")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	q := `SELECT ` + taskColumns + ` FROM tasks`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY created_at, id LIMIT ` + arg(limit)

	var rows []taskRow
	if err := s.db.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, fmt.Errorf("listing tasks: %w", unavailable(err))
	}
	for _, r := range rows {
		t, err := r.toDomain()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
