package memory

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Tasks is the in-memory task store over a Store: every task port the use
// cases declare (application.TaskStore).
type Tasks struct{ s *Store }

// NewTasks returns the task repository of s; repositories built over the
// same Store share data like tables of one database.
func NewTasks(s *Store) *Tasks { return &Tasks{s: s} }

// errEventRecorded mirrors the unique key on (task, event id): fn reported a
// change for an event that is already recorded, which would apply it twice.
var errEventRecorded = errors.New("memory: the event is already recorded for this task")

// mergeTask writes onto the stored task what the Postgres UPDATE writes —
// status, progress, attempt, error and their time; identity, references,
// action id and creation time keep their stored values.
func mergeTask(stored, changed domain.Task) domain.Task {
	rec, c := stored.Record(), changed.Record()
	rec.Status, rec.Progress, rec.Attempt, rec.ErrorCode, rec.ErrorMessage = c.Status, c.Progress, c.Attempt, c.ErrorCode, c.ErrorMessage
	rec.UpdatedAt = stamp(c.UpdatedAt)
	return domain.RehydrateTask(rec)
}

// Get loads a task by id; the zero id is domain.ErrNotFound.
func (r *Tasks) Get(ctx context.Context, id domain.UUID) (domain.Task, error) {
	return read(ctx, &r.s.mu, func() (domain.Task, error) { return found(r.s.tasks, id.String()) })
}

// Active returns the device's active task, or domain.ErrNotFound.
func (r *Tasks) Active(ctx context.Context, deviceID domain.DeviceID) (domain.Task, error) {
	return read(ctx, &r.s.mu, func() (domain.Task, error) {
		id, err := found(r.s.active, deviceID.String())
		return r.s.tasks[id], err
	})
}

// CheckView reads the device whose token has hash h with its active task,
// failed counts and facts, as one consistent snapshot.
func (r *Tasks) CheckView(ctx context.Context, h domain.TokenHash) (ports.CheckView, error) {
	return read(ctx, &r.s.mu, func() (ports.CheckView, error) { return r.s.checkViewLocked(r.s.byToken[h]) })
}

// CheckViewOf is CheckView for a device known by id.
func (r *Tasks) CheckViewOf(ctx context.Context, deviceID domain.DeviceID) (ports.CheckView, error) {
	return read(ctx, &r.s.mu, func() (ports.CheckView, error) { return r.s.checkViewLocked(deviceID.String()) })
}

func (s *Store) checkViewLocked(deviceID string) (ports.CheckView, error) {
	d, ok := s.devices[deviceID]
	if !ok {
		return ports.CheckView{}, domain.ErrNotFound
	}
	v := ports.CheckView{Device: d, Tasks: ports.DeviceTasks{Failed: s.failedLocked(deviceID), Facts: s.factsLocked(deviceID)}}
	if id, ok := s.active[deviceID]; ok {
		t := s.tasks[id]
		v.Tasks.Active = &t
	}
	return v, nil
}

// failedLocked counts the device's failed tasks by firmware id. s.mu is held.
func (s *Store) failedLocked(deviceID string) map[string]int {
	out := map[string]int{}
	for _, id := range s.byDevice[deviceID] {
		if t := s.tasks[id]; t.Status() == domain.TaskFailed {
			out[t.FirmwareID().String()]++
		}
	}
	return out
}

// putTaskLocked overwrites a stored task with t (already merged) and keeps
// the active index in step, refusing a second active task. s.mu is held.
func (s *Store) putTaskLocked(t domain.Task) error {
	dev, id := t.DeviceID().String(), t.ID().String()
	holder, taken := s.active[dev]
	switch {
	case t.Status().IsActive() && taken && holder != id:
		return errActiveTaskTaken
	case t.Status().IsActive():
		s.active[dev] = id
	case taken && holder == id:
		delete(s.active, dev)
	}
	s.tasks[id] = t
	return nil
}

// Update loads the task under the store's writer lock, lets fn change a
// copy, and stores it only if fn returns nil. Only status, progress, error
// and their time are written.
func (r *Tasks) Update(ctx context.Context, id domain.UUID, fn func(*domain.Task) error) (domain.Task, error) {
	return update(ctx, r.s.writes, &r.s.mu, func() (domain.Task, error) { return found(r.s.tasks, id.String()) }, fn, func(old, changed domain.Task) (domain.Task, error) {
		merged := mergeTask(old, changed)
		return merged, r.s.putTaskLocked(merged)
	})
}

