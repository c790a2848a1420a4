package memory

import (
	"context"
	"errors"
	"slices"
	"sort"
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

// errForeignDevice refuses a task inserted through another device's
// ReplaceActive: it would dodge that device's one-active-task check.
var errForeignDevice = errors.New("memory: the new task belongs to another device")

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
	if err := ctx.Err(); err != nil {
		return domain.Task{}, err
	}
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id.String()]
	if !ok {
		return domain.Task{}, domain.ErrNotFound
	}
	return t, nil
}

// Active returns the device's active task, or domain.ErrNotFound.
func (r *Tasks) Active(ctx context.Context, deviceID domain.DeviceID) (domain.Task, error) {
	if err := ctx.Err(); err != nil {
		return domain.Task{}, err
	}
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.active[deviceID.String()]
	if !ok {
		return domain.Task{}, domain.ErrNotFound
	}
	return s.tasks[id], nil
}

// CheckView reads the device whose token has hash h with its active task
// and failed counts, as one consistent snapshot.
func (r *Tasks) CheckView(ctx context.Context, h domain.TokenHash) (ports.CheckView, error) {
	if err := ctx.Err(); err != nil {
		return ports.CheckView{}, err
	}
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.byToken[h]
	if !ok {
		return ports.CheckView{}, domain.ErrNotFound
	}
	v, err := s.checkViewLocked(id)
	if err != nil {
		return v, err
	}
	v.Tasks.Facts = s.factsLocked(id)
	return v, nil
}

// CheckViewOf is CheckView for a device known by id.
func (r *Tasks) CheckViewOf(ctx context.Context, deviceID domain.DeviceID) (ports.CheckView, error) {
	if err := ctx.Err(); err != nil {
		return ports.CheckView{}, err
	}
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.checkViewLocked(deviceID.String())
	if err != nil {
		return v, err
	}
	v.Tasks.Facts = s.factsLocked(deviceID.String())
	return v, nil
}

