package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

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
	checkByToken    *sqlx.Stmt
	checkByID       *sqlx.Stmt
	offerOf         *sqlx.Stmt
	offerForShare   *sqlx.Stmt
	lockRollout     *sqlx.Stmt
	failed          *sqlx.Stmt
	insert          *sqlx.Stmt
	insertUnchanged *sqlx.Stmt
	updateUnchanged *sqlx.Stmt
	updateEnded     *sqlx.Stmt
	update          *sqlx.Stmt
	lock            *sqlx.Stmt
	event           *sqlx.Stmt
	insertEvent     *sqlx.Stmt
	stats           *sqlx.Stmt
	counted         *sqlx.Stmt
	countedInBoth   *sqlx.Stmt
	addCounts       *sqlx.Stmt
	reads           *ReadReplica  // the check reads' replica, nil: none (replica.go)
	catalog         *CatalogCache // told, after commit, of a rollout an event changed; nil: none
	installed       *sqlx.Stmt
	latestForUpdate *sqlx.Stmt
	announce        *sqlx.Stmt // announceSQL: a task's end is announced in its event's transaction
	judgeView       *sqlx.Stmt // judgeViewSQL: a judgement's read without the rollout's lock
	deviceVersion   *sqlx.Stmt
}

// NewTaskRepository stores tasks through the given pool, preparing its hot
// statements; it fails when they cannot be prepared (no schema).
func NewTaskRepository(db *sqlx.DB) (*TaskRepository, error) {
	return prepared(db, "task repository", func(p *statements) *TaskRepository {
		return &TaskRepository{
			db:              db,
			get:             p.prepare(`SELECT ` + taskColumns + ` FROM tasks WHERE id = $1`),
			active:          p.prepare(activeTaskSQL),
			activeForUpdate: p.prepare(activeTaskSQL + ` FOR UPDATE`),
			checkByToken:    p.prepare(checkViewByTokenSQL),
			checkByID:       p.prepare(checkViewByIDSQL),
			offerOf:         p.prepare(offerOfSQL),
			offerForShare:   p.prepare(offerOfSQL + ` FOR SHARE OF f, r`),
			lockRollout:     p.prepare(`SELECT ` + rolloutColumns + ` FROM rollouts WHERE id = $1 FOR NO KEY UPDATE`),
			failed: p.prepare(`SELECT firmware_id, count(*) FROM tasks
				WHERE device_id = $1 AND status = 'failed' GROUP BY firmware_id`),
			insert:          p.prepare(insertTaskSQL),
			insertUnchanged: p.prepare(insertUnchangedSQL),
			updateUnchanged: p.prepare(updateUnchangedSQL),
			updateEnded:     p.prepare(updateEndedSQL),
			update: p.prepare(`UPDATE tasks SET status = $2, progress = $3, attempt = $4, error_code = $5,
					error_message = $6, updated_at = $7
				WHERE id = $1
				RETURNING ` + taskColumns),
			lock:            p.prepare(`SELECT ` + taskColumns + ` FROM tasks WHERE id = $1 FOR UPDATE`),
			event:           p.prepare(selectEventSQL),
			insertEvent:     p.prepare(insertEventSQL),
			stats:           p.prepare(countersSQL),
			counted:         p.prepare(countedTaskSQL("")),
			countedInBoth:   p.prepare(countedInBothSQL),
			addCounts:       p.prepare(addCountsSQL),
			installed:       p.prepare(installedSQL),
			latestForUpdate: p.prepare(latestTaskSQL),
			announce:        p.prepare(announceSQL),
			judgeView:       p.prepare(judgeViewSQL),
			deviceVersion:   p.prepare(`SELECT current_version FROM devices WHERE device_id = $1`),
		}
	})
}

// countersSQL reads a scope's counters (rollout_counters, migration
// 00110): the whole rollout's ($2 the zero time) or a stage's.
const countersSQL = `SELECT status, sum(devices)::bigint FROM rollout_counters
	WHERE rollout_id = $1 AND stage_started_at = $2 GROUP BY status`

// wholeRollout is the stage_started_at of a whole rollout's counters: Go's
// zero time, as dbTime writes it.
var wholeRollout = dbTime(time.Time{})

// countedOrder is domain.CountsOver as an ORDER BY, first row counting:
// tasks_rollout_device_latest_idx (migration 00090) is in this order for
// one (rollout, device).
const countedOrder = `(status IN ('succeeded', 'failed')) DESC, created_at DESC, action_id DESC`

// countedTaskSQL reads the task that counts for device $2 in rollout $1
// (and the condition stage): a device has a few tasks in a rollout.
func countedTaskSQL(stage string) string {
	return `SELECT ` + taskColumns + ` FROM tasks WHERE rollout_id = $1 AND device_id = $2` + stage +
		` ORDER BY ` + countedOrder + ` LIMIT 1`
}

// countedInBothSQL reads, in one round trip, the task that counts for
// device $2 in rollout $1 (first column false) and the one that counts
// in its stage started at $3 (true): every change of a staged rollout's
// task needs both.
var countedInBothSQL = `(SELECT false, ` + countedTaskSQL("")[len(`SELECT `):] + `) UNION ALL (SELECT true, ` +
	countedTaskSQL(` AND stage_started_at = $3`)[len(`SELECT `):] + `)`

// addCountsSQL adds one device's changes to the counters of its shard
// ($1), in one statement that takes the rows in key order: two
// transactions adding to the same rows wait for each other, never in a
// cycle.
const addCountsSQL = `INSERT INTO rollout_counters AS c (rollout_id, stage_started_at, status, shard, devices)
	SELECT d.rollout_id::uuid, d.stage::timestamptz, d.status, $1, d.n
	FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[]) AS d(rollout_id, stage, status, n)
	ORDER BY 1, 2, 3
	ON CONFLICT (rollout_id, stage_started_at, status, shard) DO UPDATE SET devices = c.devices + excluded.devices`

// counterShards is how many rows a scope's count of one status is spread
// over (migration 00110 says why).
const counterShards = 16

// recountSQL counts, for every rollout (or the one whose id is $1, when
// not empty), its devices by the task each counts by, in the whole
// rollout and in each stage: what the counters must hold. Migration 00110
// backfilled the counters with the same statement.
const recountSQL = `SELECT rollout_id, $2::timestamptz, status, count(*) FROM (
		SELECT DISTINCT ON (rollout_id, device_id) rollout_id, status FROM tasks
		WHERE $1 = '' OR rollout_id = $1::uuid
		ORDER BY rollout_id, device_id, ` + countedOrder + `) c
	GROUP BY rollout_id, status
UNION ALL
SELECT rollout_id, stage_started_at, status, count(*) FROM (
		SELECT DISTINCT ON (rollout_id, stage_started_at, device_id) rollout_id, stage_started_at, status FROM tasks
		WHERE stage_started_at IS NOT NULL AND ($1 = '' OR rollout_id = $1::uuid)
		ORDER BY rollout_id, stage_started_at, device_id, ` + countedOrder + `) c
	GROUP BY rollout_id, stage_started_at, status`