// InTaskTx runs fn holding the store's writer lock and its mutex for the
// whole function: no other write, nor read, sees the transaction half
// done, so it needs no row locks and no lock order. What fn wrote is
// undone when fn fails or ctx ends first.
func (r *Tasks) InTaskTx(ctx context.Context, fn func(tx ports.TaskTx) error) error {
	s := r.s
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := &taskTx{s: s}
	if err = fn(tx); err == nil {
		err = ctx.Err()
	}
	if err != nil {
		for i := len(tx.undo) - 1; i >= 0; i-- {
			tx.undo[i]()
		}
	}
	return err
}

// taskTx is ports.TaskTx over a Store whose mutex it holds. Every write
// first keeps what it overwrites, to be put back on a rollback.
type taskTx struct {
	s    *Store
	undo []func()
}

var _ ports.TaskTx = (*taskTx)(nil)

// keep saves m[k] as it is now (or its absence) for the rollback.
func keep[K comparable, V any](tx *taskTx, m map[K]V, k K) {
	v, had := m[k]
	tx.undo = append(tx.undo, func() {
		if had {
			m[k] = v
		} else {
			delete(m, k)
		}
	})
}

// withOffer pairs a task with its firmware and rollout.
func (tx *taskTx) withOffer(t domain.Task) *domain.ActiveTask {
	return &domain.ActiveTask{Task: t, Firmware: tx.s.firmwares[t.FirmwareID().String()], Rollout: cloneRollout(tx.s.rollouts[t.RolloutID().String()])}
}

func (tx *taskTx) ActiveTask(deviceID domain.DeviceID) (*domain.ActiveTask, error) {
	id, ok := tx.s.active[deviceID.String()]
	if !ok {
		return nil, nil
	}
	return tx.withOffer(tx.s.tasks[id]), nil
}

func (tx *taskTx) LatestFinal(deviceID domain.DeviceID) (*domain.ActiveTask, error) {
	ids := tx.s.byDevice[deviceID.String()]
	if len(ids) == 0 {
		return nil, nil
	}
	t := tx.s.tasks[ids[len(ids)-1]] // tasks are appended as created
	if t.Status().IsActive() {
		return nil, nil
	}
	return tx.withOffer(t), nil
}

func (tx *taskTx) FailedCounts(deviceID domain.DeviceID) (map[string]int, error) {
	return tx.s.failedLocked(deviceID.String()), nil
}

func (tx *taskTx) LockTask(id domain.UUID) (domain.Task, error) {
	t, ok := tx.s.tasks[id.String()]
	if !ok {
		return domain.Task{}, domain.ErrNotFound
	}
	return t, nil
}

// Event returns the recorded event, which keeps only its id and
// fingerprint, as the Postgres table does. Event ids are scoped to a task.
func (tx *taskTx) Event(t domain.Task, eventID string) (*domain.Event, error) {
	for _, l := range tx.s.eventLog[t.ID().String()] {
		if l.id == eventID {
			ev := domain.RehydrateEvent(eventID, l.fingerprint)
			return &ev, nil
		}
	}
	return nil, nil
}

func (tx *taskTx) LockRollout(id domain.UUID) (domain.Rollout, error) {
	ro, ok := tx.s.rollouts[id.String()]
	if !ok {
		return domain.Rollout{}, domain.ErrNotFound
	}
	return cloneRollout(ro), nil
}

func (tx *taskTx) Offer(firmwareID, rolloutID domain.UUID) (domain.Offer, error) {
	fw, okF := tx.s.firmwares[firmwareID.String()]
	ro, okR := tx.s.rollouts[rolloutID.String()]
	if !okF || !okR {
		return domain.Offer{}, domain.ErrNotFound
	}
	return domain.Offer{Firmware: fw, Rollout: cloneRollout(ro)}, nil
}

// OfferForShare is Offer: no revoke can be under way while tx holds the store.
func (tx *taskTx) OfferForShare(firmwareID, rolloutID domain.UUID) (domain.Offer, error) {
	return tx.Offer(firmwareID, rolloutID)
}