func (s *Store) checkViewLocked(deviceID string) (ports.CheckView, error) {
	d, ok := s.devices[deviceID]
	if !ok {
		return ports.CheckView{}, domain.ErrNotFound
	}
	v := ports.CheckView{Device: d, Tasks: ports.DeviceTasks{Failed: s.failedLocked(deviceID)}}
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

// ReplaceActive runs fn with a copy of what the device's tasks are — its
// active task (nil if none) with that task's firmware and rollout, and its
// failed counts — while holding the device's task lock, then stores fn's
// change to the active task and fn's new task together, or nothing when fn
// fails or ctx ends first.
//
// A new task must reference a stored device (deviceID itself), firmware
// and a rollout of that firmware, else domain.ErrNotFound; its firmware
// must still be released and its rollout still active, checked while both
// rows are locked (a revoke or rollout change waits), else
// domain.ErrOfferWithdrawn and nothing is stored. The one-active-task rule
// is checked here whatever fn did: when fn leaves the active task active
// and still asks for an insert, the insert loses and the active task is
// returned with created false, as the Postgres partial unique index makes
// the insert lose. The zero device id is domain.ErrNotFound before fn runs.
func (r *Tasks) ReplaceActive(ctx context.Context, device domain.DeviceID, fn func(st ports.TaskState) (*domain.Task, error), onRollout ports.RolloutEvaluation) (domain.Task, bool, error) {
	if device.IsZero() {
		if err := ctx.Err(); err != nil {
			return domain.Task{}, false, err
		}
		return domain.Task{}, false, domain.ErrNotFound
	}
	deviceID := device.String()
	s := r.s
	unlock, err := s.rows.lock(ctx, taskRows(deviceID))
	if err != nil {
		return domain.Task{}, false, err
	}
	defer unlock()

	s.mu.Lock()
	// The task fn may end (subject, as stored: before): the active one,
	// or, when there is none, the latest if fn reads it (a success it
	// finds reverted).
	var before *domain.Task
	var subject *domain.ActiveTask
	st := ports.TaskState{Failed: s.failedLocked(deviceID)}
	if id, ok := s.active[deviceID]; ok {
		t := s.tasks[id]
		before = &t
		st.Active = &domain.ActiveTask{Task: t, Firmware: s.firmwares[t.FirmwareID().String()], Rollout: cloneRollout(s.rollouts[t.RolloutID().String()])}
		subject = st.Active
	} else {
		st.Latest = func() (*domain.ActiveTask, error) {
			if subject != nil {
				return subject, nil
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			ids := s.byDevice[deviceID]
			if len(ids) == 0 {
				return nil, nil
			}
			t := s.tasks[ids[len(ids)-1]] // tasks are appended as created
			if t.Status().IsActive() {
				return nil, nil // not reached while this holds the device's task lock
			}
			before = &t
			subject = &domain.ActiveTask{Task: t, Firmware: s.firmwares[t.FirmwareID().String()], Rollout: cloneRollout(s.rollouts[t.RolloutID().String()])}
			return subject, nil
		}
	}
	s.mu.Unlock()

	ins, err := fn(st)
	if err != nil {
		return domain.Task{}, false, err
	}
	var after *domain.Task
	if before != nil {
		m := mergeTask(*before, subject.Task)
		after = &m
	}
	// The rollout of the task fn ended, to lock and judge when it has a
	// threshold or stages (fixed, so the unlocked read may say); its
	// status is judged on the locked row (the port says why).
	var judge string
	if onRollout != nil && after != nil && after.Record() != before.Record() && !after.Status().IsActive() && subject.Rollout.Judges() {
		judge = after.RolloutID().String()
	}
	var rec domain.TaskRecord
	if ins != nil {
		if rec, err = checkNewTask(deviceID, *ins); err != nil {
			return domain.Task{}, false, err
		}
	}
	// The judged rollout's row, and FOR SHARE on the new task's offer
	// rows (wait for a revoke or a rollout change in progress, and hold
	// them off until this is stored): rollouts in id order, then the
	// firmware, as the Postgres adapter takes them.
	var lockRollouts []string
	if judge != "" {
		lockRollouts = append(lockRollouts, judge)
	}
	if ins != nil && rec.RolloutID != judge {
		lockRollouts = append(lockRollouts, rec.RolloutID)
	}
	slices.Sort(lockRollouts)
	for _, id := range lockRollouts {
		unlockRO, err := s.rows.lock(ctx, rolloutRow(id))
		if err != nil {
			return domain.Task{}, false, err
		}
		defer unlockRO()
	}
	if ins != nil {
		unlockFW, err := s.rows.lock(ctx, firmwareRow(rec.FirmwareID))
		if err != nil {
			return domain.Task{}, false, err
		}
		defer unlockFW()
	}
	// A success stores the device's version with it (domain.Task.Installs),
	// under the device's row lock (taken last, as Postgres updates the row
	// last).
	installs := after != nil && after.Installs(*before)
	if installs {
		unlockDev, err := s.rows.lock(ctx, deviceRow(deviceID))
		if err != nil {
			return domain.Task{}, false, err
		}
		defer unlockDev()
	}
	var (
		judged        domain.Rollout
		judgedChanged bool
	)
	if judge != "" {
		if judged, judgedChanged, err = s.judgeRollout(judge, *after, onRollout); err != nil {
			return domain.Task{}, false, err
		}
	}
	if err := ctx.Err(); err != nil {
		return domain.Task{}, false, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	storeJudged := func() {
		if judgedChanged {
			s.rollouts[judged.ID().String()] = judged
		}
	}
	storeInstalled := func() {
		if installs {
			s.installedLocked(*after, subject.Firmware)
		}
	}
	if ins == nil {
		if after == nil {
			return domain.Task{}, false, nil
		}
		if err := s.putTaskLocked(*after); err != nil {
			return domain.Task{}, false, err
		}
		storeJudged()
		storeInstalled()
		if st.Active == nil {
			return domain.Task{}, false, nil // the latest task changed: no active one to return
		}
		return *after, false, nil
	}
	// As the Postgres adapter reads the offer FOR SHARE before it inserts:
	// a firmware or rollout that does not exist is not found, one that
	// stopped being offered is withdrawn — by the judgement just made too,
	// which is then dropped with the rest, as a rollback drops it.
	fw, okF := s.firmwares[rec.FirmwareID]
	ro, okR := s.rollouts[rec.RolloutID]
	if judgedChanged && rec.RolloutID == judged.ID().String() {
		ro = judged
	}
	if !okF || !okR || ro.FirmwareID().String() != rec.FirmwareID {
		return domain.Task{}, false, domain.ErrNotFound
	}
	if !(domain.Offer{Firmware: fw, Rollout: ro}).Open() {
		return domain.Task{}, false, domain.ErrOfferWithdrawn
	}
	// Postgres draws the identity before it knows whether the insert
	// stands, and a sequence never rolls back: every attempt uses a number.
	s.lastActionID++
	rec.ActionID = s.lastActionID
	if rec.Status.IsActive() {
		// The partial unique index: the insert loses to the task that is
		// still active once fn's change to it is applied.
		if after != nil && after.Status().IsActive() {
			if err := s.putTaskLocked(*after); err != nil {
				return domain.Task{}, false, err
			}
			return *after, false, nil
		}
		if holder, taken := s.active[deviceID]; taken && (after == nil || holder != after.ID().String()) {
			return s.tasks[holder], false, nil // not reached while writers hold the device's task lock
		}
	}
	if err := s.referencesLocked(rec); err != nil {
		return domain.Task{}, false, err
	}
	if after != nil {
		if err := s.putTaskLocked(*after); err != nil {
			return domain.Task{}, false, err
		}
	}
	storeJudged()
	storeInstalled()
	created := domain.RehydrateTask(rec)
	if err := s.insertTaskLocked(created); err != nil {
		return domain.Task{}, false, err // not reached: checked above under the same mutex
	}
	return created, true, nil
}

// checkNewTask checks what the Postgres adapter checks of a task before
// inserting it, and returns its record in stored form (canonical ids,
// microsecond times; the action id is drawn by the caller).
func checkNewTask(deviceID string, t domain.Task) (domain.TaskRecord, error) {
	rec := t.Record()
	if rec.DeviceID != deviceID {
		return domain.TaskRecord{}, errForeignDevice
	}
	// Its ids are typed (domain.UUID, canonical), so they are stored as
	// they are: a zero reference names no row (referencesLocked).
	rec.CreatedAt, rec.UpdatedAt = stamp(rec.CreatedAt), stamp(rec.UpdatedAt)
	return rec, nil
}

// referencesLocked plays the task table's keys: the device and firmware
// must be stored, the rollout must be a stored rollout of that firmware
// (domain.ErrNotFound otherwise), and the id must be new. s.mu is held.
func (s *Store) referencesLocked(rec domain.TaskRecord) error {
	_, okD := s.devices[rec.DeviceID]
	_, okF := s.firmwares[rec.FirmwareID]
	ro, okR := s.rollouts[rec.RolloutID]
	if !okD || !okF || !okR || ro.FirmwareID().String() != rec.FirmwareID {
		return domain.ErrNotFound
	}
	if _, taken := s.tasks[rec.ID]; taken {
		return errDuplicateID("task", rec.ID)
	}
	return nil
}

// insertTaskLocked adds a checked task and its index entries. s.mu is held.
func (s *Store) insertTaskLocked(t domain.Task) error {
	if t.Status().IsActive() {
		if _, taken := s.active[t.DeviceID().String()]; taken {
			return errActiveTaskTaken
		}
		s.active[t.DeviceID().String()] = t.ID().String()
	}
	s.tasks[t.ID().String()] = t
	s.byDevice[t.DeviceID().String()] = append(s.byDevice[t.DeviceID().String()], t.ID().String())
	s.byRollout[t.RolloutID().String()] = append(s.byRollout[t.RolloutID().String()], t.ID().String())
	return nil
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

// lockTask finds the task, takes its device's task lock and returns the
// task as stored under that lock, with the release function.
func (s *Store) lockTask(ctx context.Context, id domain.UUID) (domain.Task, func(), error) {
	if err := ctx.Err(); err != nil {
		return domain.Task{}, nil, err
	}
	key := id.String()
	s.mu.Lock()
	t, ok := s.tasks[key]
	s.mu.Unlock()
	if !ok {
		return domain.Task{}, nil, domain.ErrNotFound
	}
	unlock, err := s.rows.lock(ctx, taskRows(t.DeviceID().String())) // a task's device never changes
	if err != nil {
		return domain.Task{}, nil, err
	}
	s.mu.Lock()
	t = s.tasks[key]
	s.mu.Unlock()
	return t, unlock, nil
}

// Update loads the task locked, lets fn change a copy, and stores it only if
// fn returns nil. Only status, progress, error and their time are written.
func (r *Tasks) Update(ctx context.Context, id domain.UUID, fn func(*domain.Task) error) (domain.Task, error) {
	s := r.s
	t, unlock, err := s.lockTask(ctx, id)
	if err != nil {
		return domain.Task{}, err
	}
	defer unlock()
	changed := t
	if err := fn(&changed); err != nil {
		return domain.Task{}, err
	}
	if err := ctx.Err(); err != nil {
		return domain.Task{}, err
	}
	merged := mergeTask(t, changed)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.putTaskLocked(merged); err != nil {
		return domain.Task{}, err
	}
	return merged, nil
}

// ApplyEvent loads the task locked, with the event already recorded under
// ev's id for this task (nil if none), and calls fn on a copy. Only when fn
// reports a change are the task and the event stored, together — and,
// when onRollout is given, with the change it makes to the task's rollout,
// which it judges with that rollout locked and its tasks counted as they
// will be once this change is stored. When fn reports no change nothing is
// stored and the task is returned as fn left it (the domain leaves it
// untouched then); when fn or onRollout fails or ctx ends first nothing is
// stored and the error is returned. The recorded event keeps only its id
// and fingerprint, as the Postgres table does.
func (r *Tasks) ApplyEvent(ctx context.Context, taskID domain.UUID, ev domain.Event, fn func(t *domain.Task, prior *domain.Event) (bool, error), onRollout ports.RolloutEvaluation) (domain.Task, error) {
	s := r.s
	t, unlock, err := s.lockTask(ctx, taskID)
	if err != nil {
		return domain.Task{}, err
	}
	defer unlock()
	key := eventKey{taskID: t.ID().String(), eventID: ev.ID()}
	s.mu.Lock()
	fp, seen := s.events[key]
	s.mu.Unlock()
	var prior *domain.Event
	if seen {
		p := domain.RehydrateEvent(ev.ID(), fp)
		prior = &p
	}
	changed := t
	ok, err := fn(&changed, prior)
	if err != nil {
		return domain.Task{}, err
	}
	if !ok {
		return changed, nil // as fn left it, as the Postgres adapter answers
	}
	if seen {
		return domain.Task{}, errEventRecorded
	}
	merged := mergeTask(t, changed)
	var (
		rollout        domain.Rollout
		rolloutChanged bool
	)
	if onRollout != nil {
		unlockRO, err := s.rows.lock(ctx, rolloutRow(t.RolloutID().String()))
		if err != nil {
			return domain.Task{}, err
		}
		defer unlockRO()
		if rollout, rolloutChanged, err = s.judgeRollout(t.RolloutID().String(), merged, onRollout); err != nil {
			return domain.Task{}, err
		}
	}
	installs := merged.Installs(t)
	if installs {
		unlockDev, err := s.rows.lock(ctx, deviceRow(t.DeviceID().String()))
		if err != nil {
			return domain.Task{}, err
		}
		defer unlockDev()
	}
	if err := ctx.Err(); err != nil {
		return domain.Task{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.putTaskLocked(merged); err != nil {
		return domain.Task{}, err
	}
	if installs {
		s.installedLocked(merged, s.firmwares[merged.FirmwareID().String()])
	}
	s.events[key] = ev.Fingerprint()
	s.eventLog[taskID.String()] = append(s.eventLog[taskID.String()], loggedEvent{id: ev.ID(), fingerprint: ev.Fingerprint(), at: merged.UpdatedAt()})
	if rolloutChanged {
		s.rollouts[rollout.ID().String()] = rollout
	}
	return merged, nil
}

// installedLocked records the version the device runs now that t, of
// firmware fw, succeeded (domain.Task.Installs), as the Postgres adapter
// does in the transaction storing the success: the firmware's version,
// last_seen_at moved forward to the success. The caller holds the
// device's row lock and s.mu.
func (s *Store) installedLocked(t domain.Task, fw domain.Firmware) {
	d, ok := s.devices[t.DeviceID().String()]
	if !ok {
		return // not reached: the task references the device
	}
	at := stamp(t.UpdatedAt())
	if last := d.LastSeenAt(); last.After(at) {
		at = last
	}
	d.Seen(fw.Version(), at)
	s.devices[d.ID().String()] = storedDevice(d)
}

// RolloutStats counts a rollout's devices, each once, by the status of
// the task domain.CountsOver picks for it. A rollout without tasks,
// that does not exist, or whose id is not a UUID has all counts zero: it is
// a count, not a lookup.
func (r *Tasks) RolloutStats(ctx context.Context, rolloutID domain.UUID) (domain.TaskStats, error) {
	return r.RolloutStatsSince(ctx, rolloutID, time.Time{})
}

// RolloutStatsSince is RolloutStats for the tasks created at or after since.
func (r *Tasks) RolloutStatsSince(ctx context.Context, rolloutID domain.UUID, since time.Time) (domain.TaskStats, error) {
	if err := ctx.Err(); err != nil {
		return domain.TaskStats{}, err
	}
	key, ok := rolloutID.String(), !rolloutID.IsZero()
	if !ok {
		return domain.TaskStats{}, nil
	}
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rolloutStatsLocked(key, since, nil), nil
}

// rolloutStatsLocked counts a rollout's devices, each once, by the status
// of the one of its tasks created at or after since (zero: all) that
// domain.CountsOver picks, as the Postgres statement does. changed, when
// not nil, stands for the stored task of the same id (a change not yet
// stored). The caller holds s.mu.
func (s *Store) rolloutStatsLocked(rolloutID string, since time.Time, changed *domain.Task) domain.TaskStats {
	since = stamp(since) // as Postgres compares: at the stored precision
	latest := map[string]domain.Task{}
	for _, id := range s.byRollout[rolloutID] {
		t := s.tasks[id]
		if changed != nil && id == changed.ID().String() {
			t = *changed
		}
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
	sort.Slice(out, func(i, j int) bool {
		return taskAfter(out[j], ports.TaskCursor{CreatedAt: out[i].CreatedAt(), ID: out[i].ID()})
	})
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// taskAfter reports whether t comes after c in (created_at, id) order.
// Canonical UUID strings sort as Postgres sorts uuid values.
func taskAfter(t domain.Task, c ports.TaskCursor) bool {
	if cmp := t.CreatedAt().Compare(c.CreatedAt); cmp != 0 {
		return cmp > 0
	}
	return t.ID().String() > c.ID.String()
}

// judgeRollout lets eval judge a rollout whose row lock the caller holds,
// counting its tasks as they will be once changed (one of them, not yet
// stored) is; it returns the rollout as it is to be stored and whether eval
// changed it. Nothing is stored here: the caller stores it with the task.
func (s *Store) judgeRollout(rolloutID string, changed domain.Task, eval ports.RolloutEvaluation) (domain.Rollout, bool, error) {
	s.mu.Lock()
	stored, found := s.rollouts[rolloutID]
	s.mu.Unlock()
	if !found {
		return domain.Rollout{}, false, domain.ErrNotFound // not reached: the task references it
	}
	rollout := cloneRollout(stored)
	stats := func(since time.Time) (domain.TaskStats, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.rolloutStatsLocked(rolloutID, since, &changed), nil
	}
	ok, err := eval(&rollout, stats)
	if err != nil || !ok {
		return domain.Rollout{}, false, err
	}
	return mergeRollout(stored, rollout), true, nil
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
