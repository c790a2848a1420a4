package memory

import (
	"cmp"
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

func NewTasks(s *Store) *Tasks { return &Tasks{s: s} }

// errEventRecorded refuses to store an event the task has already: it
// would be applied twice.
var errEventRecorded = errors.New("memory: the event is already recorded for this task")

// active is the device's one active task.
func (s *Store) active(deviceID string) (domain.Task, error) {
	for _, t := range s.tasks {
		if t.DeviceID().String() == deviceID && t.Status().IsActive() {
			return t, nil
		}
	}
	return domain.Task{}, domain.ErrNotFound
}

func (r *Tasks) Get(ctx context.Context, id domain.UUID) (domain.Task, error) {
	return get(ctx, r.s, r.s.tasks, id)
}

func (r *Tasks) Active(ctx context.Context, deviceID domain.DeviceID) (domain.Task, error) {
	return locked(ctx, r.s, func() (domain.Task, error) { return r.s.active(deviceID.String()) })
}

func (r *Tasks) CheckView(ctx context.Context, h domain.TokenHash) (ports.CheckView, error) {
	return locked(ctx, r.s, func() (ports.CheckView, error) {
		d, err := r.s.byToken(h)
		if err != nil {
			return ports.CheckView{}, err
		}
		return r.s.checkView(d.ID().String())
	})
}

func (r *Tasks) CheckViewOf(ctx context.Context, deviceID domain.DeviceID) (ports.CheckView, error) {
	return locked(ctx, r.s, func() (ports.CheckView, error) { return r.s.checkView(deviceID.String()) })
}

func (s *Store) checkView(deviceID string) (ports.CheckView, error) {
	d, err := found(s.devices, deviceID)
	if err != nil {
		return ports.CheckView{}, err
	}
	v := ports.CheckView{Device: d, Tasks: ports.DeviceTasks{Failed: s.failed(deviceID), Facts: s.facts(deviceID)}}
	if t, err := s.active(deviceID); err == nil {
		v.Tasks.Active = &t
	}
	return v, nil
}

// failed counts the device's failed tasks by firmware id.
func (s *Store) failed(deviceID string) map[string]int {
	out := map[string]int{}
	for _, t := range s.tasks {
		if t.DeviceID().String() == deviceID && t.Status() == domain.TaskFailed {
			out[t.FirmwareID().String()]++
		}
	}
	return out
}

// InTaskTx runs fn in a transaction of the store (Store.tx); it fails
// too when ctx ended while fn ran.
func (r *Tasks) InTaskTx(ctx context.Context, fn func(tx ports.TaskTx) error) error {
	return r.s.tx(ctx, func() error { return cmp.Or(fn(&taskTx{s: r.s}), ctx.Err()) })
}

// taskTx is ports.TaskTx over a Store whose lock it holds.
type taskTx struct{ s *Store }

var _ ports.TaskTx = (*taskTx)(nil)

// withOffer pairs a task with its firmware and rollout.
func (tx *taskTx) withOffer(t domain.Task) *domain.ActiveTask {
	return &domain.ActiveTask{Task: t, Firmware: tx.s.firmwares[t.FirmwareID().String()], Rollout: tx.s.rollouts[t.RolloutID().String()]}
}

func (tx *taskTx) ActiveTask(deviceID domain.DeviceID) (*domain.ActiveTask, error) {
	if t, err := tx.s.active(deviceID.String()); err == nil {
		return tx.withOffer(t), nil
	}
	return nil, nil
}

// LatestFinal is the device's task with an outcome (succeeded or failed)
// created last — action ids count up — passing over cancelled ones, which
// say nothing about the device; none while the device has an active task
// (one inserted since the caller's ActiveTask).
func (tx *taskTx) LatestFinal(deviceID domain.DeviceID) (*domain.ActiveTask, error) {
	var last *domain.Task
	for _, t := range tx.s.tasks {
		if t.DeviceID().String() != deviceID.String() {
			continue
		}
		if t.Status().IsActive() {
			return nil, nil
		}
		if (t.Status() == domain.TaskSucceeded || t.Status() == domain.TaskFailed) && (last == nil || t.ActionID() > last.ActionID()) {
			last = &t
		}
	}
	if last == nil {
		return nil, nil
	}
	return tx.withOffer(*last), nil
}

func (tx *taskTx) FailedCounts(deviceID domain.DeviceID) (map[string]int, error) {
	return tx.s.failed(deviceID.String()), nil
}

func (tx *taskTx) DeviceVersion(deviceID domain.DeviceID) (domain.Version, error) {
	d, err := found(tx.s.devices, deviceID.String())
	return d.CurrentVersion(), err
}

func (tx *taskTx) LockTask(id domain.UUID) (domain.Task, error) {
	return found(tx.s.tasks, id.String())
}

// Event returns the recorded event: its id and fingerprint only.
func (tx *taskTx) Event(t domain.Task, eventID string) (*domain.Event, error) {
	for _, l := range tx.s.events[t.ID().String()] {
		if l.id == eventID {
			ev := domain.RehydrateEvent(eventID, l.fingerprint)
			return &ev, nil
		}
	}
	return nil, nil
}

func (tx *taskTx) LockRollout(id domain.UUID) (domain.Rollout, error) {
	return found(tx.s.rollouts, id.String())
}

func (tx *taskTx) Offer(firmwareID, rolloutID domain.UUID) (domain.Offer, error) {
	fw, okF := tx.s.firmwares[firmwareID.String()]
	ro, okR := tx.s.rollouts[rolloutID.String()]
	if !okF || !okR {
		return domain.Offer{}, domain.ErrNotFound
	}
	return domain.Offer{Firmware: fw, Rollout: ro}, nil
}

// OfferForShare is Offer: no revoke can be under way while tx holds the store.
func (tx *taskTx) OfferForShare(firmwareID, rolloutID domain.UUID) (domain.Offer, error) {
	return tx.Offer(firmwareID, rolloutID)
}

func (tx *taskTx) UpdateTask(t domain.Task) (domain.Task, error) {
	if _, err := found(tx.s.tasks, t.ID().String()); err != nil {
		return domain.Task{}, err
	}
	tx.s.tasks[t.ID().String()] = t
	return t, nil
}

func (tx *taskTx) StoreEvent(t domain.Task, ev domain.Event) error {
	if prior, _ := tx.Event(t, ev.ID()); prior != nil {
		return errEventRecorded
	}
	id := t.ID().String()
	tx.s.events[id] = append(slices.Clip(tx.s.events[id]), loggedEvent{id: ev.ID(), fingerprint: ev.Fingerprint(), at: t.UpdatedAt()})
	return nil
}

// InsertUnlessActive gives the device's active task, if it has one, the
// precedence over the references: the device and firmware stored, the
// rollout a stored one of that firmware (domain.ErrNotFound otherwise).
func (tx *taskTx) InsertUnlessActive(t domain.Task) (domain.Task, bool, error) {
	s, rec := tx.s, t.Record()
	if a, err := s.active(rec.DeviceID); err == nil && rec.Status.IsActive() {
		return a, false, nil
	}
	if ro, okR := s.rollouts[rec.RolloutID]; !has(s.devices, rec.DeviceID) || !has(s.firmwares, rec.FirmwareID) || !okR || ro.FirmwareID().String() != rec.FirmwareID {
		return domain.Task{}, false, domain.ErrNotFound
	}
	if has(s.tasks, rec.ID) {
		return domain.Task{}, false, errDuplicateID("task", rec.ID)
	}
	s.lastAction++
	rec.ActionID = s.lastAction
	s.tasks[rec.ID] = domain.RehydrateTask(rec)
	return s.tasks[rec.ID], true, nil
}

func (tx *taskTx) SetDeviceVersion(deviceID domain.DeviceID, v domain.Version, at time.Time) error {
	d, err := found(tx.s.devices, deviceID.String())
	if err != nil {
		return err
	}
	if d.LastSeenAt().After(at) {
		at = d.LastSeenAt()
	}
	d.Seen(v, at)
	tx.s.devices[deviceID.String()] = d
	return nil
}

func (tx *taskTx) StoreRollout(r domain.Rollout) (domain.Rollout, error) {
	if _, err := found(tx.s.rollouts, r.ID().String()); err != nil {
		return domain.Rollout{}, err
	}
	tx.s.rollouts[r.ID().String()] = r
	return r, nil
}

func (tx *taskTx) RolloutStats(rolloutID domain.UUID, since time.Time) (domain.TaskStats, error) {
	return tx.s.counts[countKey(rolloutID, since)], nil
}

func (r *Tasks) RolloutStatsSince(ctx context.Context, rolloutID domain.UUID, since time.Time) (domain.TaskStats, error) {
	return locked(ctx, r.s, func() (domain.TaskStats, error) { return r.s.counts[countKey(rolloutID, since)], nil })
}

func (tx *taskTx) CountedTasks(rolloutID domain.UUID, deviceID domain.DeviceID, stage time.Time) (inRollout, inStage *domain.Task, err error) {
	for _, t := range tx.s.tasks {
		if t.RolloutID() != rolloutID || t.DeviceID() != deviceID {
			continue
		}
		if inRollout == nil || domain.CountsOver(t, *inRollout) {
			inRollout = &t
		}
		if !stage.IsZero() && t.Stage().Equal(stage) && (inStage == nil || domain.CountsOver(t, *inStage)) {
			inStage = &t
		}
	}
	return inRollout, inStage, nil
}

func (tx *taskTx) AddCounts(_ domain.DeviceID, changes []domain.CountChange) error {
	for _, c := range changes {
		k := countKey(c.Rollout, c.Stage)
		tx.s.counts[k] = tx.s.counts[k].Plus(c.Delta)
	}
	return nil
}

// countKey names a scope's counters: a rollout's, or its stage's.
func countKey(rollout domain.UUID, stage time.Time) string {
	return rollout.String() + " " + us(stage).Format(time.RFC3339Nano)
}

func (r *Tasks) List(ctx context.Context, f ports.TaskFilter) ([]domain.Task, error) {
	if f.After != nil {
		f.After = &ports.TaskCursor{CreatedAt: us(f.After.CreatedAt), ID: f.After.ID}
	}
	return locked(ctx, r.s, func() ([]domain.Task, error) {
		return page(where(r.s.tasks, f.Admits), f.Limit, ports.DefaultListLimit, func(a, b domain.Task) bool {
			return ports.TaskCursor{CreatedAt: a.CreatedAt(), ID: a.ID()}.Precedes(b)
		}), nil
	})
}

func (r *Tasks) Events(ctx context.Context, taskID domain.UUID, limit int) ([]ports.TaskEvent, error) {
	logged, err := locked(ctx, r.s, func() ([]loggedEvent, error) { return slices.Clone(r.s.events[taskID.String()]), nil })
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(logged, func(a, b loggedEvent) int { return cmp.Or(a.at.Compare(b.at), strings.Compare(a.id, b.id)) })
	out := []ports.TaskEvent{}
	for _, l := range logged[:min(len(logged), max(limit, 0))] {
		ev, err := domain.RehydrateStoredEvent(l.id, l.fingerprint)
		if err != nil {
			return nil, err
		}
		out = append(out, ports.TaskEvent{Event: ev, At: l.at})
	}
	return out, nil
}

func (tx *taskTx) RecordAudit(rec domain.AuditRecord) error {
	tx.s.record(rec)
	return nil
}

func (tx *taskTx) Announce(a domain.Announcement) error {
	tx.s.announce(a)
	return nil
}