// storedCountsSQL sums the counters' shards, as recountSQL counts.
const storedCountsSQL = `SELECT rollout_id, stage_started_at, status, sum(devices)::bigint FROM rollout_counters
	WHERE $1 = '' OR rollout_id = $1::uuid
	GROUP BY rollout_id, stage_started_at, status`

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
	Stage        sql.NullTime   `db:"stage_started_at"`
}

const taskColumns = `id, action_id, device_id, firmware_id, rollout_id, status, progress, attempt,
	error_code, error_message, created_at, updated_at, stage_started_at`

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
		Stage:        nullTime(dbTime(rec.Stage)),
	}
}

// scan reads a row selected with taskColumns.
func (r *taskRow) scan(row interface{ Scan(...any) error }) error {
	return row.Scan(r.fields()...)
}

// fields are where a row selected with taskColumns is scanned to.
func (r *taskRow) fields() []any {
	return []any{&r.ID, &r.ActionID, &r.DeviceID, &r.FirmwareID, &r.RolloutID, &r.Status, &r.Progress,
		&r.Attempt, &r.ErrorCode, &r.ErrorMessage, &r.CreatedAt, &r.UpdatedAt, &r.Stage}
}

func (r taskRow) toDomain() (domain.Task, error) {
	st, err := domain.ParseTaskStatus(r.Status)
	if err != nil {
		return domain.Task{}, fmt.Errorf("task %s has a corrupt status: %w", r.ID, err)
	}
	return domain.RehydrateTask(domain.TaskRecord{
		ID: r.ID, ActionID: r.ActionID, DeviceID: r.DeviceID, FirmwareID: r.FirmwareID, RolloutID: r.RolloutID,
		Status: st, Progress: r.Progress, Attempt: r.Attempt, ErrorCode: r.ErrorCode.String,
		ErrorMessage: r.ErrorMessage.String, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), Stage: fromNullTime(r.Stage),
	}), nil
}

// Get loads a task by id; the zero id is not found (no statement is sent).
func (s *TaskRepository) Get(ctx context.Context, id domain.UUID) (domain.Task, error) {
	return loadByID[domain.Task]("task", id, func(r *taskRow) error { return r.scan(s.get.QueryRowContext(ctx, id.String())) })
}

// Active returns the device's active task, or domain.ErrNotFound. It takes
// no lock: a check that only reuses a task needs none.
func (s *TaskRepository) Active(ctx context.Context, deviceID domain.DeviceID) (domain.Task, error) {
	if deviceID.IsZero() {
		return domain.Task{}, fmt.Errorf("loading the active task: %w", domain.ErrNotFound)
	}
	return activeTask(ctx, s.active, deviceID.String())
}