func (tx *taskTx) UpdateTask(t domain.Task) (domain.Task, error) {
	stored, ok := tx.s.tasks[t.ID().String()]
	if !ok {
		return domain.Task{}, domain.ErrNotFound
	}
	merged := mergeTask(stored, t)
	keep(tx, tx.s.tasks, t.ID().String())
	keep(tx, tx.s.active, t.DeviceID().String())
	return merged, tx.s.putTaskLocked(merged)
}

func (tx *taskTx) StoreEvent(t domain.Task, ev domain.Event) error {
	if prior, _ := tx.Event(t, ev.ID()); prior != nil {
		return errEventRecorded
	}
	id := t.ID().String()
	keep(tx, tx.s.eventLog, id)
	tx.s.eventLog[id] = append(tx.s.eventLog[id], loggedEvent{id: ev.ID(), fingerprint: ev.Fingerprint(), at: stamp(t.UpdatedAt())})
	return nil
}

// InsertUnlessActive plays the Postgres insert: the one-active-task index
// first (the active task wins), then the keys — the device and firmware
// stored, the rollout a stored one of that firmware (domain.ErrNotFound
// otherwise), the id new.
func (tx *taskTx) InsertUnlessActive(t domain.Task) (domain.Task, bool, error) {
	s, rec := tx.s, t.Record()
	if holder, taken := s.active[rec.DeviceID]; taken && rec.Status.IsActive() {
		return s.tasks[holder], false, nil
	}
	_, okD := s.devices[rec.DeviceID]
	_, okF := s.firmwares[rec.FirmwareID]
	if ro, okR := s.rollouts[rec.RolloutID]; !okD || !okF || !okR || ro.FirmwareID().String() != rec.FirmwareID {
		return domain.Task{}, false, domain.ErrNotFound
	}
	if _, taken := s.tasks[rec.ID]; taken {
		return domain.Task{}, false, errDuplicateID("task", rec.ID)
	}
	s.lastActionID++
	rec.ActionID = s.lastActionID
	rec.CreatedAt, rec.UpdatedAt = stamp(rec.CreatedAt), stamp(rec.UpdatedAt)
	keep(tx, s.tasks, rec.ID)
	keep(tx, s.active, rec.DeviceID)
	keep(tx, s.byDevice, rec.DeviceID)
	keep(tx, s.byRollout, rec.RolloutID)
	if rec.Status.IsActive() {
		s.active[rec.DeviceID] = rec.ID
	}
	s.tasks[rec.ID] = domain.RehydrateTask(rec)
	s.byDevice[rec.DeviceID] = append(s.byDevice[rec.DeviceID], rec.ID)
	s.byRollout[rec.RolloutID] = append(s.byRollout[rec.RolloutID], rec.ID)
	return s.tasks[rec.ID], true, nil
}

func (tx *taskTx) SetDeviceVersion(deviceID domain.DeviceID, v domain.Version, at time.Time) error {
	d, ok := tx.s.devices[deviceID.String()]
	if !ok {
		return domain.ErrNotFound
	}
	if at = stamp(at); d.LastSeenAt().After(at) {
		at = d.LastSeenAt()
	}
	d.Seen(v, at)
	keep(tx, tx.s.devices, deviceID.String())
	tx.s.devices[deviceID.String()] = storedDevice(d)
	return nil
}

func (tx *taskTx) StoreRollout(r domain.Rollout) (domain.Rollout, error) {
	stored, ok := tx.s.rollouts[r.ID().String()]
	if !ok {
		return domain.Rollout{}, domain.ErrNotFound
	}
	keep(tx, tx.s.rollouts, r.ID().String())
	tx.s.rollouts[r.ID().String()] = mergeRollout(stored, r)
	return cloneRollout(tx.s.rollouts[r.ID().String()]), nil
}

func (tx *taskTx) RolloutStats(rolloutID domain.UUID, since time.Time) (domain.TaskStats, error) {
	return tx.s.rolloutStatsLocked(rolloutID.String(), since), nil
}

// RolloutStats counts a rollout's devices, each once, by the status of the
// task domain.CountsOver picks for it; an unknown rollout has all counts
// zero: it is a count, not a lookup.
func (r *Tasks) RolloutStats(ctx context.Context, rolloutID domain.UUID) (domain.TaskStats, error) {
	return r.RolloutStatsSince(ctx, rolloutID, time.Time{})
}

