package application

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Task listing bounds, as adapters/rest/openapi.yaml documents them.
const (
	defaultTaskLimit = 50
	maxTaskLimit     = 500
)

// TaskHistory is what the operators' task listing reads.
type TaskHistory interface {
	// Get loads a task by id (domain.ErrNotFound).
	Get(ctx context.Context, id domain.UUID) (domain.Task, error)
	// List returns tasks matching f in (created_at, id) order, at most f.Limit.
	List(ctx context.Context, f ports.TaskFilter) ([]domain.Task, error)
	// Events returns the events stored with the task (those that changed
	// it), oldest first — in (At, event id) order — at most limit. An
	// unknown task has none.
	Events(ctx context.Context, taskID domain.UUID, limit int) ([]ports.TaskEvent, error)
}

// TaskAdmin lists tasks for operators.
type TaskAdmin struct {
	tasks     TaskHistory
	firmwares ports.FirmwareRepository
}

// NewTaskAdmin builds the operators' task listing.
func NewTaskAdmin(tasks TaskHistory, firmwares ports.FirmwareRepository) (*TaskAdmin, error) {
	if err := required(tasks, firmwares); err != nil {
		return nil, err
	}
	return &TaskAdmin{tasks: tasks, firmwares: firmwares}, nil
}

// ListTasks pages through tasks in (created_at, id) order with an opaque
// cursor, so pages neither skip nor repeat while tasks are being created.
func (s *TaskAdmin) ListTasks(ctx context.Context, q ports.TaskQuery) (ports.TaskPage, error) {
	f, err := parseTaskQuery(q)
	if err != nil {
		return ports.TaskPage{}, err
	}
	tasks, next, err := listPage(&f.Limit, func() ([]domain.Task, error) { return s.tasks.List(ctx, f) },
		func(last domain.Task) string {
			return encodeCursor(ports.TaskCursor{CreatedAt: last.CreatedAt(), ID: last.ID()})
		})
	if err != nil {
		return ports.TaskPage{}, fmt.Errorf("listing tasks: %w", err)
	}
	page := ports.TaskPage{Next: next}
	known := map[domain.UUID]domain.Firmware{}
	page.Items = make([]ports.TaskView, 0, len(tasks))
	for _, t := range tasks {
		v, err := taskView(ctx, s.firmwares, known, t)
		if err != nil {
			return ports.TaskPage{}, err
		}
		page.Items = append(page.Items, v)
	}
	return page, nil
}

// MaxTaskEvents bounds a task's history as operators read it: a task
// changes a handful of times (each status, some progress), so a longer
// history is a device flooding progress, and its oldest events say how
// the task began.
const MaxTaskEvents = 1000

// TaskEvents returns the task's status history: the events stored with
// it, oldest first, at most MaxTaskEvents. Changes the service made
// itself (a cancel, a time-out, a success at check time) are not events;
// the task shows the last of them.
func (s *TaskAdmin) TaskEvents(ctx context.Context, taskID domain.UUID) ([]ports.TaskEvent, error) {
	if taskID.IsZero() {
		return nil, fmt.Errorf("task: %w", domain.ErrNotFound)
	}
	if _, err := s.tasks.Get(ctx, taskID); err != nil {
		return nil, fmt.Errorf("loading task: %w", err)
	}
	evs, err := s.tasks.Events(ctx, taskID, MaxTaskEvents)
	if err != nil {
		return nil, fmt.Errorf("loading task events: %w", err)
	}
	return evs, nil
}

func parseTaskQuery(q ports.TaskQuery) (ports.TaskFilter, error) {
	f := ports.TaskFilter{Limit: defaultTaskLimit}
	if q.DeviceID != "" {
		id, err := domain.ParseDeviceID(q.DeviceID)
		if err != nil {
			return f, err
		}
		f.DeviceID = id
	}
	if q.RolloutID != "" {
		id, err := domain.ParseUUID("rollout_id", q.RolloutID)
		if err != nil {
			return f, err
		}
		f.RolloutID = id
	}
	if q.Status != "" {
		st, err := domain.ParseTaskStatus(q.Status)
		if err != nil {
			return f, err
		}
		f.Status = &st
	}
	var err error
	f.Limit, f.After, err = parsePage(q.Limit, q.After, defaultTaskLimit, maxTaskLimit, decodeCursor)
	return f, err
}

// encodeCursor makes an opaque, URL-safe position (timeCursor): the
// task's creation and id.
func encodeCursor(c ports.TaskCursor) string { return encodeTimeCursor(c.CreatedAt, c.ID.String()) }

func decodeCursor(s string) (ports.TaskCursor, error) {
	at, id, err := decodeTimeCursor(s)
	if err != nil {
		return ports.TaskCursor{}, err
	}
	// The cursor is an untyped source: its id is parsed here, once.
	u, err := domain.ParseUUID("after", id)
	if err != nil {
		return ports.TaskCursor{}, errBadCursor
	}
	return ports.TaskCursor{CreatedAt: at, ID: u}, nil
}

// A timeCursor is a listing's position in a (time, key) order, opaque and
// URL-safe: microseconds since the epoch (the stores' precision) and the
// key, base64'd. Every time-ordered listing pages with one.
func encodeTimeCursor(at time.Time, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMicro(), 10) + "|" + key))
}

// The range of cursor times: years 1 to 9999, well inside both Go's and
// Postgres' timestamps (every row was written inside it).
var (
	minCursorMicros = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	maxCursorMicros = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC).UnixMicro()
)

var errBadCursor = &domain.ValidationError{Field: "after", Reason: "is not a cursor this service issued"}

func decodeTimeCursor(s string) (time.Time, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return time.Time{}, "", errBadCursor
	}
	micros, key, ok := strings.Cut(string(raw), "|")
	if !ok {
		return time.Time{}, "", errBadCursor
	}
	us, err := strconv.ParseInt(micros, 10, 64)
	// A forged number far outside the timestamps the store can hold would
	// reach the database as an out-of-range value: refuse it here.
	if err != nil || us < minCursorMicros || us > maxCursorMicros {
		return time.Time{}, "", errBadCursor
	}
	return time.UnixMicro(us).UTC(), key, nil
}