// latestTaskSQL reads a device's most recent task with an outcome
// (succeeded or failed), locked, unless the device has an active task (on
// the index of a device's tasks by creation). A cancelled task says
// nothing about the device (check rule 4): it is passed over, not taken
// for the device's last word.
const latestTaskSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE device_id = $1 AND status IN ('succeeded', 'failed')
	AND NOT EXISTS (SELECT 1 FROM tasks a WHERE a.device_id = $1 AND a.` + activeStatusSQL + `)
	ORDER BY created_at DESC, id DESC LIMIT 1 FOR UPDATE`

// latestTask reads the device's most recent task with stmt (latestTaskSQL).
func latestTask(ctx context.Context, stmt *sqlx.Stmt, deviceID string) (domain.Task, error) {
	var r taskRow
	if err := r.scan(stmt.QueryRowContext(ctx, deviceID)); err != nil {
		return domain.Task{}, fmt.Errorf("loading the latest task of device %q: %w", deviceID, notFound(err))
	}
	return r.toDomain()
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

// checkViewSQL reads a device, its active task (NULLs when none), the
// firmware ids of its failed tasks, one per failed task, and its tags and
// reported attributes (what rollout selectors judge), in one row: a poll's
// whole read, in one round trip. Each part is an index lookup (the
// device by key or token hash, the partial unique index of active tasks,
// the partial index of failed ones). The caller appends the WHERE clause.
// The active task's device_id is the device's, so it is not sent twice.
const checkViewSQL = `SELECT d.device_id, d.model, d.current_version, d.token_hash, d.last_seen_at, d.created_at,
		a.id, a.action_id, a.firmware_id, a.rollout_id, a.status, a.progress,
		a.attempt, a.error_code, a.error_message, a.created_at, a.updated_at,
		ARRAY(SELECT firmware_id::text FROM tasks WHERE device_id = d.device_id AND status = 'failed') AS failed,
		d.tags, (SELECT attributes FROM device_attributes WHERE device_id = d.device_id AND updated_at IS NOT NULL) AS attributes
	FROM devices d
	LEFT JOIN LATERAL (SELECT ` + taskColumns + ` FROM tasks WHERE device_id = d.device_id AND ` + activeStatusSQL + `) AS a ON true`

// The check view by token hash (authentication) and by device id.
const (
	checkViewByTokenSQL = checkViewSQL + ` WHERE d.token_hash = $1`
	checkViewByIDSQL    = checkViewSQL + ` WHERE d.device_id = $1`
)

// task_events is partitioned by its task's created_at (migration 00051):
// the lookup names it, so only that month's partition is read, and the
// insert takes it from the task row, so that it cannot be written wrong
// and (task_id, event_id) stays unique through the partitioned key.
const (
	selectEventSQL = `SELECT fingerprint FROM task_events WHERE task_id = $1 AND event_id = $2 AND task_created_at = $3`
	insertEventSQL = `INSERT INTO task_events (task_id, event_id, fingerprint, created_at, task_created_at)
		SELECT $1, $2, $3, $4, created_at FROM tasks WHERE id = $1`
)

// offerOfSQL reads a firmware and a rollout together (an offer, or the
// active task's pair).
var offerOfSQL = `SELECT ` + columns("f", firmwareFields) + `, ` + columns("r", rolloutFields) + `
	FROM firmwares f, rollouts r WHERE f.id = $1 AND r.id = $2`

// CheckView reads the device whose token has hash h with its active task
// and failed counts, in one prepared statement (one round trip), on the
// read replica when one is configured and fresh enough (replica.go).
func (s *TaskRepository) CheckView(ctx context.Context, h domain.TokenHash) (ports.CheckView, error) {
	return s.routedCheckView(ctx, checkViewByTokenSQL, s.checkByToken, h[:])
}

// CheckViewOf is CheckView for a device known by id.
func (s *TaskRepository) CheckViewOf(ctx context.Context, deviceID domain.DeviceID) (ports.CheckView, error) {
	if deviceID.IsZero() {
		return ports.CheckView{}, fmt.Errorf("loading device: %w", domain.ErrNotFound)
	}
	return s.routedCheckView(ctx, checkViewByIDSQL, s.checkByID, deviceID.String())
}

// checkViewRow is one row of checkViewSQL. The check scans into one value
// of it, not into a variable per column: each destination Scan is given
// escapes to the heap, one allocation per column on every check.
type checkViewRow struct {
	dev                           deviceRow
	id, fw, ro, status, code, msg sql.NullString
	actionID                      sql.NullInt64
	progress, attempt             sql.NullInt32
	created, updated              sql.NullTime
	failedIDs, tags               pq.StringArray
	attrs                         []byte
}

func (s *TaskRepository) checkView(ctx context.Context, stmt *sqlx.Stmt, key any) (ports.CheckView, error) {
	r := new(checkViewRow)
	dev := &r.dev
	err := stmt.QueryRowContext(ctx, key).Scan(&dev.DeviceID, &dev.Model, &dev.CurrentVersion, &dev.TokenHash, &dev.LastSeenAt, &dev.CreatedAt,
		&r.id, &r.actionID, &r.fw, &r.ro, &r.status, &r.progress, &r.attempt, &r.code, &r.msg, &r.created, &r.updated,
		&r.failedIDs, &r.tags, &r.attrs)
	if err != nil {
		return ports.CheckView{}, fmt.Errorf("loading a device and its tasks: %w", notFound(err))
	}
	d, err := dev.toDomain()
	if err != nil {
		return ports.CheckView{}, err
	}
	v := ports.CheckView{Device: d, Tasks: ports.DeviceTasks{Failed: make(map[string]int, len(r.failedIDs))}}
	if len(r.tags) > 0 {
		v.Tasks.Facts.Tags = r.tags
	}
	if r.attrs != nil {
		if err := json.Unmarshal(r.attrs, &v.Tasks.Facts.Attributes); err != nil {
			return ports.CheckView{}, fmt.Errorf("device %s has corrupt attributes: %w", d.ID(), err)
		}
	}
	for _, f := range r.failedIDs {
		v.Tasks.Failed[f]++
	}
	if !r.id.Valid {
		return v, nil
	}
	t, err := taskRow{
		ID: r.id.String, ActionID: r.actionID.Int64, DeviceID: dev.DeviceID, FirmwareID: r.fw.String, RolloutID: r.ro.String,
		Status: r.status.String, Progress: int(r.progress.Int32), Attempt: int(r.attempt.Int32), ErrorCode: r.code, ErrorMessage: r.msg,
		CreatedAt: r.created.Time, UpdatedAt: r.updated.Time,
	}.toDomain()
	if err != nil {
		return ports.CheckView{}, err
	}
	v.Tasks.Active = &t
	return v, nil
}

// offerIn reads a firmware and a rollout with stmt (offerOfSQL, or it FOR
// SHARE) in tx; domain.ErrNotFound when either does not exist.
func offerIn(ctx context.Context, tx *sqlx.Tx, stmt *sqlx.Stmt, firmwareID, rolloutID domain.UUID) (domain.Offer, error) {
	if firmwareID.IsZero() || rolloutID.IsZero() {
		return domain.Offer{}, fmt.Errorf("loading firmware %q and rollout %q: %w", firmwareID, rolloutID, domain.ErrNotFound)
	}
	fw, ro := firmwareID.String(), rolloutID.String()
	var row offerRow
	if err := tx.StmtxContext(ctx, stmt).GetContext(ctx, &row, fw, ro); err != nil {
		return domain.Offer{}, fmt.Errorf("loading firmware %s and rollout %s: %w", fw, ro, notFound(err))
	}
	out, err := offersFrom([]offerRow{row})
	if err != nil {
		return domain.Offer{}, err
	}
	return out[0], nil
}

// installedSQL records, with a success, the version the device now runs
// (domain.Task.Installs): the firmware's, whatever the device last
// reported; last_seen_at moves forward to the success, so a report older
// than it, flushed late, does not undo it.
const installedSQL = `UPDATE devices SET current_version = $2, last_seen_at = GREATEST(last_seen_at, $3) WHERE device_id = $1`

// insertTaskSQL inserts a task unless the device already has an active
// one: the partial unique index is the arbiter, so a conflicting insert
// waits for the transaction that made the other active task, and does
// nothing (no row returned) if that one commits.
const insertTaskSQL = `INSERT INTO tasks (id, device_id, firmware_id, rollout_id, status, progress, attempt,
		error_code, error_message, created_at, updated_at, stage_started_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
	ON CONFLICT (device_id) WHERE ` + activeStatusSQL + ` DO NOTHING
	RETURNING action_id`

// insertUnchangedSQL is insertTaskSQL guarded by what a plan read
// (InsertIfUnchanged): the firmware and the rollout of that firmware, read
// FOR SHARE, must have the statuses $13 and $14 and the rollout the
// updated_at $15 (t joined the stage that version of it gives) — a
// revoke, pause or stage change in progress is waited for, and the row it
// committed is what is compared — and, as the statement's snapshot has
// them, the device must have no active task and no task in the rollout,
// its failed tasks of the firmware must number $16, and its version must
// be one of $22 (text, the empty string for none stored). The snapshot is
// taken before any wait for those locks: a task active in it that fails
// while the statement waits would be missing from the count and gone from
// the unique index by the insert, so such a task refuses the insert here
// (the transaction locks it and counts after). No row selected, or the
// partial unique index taken: nothing inserted, nothing returned. The
// inserted task is added to the counters ($17–$21, addCountsSQL's) in the
// same statement, only when it was inserted.
const insertUnchangedSQL = `WITH ins AS (
	INSERT INTO tasks (id, device_id, firmware_id, rollout_id, status, progress, attempt,
		error_code, error_message, created_at, updated_at, stage_started_at)
	SELECT $1, $2, f.id, r.id, $5, $6, $7, $8, $9, $10, $11, $12 FROM firmwares f, rollouts r
	WHERE f.id = $3 AND r.id = $4 AND r.firmware_id = f.id AND f.status = $13 AND r.status = $14 AND r.updated_at = $15
		AND NOT EXISTS (SELECT FROM tasks WHERE device_id = $2 AND (` + activeStatusSQL + ` OR rollout_id = $4))
		AND (SELECT count(*) FROM tasks WHERE device_id = $2 AND firmware_id = $3 AND status = 'failed') = $16
		AND (SELECT coalesce(current_version, '') FROM devices WHERE device_id = $2) = ANY($22::text[])
	FOR SHARE OF f, r
	ON CONFLICT (device_id) WHERE ` + activeStatusSQL + ` DO NOTHING
	RETURNING action_id
), counted AS (
	INSERT INTO rollout_counters AS c (rollout_id, stage_started_at, status, shard, devices)
	SELECT d.rollout_id::uuid, d.stage::timestamptz, d.status, $17, d.n
	FROM unnest($18::text[], $19::text[], $20::text[], $21::bigint[]) AS d(rollout_id, stage, status, n), ins
	ORDER BY 1, 2, 3
	ON CONFLICT (rollout_id, stage_started_at, status, shard) DO UPDATE SET devices = c.devices + excluded.devices
)
SELECT action_id FROM ins`

// updateUnchangedSQL is a device event's whole write in one statement
// (UpdateIfUnchanged): task $1's mutable fields set ($2–$7) only if they
// are still as read ($8–$13) — a change committed meanwhile, or one in
// progress, which the UPDATE waits for and then compares against, fails
// it — and its device has no other task in its rollout (so the task
// counts for itself in every scope); then, only when the task was
// updated, event $14 recorded ($15 its fingerprint; an id recorded
// already fails the whole statement on the unique key) and the counters
// added ($16–$20, addCountsSQL's). updateEndedSQL is the statement of an
// event that ends the task.
var updateUnchangedSQL = updateTaskCTEs + `, ` + countedCTE("") + `
SELECT ` + taskColumns + ` FROM upd`

// updateEndedSQL is updateUnchangedSQL for an event that ends the task:
// also the device's version set to $21 (NULL: none installed;
// last_seen_at moved forward to the task's update, as installedSQL does)
// and the task's end announced (announceSQL's outbox row and deliveries:
// $22 its type, NULL for none, $23 its time, $24 its payload). It takes the task's row,
// then the device's, then the counter rows — the order of the event's
// transaction (UpdateTask, SetDeviceVersion, AddCounts): the counters'
// insert is gated on the device's update having run (the InitPlan over
// dev), so no statement holds counter rows while it waits for a device's
// row. A progress event keeps to updateUnchangedSQL: these CTEs, idle for
// it, cost its Postgres a quarter more CPU.
var updateEndedSQL = updateTaskCTEs + `, dev AS (
	UPDATE devices d SET current_version = $21::text, last_seen_at = GREATEST(d.last_seen_at, upd.updated_at)
	FROM upd WHERE $21::text IS NOT NULL AND d.device_id = upd.device_id
	RETURNING d.device_id
), announced AS (
	INSERT INTO outbox_events (type, at, payload) SELECT $22::text, $23::timestamptz, $24::jsonb FROM upd WHERE $22::text IS NOT NULL
	RETURNING id, type
), delivered AS (
	INSERT INTO webhook_deliveries (subscription_id, event_id, next_attempt_at)
	SELECT s.id, a.id, $23::timestamptz FROM webhook_subscriptions s, announced a
	WHERE s.enabled AND (cardinality(s.event_types) = 0 OR a.type = ANY (s.event_types))
	FOR KEY SHARE OF s -- announceSQL's: a subscription deleted meanwhile is left out, not an error
), ` + countedCTE(`WHERE (SELECT count(*) FROM dev) >= 0`) + `
SELECT ` + taskColumns + ` FROM upd`

// updateTaskCTEs are an event's guarded update of its task (upd) and the
// event's record (ev).
const updateTaskCTEs = `WITH upd AS (
	UPDATE tasks t SET status = $2, progress = $3, attempt = $4, error_code = $5, error_message = $6, updated_at = $7
	WHERE t.id = $1 AND t.status = $8 AND t.progress IS NOT DISTINCT FROM $9 AND t.attempt = $10
		AND t.error_code IS NOT DISTINCT FROM $11 AND t.error_message IS NOT DISTINCT FROM $12 AND t.updated_at = $13
		AND NOT EXISTS (SELECT FROM tasks o WHERE o.rollout_id = t.rollout_id AND o.device_id = t.device_id AND o.id <> t.id)
	RETURNING ` + taskColumns + `
), ev AS (
	INSERT INTO task_events (task_id, event_id, fingerprint, created_at, task_created_at)
	SELECT id, $14, $15, updated_at, created_at FROM upd
)`

// countedCTE adds an updated task's counter changes ($16–$20), when the
// condition gate holds.
func countedCTE(gate string) string {
	return `counted AS (
	INSERT INTO rollout_counters AS c (rollout_id, stage_started_at, status, shard, devices)
	SELECT d.rollout_id::uuid, d.stage::timestamptz, d.status, $16, d.n
	FROM unnest($17::text[], $18::text[], $19::text[], $20::bigint[]) AS d(rollout_id, stage, status, n), upd
	` + gate + `
	ORDER BY 1, 2, 3
	ON CONFLICT (rollout_id, stage_started_at, status, shard) DO UPDATE SET devices = c.devices + excluded.devices
)`
}

// UpdateIfUnchanged stores w in one statement outside any transaction
// (updateUnchangedSQL): a progress event is then three round trips
// (authentication, the task, this) instead of nine, and a success twelve
// fewer. An event id recorded already (the unique key refuses it, and the
// statement writes nothing) is no update either: the transaction sees the
// event and answers as for a replay.
func (s *TaskRepository) UpdateIfUnchanged(ctx context.Context, w ports.GuardedTaskWrite) (domain.Task, bool, error) {
	if w.Before.ID() != w.After.ID() {
		return domain.Task{}, false, fmt.Errorf("updating task %s: the change is of task %s", w.Before.ID(), w.After.ID())
	}
	was, to := newTaskRow(w.Before), newTaskRow(w.After)
	var installed, typ, at, payload any // NULL: no version installed, nothing announced
	if w.Installed != nil {
		installed = w.Installed.String()
	}
	if w.Announce != nil {
		a := announceArgs(*w.Announce)
		typ, at, payload = a[0], a[1], a[2]
	}
	args := append([]any{to.ID, to.Status, to.Progress, to.Attempt, to.ErrorCode, to.ErrorMessage, to.UpdatedAt,
		was.Status, was.Progress, was.Attempt, was.ErrorCode, was.ErrorMessage, was.UpdatedAt, w.Event.ID(), w.Event.Fingerprint()},
		counterRowsOf(w.After.DeviceID(), w.Counts).args()...)
	stmt := s.updateUnchanged
	if w.Installed != nil || w.Announce != nil {
		stmt, args = s.updateEnded, append(args, installed, typ, at, payload)
	}
	var r taskRow
	err := r.scan(stmt.QueryRowxContext(ctx, args...))
	switch {
	case errors.Is(err, sql.ErrNoRows), pq.As(err, pqerror.UniqueViolation) != nil:
		return domain.Task{}, false, nil
	case err != nil:
		return domain.Task{}, false, fmt.Errorf("storing task %s: %w", to.ID, mapWriteErr(err))
	}
	out, err := r.toDomain()
	return out, err == nil, err
}

// InsertIfUnchanged inserts t and adds counts in one statement outside
// any transaction (insertUnchangedSQL): a creation is then two round
// trips, the check view and this, instead of the check view and a
// transaction's eight.
func (s *TaskRepository) InsertIfUnchanged(ctx context.Context, t domain.Task, seen ports.GuardedInsert, counts []domain.CountChange) (domain.Task, bool, error) {
	if t.FirmwareID().IsZero() || t.RolloutID().IsZero() {
		return domain.Task{}, false, nil // names no offer: nothing to compare
	}
	r := newTaskRow(t)
	versions := make([]string, len(seen.Versions))
	for i, v := range seen.Versions {
		versions[i] = v.String()
	}
	args := append([]any{r.ID, r.DeviceID, r.FirmwareID, r.RolloutID, r.Status, r.Progress, r.Attempt,
		r.ErrorCode, r.ErrorMessage, r.CreatedAt, r.UpdatedAt, r.Stage, seen.Offer.Firmware.Status().String(), seen.Offer.Rollout.Status().String(),
		dbTime(seen.Offer.Rollout.UpdatedAt()), seen.Failed}, append(counterRowsOf(t.DeviceID(), counts).args(), pq.Array(versions))...)
	err := s.insertUnchanged.QueryRowxContext(ctx, args...).Scan(&r.ActionID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return domain.Task{}, false, nil
	case err != nil:
		return domain.Task{}, false, fmt.Errorf("inserting task %s: %w", r.ID, mapWriteErr(err))
	}
	out, err := r.toDomain()
	return out, err == nil, err
}

// maxInsertRounds bounds insertOrWinner's insert-or-read-the-winner loop. A
// second round happens only when the winner finished between the two
// statements; more than a few means the device's task is churning.
const maxInsertRounds = 5

// insertOrWinner inserts t unless the device has an active task, in which
// case that task (the winner of a race) is returned with created false.
func (s *TaskRepository) insertOrWinner(ctx context.Context, tx *sqlx.Tx, t domain.Task) (domain.Task, bool, error) {
	r := newTaskRow(t)
	// Its ids are typed (domain.UUID, canonical), so they are written as
	// they are; only a zero reference (no firmware or rollout) is answered
	// here, as not found, rather than by a cast error.
	fw, ro := r.FirmwareID, r.RolloutID
	if fw == "" || ro == "" {
		return domain.Task{}, false, fmt.Errorf("inserting task %s: the firmware or rollout does not exist: %w", r.ID, domain.ErrNotFound)
	}
	insert := tx.StmtxContext(ctx, s.insert)
	for round := 1; ; round++ {
		err := insert.QueryRowxContext(ctx, r.ID, r.DeviceID, fw, ro, r.Status, r.Progress, r.Attempt,
			r.ErrorCode, r.ErrorMessage, r.CreatedAt, r.UpdatedAt, r.Stage).Scan(&r.ActionID)
		if err == nil {
			out, err := r.toDomain()
			return out, true, err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return domain.Task{}, false, fmt.Errorf("inserting task %s: %w", r.ID, mapWriteErr(err))
		}
		winner, err := activeTask(ctx, tx.StmtxContext(ctx, s.active), r.DeviceID)
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

func (s *TaskRepository) lockTask(ctx context.Context, tx *sqlx.Tx, id string) (domain.Task, error) {
	var r taskRow
	if err := r.scan(tx.StmtxContext(ctx, s.lock).QueryRowContext(ctx, id)); err != nil {
		return domain.Task{}, fmt.Errorf("loading task %s: %w", id, notFound(err))
	}
	return r.toDomain()
}

// rolloutJudged tells this process's catalog cache, once the transaction
// that stored a rollout (a judgement, an operator's change) has ended,
// that the rollout changed: the NOTIFY it sent reaches the cache's
// listener only later, and until then the next read or check on this
// instance would still see the old stage, or an active rollout an event
// or an operator paused. Called after a rollback too (a needless refill,
// never a stale read). Every model is dropped: the stored row does not
// carry its model, and rollout changes are rare.
func (s *TaskRepository) rolloutJudged(stored bool) {
	if stored && s.catalog != nil {
		s.catalog.invalidate("*")
	}
}

// failedIn counts the device's failed tasks with stmt (s.failed, possibly
// bound to a transaction).
func (s *TaskRepository) failedIn(ctx context.Context, stmt *sqlx.Stmt, deviceID string) (map[string]int, error) {
	out := map[string]int{}
	err := scanCounts(ctx, stmt, []any{deviceID}, func(err error) error {
		return fmt.Errorf("counting failed tasks of device %q: %w", deviceID, err)
	}, func(fw string, n int) error {
		out[fw] = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanCounts runs stmt, a GROUP BY that yields (key, count) rows, and
// hands each row to each. It exists so that every such read closes its
// rows and checks rows.Err the same way: a failure of the database's is
// unavailable, put in context by dbErr (called only on failure, so a read
// on the check's path formats nothing when it succeeds); each's own error,
// a corrupt row, is returned as is.
func scanCounts(ctx context.Context, stmt *sqlx.Stmt, args []any, dbErr func(error) error, each func(key string, n int) error) error {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return dbErr(unavailable(err))
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var n int
		if err := rows.Scan(&key, &n); err != nil {
			return dbErr(unavailable(err))
		}
		if err := each(key, n); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return dbErr(unavailable(err))
	}
	return nil
}

// judgeViewSQL reads, in one statement and so in one snapshot, what a
// rollout's judgement without its lock reads (application.JudgeReader):
// the offer and the rollout's counters in every scope — the whole
// rollout's and each stage's, a few statuses each — summed over their
// shards as storedCountsSQL sums them: one element per (scope, status) in
// each of three arrays aggregated over the same rows, the scope as
// microseconds since the epoch. A rollout without counters has NULL arrays.
var judgeViewSQL = `SELECT ` + columns("f", firmwareFields) + `, ` + columns("r", rolloutFields) + `,
		c.stages AS "stages", c.statuses AS "statuses", c.devices AS "devices"
	FROM firmwares f, rollouts r, LATERAL (
		SELECT array_agg((extract(epoch FROM stage_started_at) * 1000000)::bigint) AS stages,
			array_agg(status) AS statuses, array_agg(n) AS devices
		FROM (SELECT stage_started_at, status, sum(devices)::bigint AS n FROM rollout_counters
			WHERE rollout_id = r.id GROUP BY stage_started_at, status) s) c
	WHERE f.id = $1 AND r.id = $2`

// JudgeView reads a rollout's offer and its counters in every scope, in
// one round trip (judgeViewSQL): a final event's judgement after its
// commit without a transaction of four.
func (s *TaskRepository) JudgeView(ctx context.Context, firmwareID, rolloutID domain.UUID) (domain.Offer, []ports.RolloutCount, error) {
	var row struct {
		offerRow
		Stages   pq.Int64Array  `db:"stages"`
		Statuses pq.StringArray `db:"statuses"`
		Devices  pq.Int64Array  `db:"devices"`
	}
	fw, ro := firmwareID.String(), rolloutID.String()
	if err := s.judgeView.GetContext(ctx, &row, fw, ro); err != nil {
		return domain.Offer{}, nil, fmt.Errorf("loading firmware %s and rollout %s: %w", fw, ro, notFound(err))
	}
	offers, err := offersFrom([]offerRow{row.offerRow})
	if err != nil {
		return domain.Offer{}, nil, err
	}
	var counts []ports.RolloutCount
	for i, us := range row.Stages {
		st, err := domain.ParseTaskStatus(row.Statuses[i])
		if err != nil {
			return domain.Offer{}, nil, fmt.Errorf("rollout %s has tasks with a corrupt status: %w", ro, err)
		}
		stage := time.UnixMicro(us).UTC() // the whole rollout's is the zero time
		j := slices.IndexFunc(counts, func(c ports.RolloutCount) bool { return c.Stage.Equal(stage) })
		if j < 0 {
			counts, j = append(counts, ports.RolloutCount{Rollout: rolloutID, Stage: stage}), len(counts)
		}
		counts[j].Stats.Add(st, int(row.Devices[i]))
	}
	return offers[0], counts, nil
}

// RolloutStatsSince reads a rollout's counters (countersSQL): the whole
// rollout's for the zero since, else those of its stage started at since.
// An unknown rollout (or the zero id) has none.
func (s *TaskRepository) RolloutStatsSince(ctx context.Context, rolloutID domain.UUID, since time.Time) (domain.TaskStats, error) {
	if rolloutID.IsZero() {
		return domain.TaskStats{}, nil
	}
	return statsIn(ctx, s.stats, rolloutID.String(), dbTime(since))
}

// statsIn counts a rollout's tasks by status with stmt (the stats
// statement, possibly bound to a transaction).
func statsIn(ctx context.Context, stmt *sqlx.Stmt, uid string, since ...any) (domain.TaskStats, error) {
	var stats domain.TaskStats
	err := scanCounts(ctx, stmt, append([]any{uid}, since...), func(err error) error {
		return fmt.Errorf("counting tasks of rollout %s: %w", uid, err)
	}, func(status string, n int) error {
		st, err := domain.ParseTaskStatus(status)
		if err != nil {
			return fmt.Errorf("rollout %s has tasks with a corrupt status: %w", uid, err)
		}
		stats.Add(st, n)
		return nil
	})
	if err != nil {
		return domain.TaskStats{}, err
	}
	return stats, nil
}

// List returns tasks matching f in (created_at, id) order, at most f.Limit
// (ports.DefaultListLimit when not positive), continuing after f.After. It is
// keyset pagination — WHERE (created_at, id) > (cursor) ORDER BY created_at,
// id — so a page costs the same however deep it is, and each filter has an
// index that leads with it. Only placeholders are added to the query, never
// values. Never nil.
func (s *TaskRepository) List(ctx context.Context, f ports.TaskFilter) ([]domain.Task, error) {
	var cond conditions
	arg := cond.arg
	if !f.DeviceID.IsZero() {
		cond.where = append(cond.where, "device_id = "+arg(f.DeviceID.String()))
	}
	if !f.RolloutID.IsZero() {
		cond.where = append(cond.where, "rollout_id = "+arg(f.RolloutID.String()))
	}
	if f.Status != nil {
		cond.where = append(cond.where, "status = "+arg(f.Status.String()))
	}
	if f.After != nil {
		// The zero id sorts before every id at the cursor's time, as ""
		// does in the memory adapter.
		uid := f.After.ID.String()
		if f.After.ID.IsZero() {
			uid = "00000000-0000-0000-0000-000000000000"
		}
		cond.where = append(cond.where, "(created_at, id) > ("+arg(dbTime(f.After.CreatedAt))+"::timestamptz, "+arg(uid)+"::uuid)")
	}
	limit := positiveOr(f.Limit, ports.DefaultListLimit)
	q := `SELECT ` + taskColumns + ` FROM tasks`
	if len(cond.where) > 0 {
		q += ` WHERE ` + strings.Join(cond.where, " AND ")
	}
	q += ` ORDER BY created_at, id LIMIT ` + arg(limit)

	var rows []taskRow
	if err := s.db.SelectContext(ctx, &rows, q, cond.args...); err != nil {
		return nil, fmt.Errorf("listing tasks: %w", unavailable(err))
	}
	return domainOf(rows)
}

// Events returns the task's stored events in (created_at, event_id)
// order, at most limit. The task's own created_at (the partition key) is
// joined in, so only its month's partition is read.
func (s *TaskRepository) Events(ctx context.Context, taskID domain.UUID, limit int) ([]ports.TaskEvent, error) {
	out := []ports.TaskEvent{}
	if taskID.IsZero() || limit <= 0 {
		return out, nil
	}
	var rows []struct {
		ID          string    `db:"event_id"`
		Fingerprint string    `db:"fingerprint"`
		At          time.Time `db:"created_at"`
	}
	if err := s.db.SelectContext(ctx, &rows, `SELECT e.event_id, e.fingerprint, e.created_at
		FROM task_events e JOIN tasks t ON t.id = e.task_id AND t.created_at = e.task_created_at
		WHERE e.task_id = $1 ORDER BY e.created_at, e.event_id LIMIT $2`, taskID.String(), limit); err != nil {
		return nil, fmt.Errorf("listing task events: %w", unavailable(err))
	}
	for _, r := range rows {
		ev, err := domain.RehydrateStoredEvent(r.ID, r.Fingerprint)
		if err != nil {
			return nil, err
		}
		out = append(out, ports.TaskEvent{Event: ev, At: r.At})
	}
	return out, nil
}

// InTaskTx runs fn in one READ COMMITTED transaction over tasks and
// commits what it wrote when fn returns nil. The primitives (taskTx) are
// the statements the check and event paths always sent, one round trip
// each; the lock order is the caller's (application.ReplaceActive). A
// rollout a judgement stored is told to the catalog cache once the
// transaction has ended (rolloutJudged).
func (s *TaskRepository) InTaskTx(ctx context.Context, fn func(tx ports.TaskTx) error) error {
	var rolloutStored bool
	defer func() { s.rolloutJudged(rolloutStored) }()
	return inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		return fn(&taskTx{s: s, ctx: ctx, tx: tx, locked: map[string]rolloutRow{}, rolloutStored: &rolloutStored})
	})
}

// taskTx is ports.TaskTx over one Postgres transaction.
type taskTx struct {
	s      *TaskRepository
	ctx    context.Context
	tx     *sqlx.Tx
	locked map[string]rolloutRow // rollouts read FOR NO KEY UPDATE, as read: what StoreRollout writes over
	// rolloutStored says a rollout was stored (in some attempt).
	rolloutStored *bool
}

var _ ports.TaskTx = (*taskTx)(nil)

func (t *taskTx) stmt(s *sqlx.Stmt) *sqlx.Stmt { return t.tx.StmtxContext(t.ctx, s) }

// withOffer pairs a task with its firmware and rollout, read in the transaction.
func (t *taskTx) withOffer(task domain.Task) (*domain.ActiveTask, error) {
	o, err := offerIn(t.ctx, t.tx, t.s.offerOf, task.FirmwareID(), task.RolloutID())
	if err != nil {
		return nil, err
	}
	return &domain.ActiveTask{Task: task, Firmware: o.Firmware, Rollout: o.Rollout}, nil
}

// ActiveTask reads the device's active task FOR UPDATE, then its offer.
func (t *taskTx) ActiveTask(deviceID domain.DeviceID) (*domain.ActiveTask, error) {
	cur, err := activeTask(t.ctx, t.stmt(t.s.activeForUpdate), deviceID.String())
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return t.withOffer(cur)
}

// LatestFinal reads the device's most recent task with an outcome FOR
// UPDATE, then its offer; none while the device has an active task.
func (t *taskTx) LatestFinal(deviceID domain.DeviceID) (*domain.ActiveTask, error) {
	last, err := latestTask(t.ctx, t.stmt(t.s.latestForUpdate), deviceID.String())
	if errors.Is(err, domain.ErrNotFound) || err == nil && !last.Status().IsFinal() {
		return nil, nil // none, or an active one inserted since: no outcome to judge
	}
	if err != nil {
		return nil, err
	}
	return t.withOffer(last)
}

// DeviceVersion reads the device's current_version in the transaction.
func (t *taskTx) DeviceVersion(deviceID domain.DeviceID) (domain.Version, error) {
	var v sql.NullString
	if err := t.stmt(t.s.deviceVersion).QueryRowContext(t.ctx, deviceID.String()).Scan(&v); err != nil {
		return domain.Version{}, fmt.Errorf("reading the version of device %q: %w", deviceID, notFound(err))
	}
	if !v.Valid {
		return domain.Version{}, nil
	}
	return domain.ParseVersion("current_version", v.String)
}

// FailedCounts counts the device's failed tasks in the transaction.
func (t *taskTx) FailedCounts(deviceID domain.DeviceID) (map[string]int, error) {
	return t.s.failedIn(t.ctx, t.stmt(t.s.failed), deviceID.String())
}

// LockTask reads a task FOR UPDATE.
func (t *taskTx) LockTask(id domain.UUID) (domain.Task, error) {
	return t.s.lockTask(t.ctx, t.tx, id.String())
}

// Event reads the event recorded for task under eventID, in the task's
// month's partition.
func (t *taskTx) Event(task domain.Task, eventID string) (*domain.Event, error) {
	var fingerprint string
	err := t.stmt(t.s.event).QueryRowContext(t.ctx, task.ID().String(), eventID, dbTime(task.CreatedAt())).Scan(&fingerprint)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("loading event %q of task %s: %w", eventID, task.ID(), unavailable(err))
	}
	p := domain.RehydrateEvent(eventID, fingerprint)
	return &p, nil
}

// LockRollout reads a rollout FOR NO KEY UPDATE: a concurrent creation's
// FOR SHARE of it waits, and so does this for one in progress.
func (t *taskTx) LockRollout(id domain.UUID) (domain.Rollout, error) {
	var r rolloutRow
	if err := t.stmt(t.s.lockRollout).GetContext(t.ctx, &r, id.String()); err != nil {
		return domain.Rollout{}, fmt.Errorf("loading rollout %s: %w", id, notFound(err))
	}
	t.locked[r.ID] = r
	return r.toDomain()
}

// Offer reads a firmware and a rollout together, unlocked.
func (t *taskTx) Offer(firmwareID, rolloutID domain.UUID) (domain.Offer, error) {
	return offerIn(t.ctx, t.tx, t.s.offerOf, firmwareID, rolloutID)
}

// OfferForShare reads a firmware and a rollout FOR SHARE.
func (t *taskTx) OfferForShare(firmwareID, rolloutID domain.UUID) (domain.Offer, error) {
	return offerIn(t.ctx, t.tx, t.s.offerForShare, firmwareID, rolloutID)
}

// UpdateTask stores task's mutable fields.
func (t *taskTx) UpdateTask(task domain.Task) (domain.Task, error) {
	return t.s.updateTask(t.ctx, t.tx, task.ID().String(), task)
}

// StoreEvent records ev for task; the unique key refuses an event id
// already recorded.
func (t *taskTx) StoreEvent(task domain.Task, ev domain.Event) error {
	if _, err := t.stmt(t.s.insertEvent).ExecContext(t.ctx, task.ID().String(), ev.ID(), ev.Fingerprint(), dbTime(task.UpdatedAt())); err != nil {
		return fmt.Errorf("recording event %q of task %s: %w", ev.ID(), task.ID(), mapWriteErr(err))
	}
	return nil
}

// InsertUnlessActive is INSERT … ON CONFLICT DO NOTHING on the partial
// unique index of active tasks, reading the winner back (insertOrWinner).
func (t *taskTx) InsertUnlessActive(task domain.Task) (domain.Task, bool, error) {
	return t.s.insertOrWinner(t.ctx, t.tx, task)
}

// SetDeviceVersion stores the version the device runs (installedSQL).
func (t *taskTx) SetDeviceVersion(deviceID domain.DeviceID, v domain.Version, at time.Time) error {
	if _, err := t.stmt(t.s.installed).ExecContext(t.ctx, deviceID.String(), v.String(), dbTime(at)); err != nil {
		return fmt.Errorf("recording the version device %q installed: %w", deviceID, mapWriteErr(err))
	}
	return nil
}

// StoreRollout writes r over the row LockRollout read.
func (t *taskTx) StoreRollout(r domain.Rollout) (domain.Rollout, error) {
	before, ok := t.locked[r.ID().String()]
	if !ok {
		return domain.Rollout{}, fmt.Errorf("storing rollout %s: it was not locked in this transaction", r.ID())
	}
	out, err := storeRollout(t.ctx, t.tx, before, r)
	*t.rolloutStored = true
	return out, err
}

// RolloutStats reads the rollout's counters in the transaction.
func (t *taskTx) RolloutStats(rolloutID domain.UUID, since time.Time) (domain.TaskStats, error) {
	return statsIn(t.ctx, t.stmt(t.s.stats), rolloutID.String(), dbTime(since))
}

// CountedTasks reads the device's counted tasks: countedTaskSQL for the
// rollout alone, countedInBothSQL with its stage.
func (t *taskTx) CountedTasks(rolloutID domain.UUID, deviceID domain.DeviceID, stage time.Time) (inRollout, inStage *domain.Task, err error) {
	stmt, args := t.s.counted, []any{rolloutID.String(), deviceID.String()}
	if !stage.IsZero() {
		stmt, args = t.s.countedInBoth, append(args, dbTime(stage))
	}
	rows, err := t.stmt(stmt).QueryContext(t.ctx, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the counted tasks of device %q: %w", deviceID, unavailable(err))
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r      taskRow
			staged bool // countedInBothSQL's first column; countedTaskSQL's row is the rollout's
		)
		dest := r.fields()
		if !stage.IsZero() {
			dest = append([]any{&staged}, dest...)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, fmt.Errorf("loading the counted tasks of device %q: %w", deviceID, unavailable(err))
		}
		task, err := r.toDomain()
		if err != nil {
			return nil, nil, err
		}
		if staged {
			inStage = &task
		} else {
			inRollout = &task
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("loading the counted tasks of device %q: %w", deviceID, unavailable(err))
	}
	return inRollout, inStage, nil
}

// AddCounts adds the changes, merged by counter row, to the device's
// shard (addCountsSQL).
func (t *taskTx) AddCounts(deviceID domain.DeviceID, changes []domain.CountChange) error {
	rows := counterRowsOf(deviceID, changes)
	if rows.empty() {
		return nil
	}
	if _, err := t.stmt(t.s.addCounts).ExecContext(t.ctx, rows.args()...); err != nil {
		return fmt.Errorf("adding to the counters of device %q's rollouts: %w", deviceID, mapWriteErr(err))
	}
	return nil
}

// counterRows are changes as addCountsSQL's arguments: the device's
// shard, then one element per counter row changed, merged by row.
type counterRows struct {
	shard                      int
	rollouts, stages, statuses []string
	ns                         []int64
}

func counterRowsOf(deviceID domain.DeviceID, changes []domain.CountChange) counterRows {
	type key struct{ rollout, stage, status string }
	sums := map[key]int{}
	for _, c := range changes {
		stage := dbTime(c.Stage).Format(time.RFC3339Nano)
		for _, st := range domain.AllTaskStatuses {
			if n := c.Delta.Of(st); n != 0 {
				sums[key{c.Rollout.String(), stage, st.String()}] += n
			}
		}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(deviceID.String()))
	out := counterRows{shard: int(h.Sum32() % counterShards)}
	for k, n := range sums {
		if n != 0 {
			out.rollouts, out.stages, out.statuses = append(out.rollouts, k.rollout), append(out.stages, k.stage), append(out.statuses, k.status)
			out.ns = append(out.ns, int64(n))
		}
	}
	return out
}

func (c counterRows) empty() bool { return len(c.ns) == 0 }

// args are addCountsSQL's $1–$5.
func (c counterRows) args() []any {
	return []any{c.shard, pq.Array(c.rollouts), pq.Array(c.stages), pq.Array(c.statuses), pq.Array(c.ns)}
}

// StoredCounts reads the counters of one rollout, or of all (storedCountsSQL).
func (s *TaskRepository) StoredCounts(ctx context.Context, rolloutID domain.UUID) ([]ports.RolloutCount, error) {
	return s.counts(ctx, storedCountsSQL, rolloutID)
}

// Recount counts the tasks of one rollout, or of all (recountSQL).
func (s *TaskRepository) Recount(ctx context.Context, rolloutID domain.UUID) ([]ports.RolloutCount, error) {
	return s.counts(ctx, recountSQL, rolloutID, wholeRollout)
}

// counts runs a statement whose rows are (rollout, stage, status, count)
// and gathers them by scope.
func (s *TaskRepository) counts(ctx context.Context, query string, rolloutID domain.UUID, args ...any) ([]ports.RolloutCount, error) {
	rows, err := s.db.QueryContext(ctx, query, append([]any{rolloutID.String()}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("counting rollouts' devices: %w", unavailable(err))
	}
	defer rows.Close()
	type key struct {
		rollout string
		stage   time.Time
	}
	byScope, order := map[key]*ports.RolloutCount{}, []key{}
	for rows.Next() {
		var (
			k      key
			status string
			n      int
		)
		if err := rows.Scan(&k.rollout, &k.stage, &status, &n); err != nil {
			return nil, fmt.Errorf("counting rollouts' devices: %w", unavailable(err))
		}
		st, err := domain.ParseTaskStatus(status)
		if err != nil {
			return nil, err
		}
		if k.stage = k.stage.UTC(); k.stage.Equal(wholeRollout) {
			k.stage = time.Time{}
		}
		c, ok := byScope[k]
		if !ok {
			id, err := domain.ParseUUID("rollout_id", k.rollout)
			if err != nil {
				return nil, err
			}
			c = &ports.RolloutCount{Rollout: id, Stage: k.stage}
			byScope[k], order = c, append(order, k)
		}
		c.Stats.Add(st, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting rollouts' devices: %w", unavailable(err))
	}
	out := make([]ports.RolloutCount, 0, len(order))
	for _, k := range order {
		out = append(out, *byScope[k])
	}
	return out, nil
}

var _ ports.CounterAudit = (*TaskRepository)(nil)

// RecordAudit writes an operator's record of the change in this transaction.
func (t *taskTx) RecordAudit(rec domain.AuditRecord) error { return writeAudit(t.ctx, t.tx, rec) }

// Announce writes an event of the change this transaction makes to the
// outbox, with the prepared announceSQL: one round trip where an
// unprepared statement costs two (Parse, then Bind).
func (t *taskTx) Announce(a domain.Announcement) error {
	_, err := t.stmt(t.s.announce).ExecContext(t.ctx, announceArgs(a)...)
	return announced(a, err)
}