// RolloutStatsSince is RolloutStats for the tasks created at or after since.
func (r *Tasks) RolloutStatsSince(ctx context.Context, rolloutID domain.UUID, since time.Time) (domain.TaskStats, error) {
	return read(ctx, &r.s.mu, func() (domain.TaskStats, error) { return r.s.rolloutStatsLocked(rolloutID.String(), since), nil })
}

// rolloutStatsLocked counts a rollout's devices, each once, by the status
// of the one of its tasks created at or after since (zero: all) that
// domain.CountsOver picks, as the Postgres statement does. The caller
// holds s.mu.
func (s *Store) rolloutStatsLocked(rolloutID string, since time.Time) domain.TaskStats {
	since = stamp(since) // as Postgres compares: at the stored precision
	latest := map[string]domain.Task{}
	for _, id := range s.byRollout[rolloutID] {
		t := s.tasks[id]
		if t.CreatedAt().Before(since) {
			continue
		}
		dev := t.DeviceID().String()
		if l, ok := latest[dev]; !ok || domain.CountsOver(t, l) {
			latest[dev] = t
		}
	}
	var st domain.TaskStats
	for _, t := range latest {
		st.Add(t.Status(), 1)
	}
	return st
}

// DefaultListLimit is the page size List uses when the filter sets none,
// the same as the Postgres adapter's.
const DefaultListLimit = 50

// List returns the tasks matching f in (created_at, id) order, starting
// after f.After, at most f.Limit of them (DefaultListLimit when not
// positive). Zero filter fields match all.
func (r *Tasks) List(ctx context.Context, f ports.TaskFilter) ([]domain.Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var after *ports.TaskCursor
	if f.After != nil {
		after = &ports.TaskCursor{CreatedAt: stamp(f.After.CreatedAt), ID: f.After.ID}
	}
	rolloutID, deviceID := f.RolloutID.String(), f.DeviceID.String()
	s := r.s
	s.mu.Lock()
	var ids []string
	switch {
	case deviceID != "":
		ids = s.byDevice[deviceID]
	case rolloutID != "":
		ids = s.byRollout[rolloutID]
	default:
		ids = make([]string, 0, len(s.tasks))
		for id := range s.tasks {
			ids = append(ids, id)
		}
	}
	out := []domain.Task{}
	for _, id := range ids {
		t := s.tasks[id]
		switch {
		case deviceID != "" && t.DeviceID().String() != deviceID,
			rolloutID != "" && t.RolloutID().String() != rolloutID,
			f.Status != nil && t.Status() != *f.Status,
			after != nil && !taskAfter(t, *after):
			continue
		}
		out = append(out, t)
	}
	s.mu.Unlock()
	return page(out, f.Limit, DefaultListLimit, func(a, b domain.Task) bool {
		return newer(b.CreatedAt(), a.CreatedAt(), b.ID().String(), a.ID().String()) // oldest first
	}), nil
}

// taskAfter reports whether t comes after c in (created_at, id) order.
// Canonical UUID strings sort as Postgres sorts uuid values.
func taskAfter(t domain.Task, c ports.TaskCursor) bool {
	if cmp := t.CreatedAt().Compare(c.CreatedAt); cmp != 0 {
		return cmp > 0
	}
	return t.ID().String() > c.ID.String()
}

// Events returns the task's stored events in (time, event id) order, at
// most limit.
func (r *Tasks) Events(ctx context.Context, taskID domain.UUID, limit int) ([]ports.TaskEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return []ports.TaskEvent{}, nil
	}
	s := r.s
	s.mu.Lock()
	logged := slices.Clone(s.eventLog[taskID.String()])
	s.mu.Unlock()
	slices.SortStableFunc(logged, func(a, b loggedEvent) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	out := []ports.TaskEvent{}
	for _, l := range logged {
		if len(out) == limit {
			break
		}
		ev, err := domain.RehydrateStoredEvent(l.id, l.fingerprint)
		if err != nil {
			return nil, err
		}
		out = append(out, ports.TaskEvent{Event: ev, At: l.at})
	}
	return out, nil
}
