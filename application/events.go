package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// EventStore is what the task and event use cases read and write.
type EventStore interface {
	// Get loads a task by id (domain.ErrNotFound).
	Get(ctx context.Context, id domain.UUID) (domain.Task, error)
	// TaskTransactor is the transaction ApplyEvent stores the event in.
	TaskTransactor
}

// UnchangedUpdater is a store's device event in one statement, its own
// transaction, which an EventStore may also be: an event is then three
// round trips (authentication, the task, this) instead of authentication
// and a transaction's eight (a progress event) or eleven (a success). A
// store with no round trips to save (memory) has none, and every event
// goes through ApplyEvent, which decides the same.
type UnchangedUpdater interface {
	// UpdateIfUnchanged stores w.After over w.Before, records w.Event for
	// it, adds w.Counts and writes w.Installed and w.Announce, only if the
	// stored task is still w.Before (a change in progress waited for and
	// compared), no event is recorded for it under the event's id, and
	// its device has no other task in its rollout. It compares, it does
	// not judge: updated false means nothing was stored, whichever guard
	// failed, and ApplyEvent decides.
	UpdateIfUnchanged(ctx context.Context, w ports.GuardedTaskWrite) (stored domain.Task, updated bool, err error)
}

// Events shows devices their tasks and applies their progress events.
type Events struct {
	tasks     EventStore
	unchanged UnchangedUpdater // the store's progress event in one statement; nil if it has none
	firmwares ports.FirmwareRepository
	rollouts  ports.RolloutRepository
	devices   ports.DeviceRepository
	clock     ports.Clock
	metrics   ports.Metrics
	limiter   ports.RateLimiter
}

// NewEvents builds the task and event use cases; devices records the
// version of a device whose success came after its task timed out. The
// firmwares and rollouts are read often and never changed here (the
// catalog cache, where there is one): the short path takes a success's
// version, and whether its rollout is judged, from them.
func NewEvents(tasks EventStore, firmwares ports.FirmwareRepository, rollouts ports.RolloutRepository, devices ports.DeviceRepository,
	clock ports.Clock, metrics ports.Metrics, limiter ports.RateLimiter) (*Events, error) {
	if err := required(tasks, firmwares, rollouts, devices, clock, metrics, limiter); err != nil {
		return nil, err
	}
	unchanged, _ := tasks.(UnchangedUpdater)
	return &Events{tasks: tasks, unchanged: unchanged, firmwares: firmwares, rollouts: rollouts, devices: devices, clock: clock,
		metrics: metrics, limiter: limiter}, nil
}

// GetTask returns one of the device's own tasks; anyone else's is not found,
// and so is the zero id (one the edge could not parse), without a read.
func (s *Events) GetTask(ctx context.Context, deviceID domain.DeviceID, taskID domain.UUID) (ports.TaskView, error) {
	if taskID.IsZero() {
		return ports.TaskView{}, fmt.Errorf("task: %w", domain.ErrNotFound)
	}
	t, err := s.tasks.Get(ctx, taskID)
	if err != nil {
		return ports.TaskView{}, fmt.Errorf("loading task: %w", err)
	}
	if t.DeviceID() != deviceID {
		return ports.TaskView{}, fmt.Errorf("task %s: %w", taskID, domain.ErrNotFound)
	}
	return taskView(ctx, s.firmwares, nil, t)
}

// ReportEvent applies a device's progress event once per event id (event
// rules 1–3) and, on a final status, lets the rollout pause itself when its
// failure threshold is reached (rule 5), and a staged rollout advance or
// pause by its gate (stage rules G2–G3) — judged right after the event's
// commit, whether or not the device waits for the answer, and without
// the rollout's lock unless the judgement changes it (ApplyEvent).
//
// The event is judged before the task id: a malformed event is
// VALIDATION_FAILED whatever the id, and the zero id (one the edge could
// not parse) is not found without a read.
func (s *Events) ReportEvent(ctx context.Context, deviceID domain.DeviceID, taskID domain.UUID, req ports.EventRequest) (ports.TaskView, error) {
	ev, err := domain.NewEvent(req.EventID, req.Status, req.Progress, req.ErrorCode, req.ErrorMessage)
	if err != nil {
		return ports.TaskView{}, err
	}
	// A final status is never refused for rate reasons: it is the word
	// that lets the device stop, and losing it would leave the task open.
	if !ev.IsFinal() {
		if ok, wait := s.limiter.Allow(deviceID.String()); !ok {
			return ports.TaskView{}, &ports.RateLimitedError{Wait: wait}
		}
	}
	if taskID.IsZero() {
		return ports.TaskView{}, fmt.Errorf("task: %w", domain.ErrNotFound)
	}
	var onRollout RolloutEvaluation
	if ev.IsFinal() {
		onRollout = judgeRollout(s.clock)
	}
	if t, done, err := s.applyUnchanged(ctx, deviceID, taskID, ev); err != nil || done {
		if err != nil {
			return ports.TaskView{}, fmt.Errorf("applying event: %w", err)
		}
		s.metrics.TaskTransition(t.Status().String())
		if onRollout != nil && s.judges(ctx, t) {
			if err := judgeEnded(ctx, s.tasks, t, onRollout); err != nil {
				return ports.TaskView{}, fmt.Errorf("applying event: %w", err)
			}
		}
		return taskView(ctx, s.firmwares, nil, t)
	}
	var changed bool
	var late *domain.Task // a success after the task timed out (Task.InstalledLate)
	t, err := ApplyEvent(ctx, s.tasks, taskID, ev, func(t *domain.Task, prior *domain.Event) (bool, error) {
		if t.DeviceID() != deviceID {
			return false, fmt.Errorf("task %s: %w", taskID, domain.ErrNotFound)
		}
		var err error
		changed, err = t.ApplyEvent(ev, prior, s.clock.Now())
		if err != nil && t.InstalledLate(ev) {
			late = t
		}
		return changed, err
	}, onRollout)
	if changed && !t.ID().IsZero() { // stored, even when its judgement then failed
		s.metrics.TaskTransition(t.Status().String())
	}
	if err != nil {
		if late != nil {
			// Refused (TASK_FINISHED), but the device runs the image.
			if rerr := s.recordLateInstall(ctx, *late); rerr != nil {
				return ports.TaskView{}, rerr
			}
		}
		return ports.TaskView{}, fmt.Errorf("applying event: %w", err)
	}
	return taskView(ctx, s.firmwares, nil, t)
}

// applyUnchanged is an event's short path: the task read without a lock
// and the event applied to it as ApplyEvent applies it to the locked task
// (with no event recorded under its id: the statement checks), and — when
// the task changes — stored by one statement that writes only if the task
// is still as read, the event id is still unrecorded and the device has
// no other task in the task's rollout, so that the task counts for itself
// in every scope and its change adds what domain.Recount of it says
// (soleCounts). With it go what ApplyEvent writes with a task's end: its
// announcement (domain.TaskAnnouncement) and, for a success, the
// firmware's version as the device's (a firmware's version never changes,
// so the catalog's copy is exact). ApplyEvent on the locked task would
// then have done the same. Anything else — a refused event (a late
// install among them), a failed guard (a resend at the task's own status
// among them: the domain sees a change, the unique key refuses its id), a
// firmware that cannot be read — is ApplyEvent's to decide. done false:
// nothing was stored. A final event's judgement is the caller's.
func (s *Events) applyUnchanged(ctx context.Context, deviceID domain.DeviceID, taskID domain.UUID, ev domain.Event) (domain.Task, bool, error) {
	if s.unchanged == nil {
		return domain.Task{}, false, nil
	}
	before, err := s.tasks.Get(ctx, taskID)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return domain.Task{}, false, nil // ApplyEvent says so, as for another device's task
	case err != nil:
		return domain.Task{}, false, fmt.Errorf("loading task: %w", err)
	case before.DeviceID() != deviceID:
		return domain.Task{}, false, nil
	}
	t := before
	if changed, err := t.ApplyEvent(ev, nil, s.clock.Now()); err != nil || !changed {
		return domain.Task{}, false, nil
	}
	w := ports.GuardedTaskWrite{Before: before, After: t, Event: ev, Counts: soleCounts(before, t)}
	if a, ok, err := domain.TaskAnnouncement(before, t); err != nil {
		return domain.Task{}, false, nil
	} else if ok {
		w.Announce = &a
	}
	if t.Installs(before) {
		fw, err := s.firmwares.Get(ctx, t.FirmwareID())
		if err != nil {
			return domain.Task{}, false, nil
		}
		v := fw.Version()
		w.Installed = &v
	}
	return s.unchanged.UpdateIfUnchanged(ctx, w)
}

// judges reports whether t's end is to be judged: unless its rollout has
// nothing a task's end could change (Rollout.Judges, fixed at the
// rollout's start, so the catalog's copy is exact). A rollout that cannot
// be read is judged: the judgement reads it again, and says.
func (s *Events) judges(ctx context.Context, t domain.Task) bool {
	r, err := s.rollouts.Get(ctx, t.RolloutID())
	return err != nil || r.Judges()
}

// recordLateInstall stores the firmware's version of t as its device's
// (domain.Task.InstalledLate). The task is not changed, so nothing else
// is written with it; the device's row is locked for the change.
func (s *Events) recordLateInstall(ctx context.Context, t domain.Task) error {
	fw, err := s.firmwares.Get(ctx, t.FirmwareID())
	if err != nil {
		return fmt.Errorf("loading the firmware installed late: %w", err)
	}
	now := s.clock.Now()
	if _, err := s.devices.Update(ctx, t.DeviceID(), func(d *domain.Device) error {
		at := now
		if d.LastSeenAt().After(at) {
			at = d.LastSeenAt()
		}
		d.Seen(fw.Version(), at)
		return nil
	}, domain.AuditRecord{}); err != nil {
		return fmt.Errorf("recording the version installed late: %w", err)
	}
	return nil
}

// judgeRollout is the evaluation of a rollout one of whose tasks ended,
// whether a device's final event (ApplyEvent, after its commit) or a check
// (ReplaceActive, in its transaction) ended it, and of the sweep's
// re-judgement (event rule 5, stage rules G2–G3, stuck-task rule K1).
func judgeRollout(clock ports.Clock) RolloutEvaluation {
	return func(r *domain.Rollout, stats func(since time.Time) (domain.TaskStats, error)) (bool, error) {
		return evaluateRollout(r, stats, clock.Now())
	}
}

// evaluateRollout re-judges a rollout one of whose tasks just finished
// (event rule 5, stage rules G2–G3) on its task counts, counted only when
// the rollout has something to judge.
func evaluateRollout(r *domain.Rollout, stats func(since time.Time) (domain.TaskStats, error), now time.Time) (bool, error) {
	if !r.Evaluates() {
		return false, nil
	}
	total, stage, err := rolloutCounts(*r, stats)
	if err != nil {
		return false, err
	}
	return r.Evaluate(total, stage, now), nil
}

// rolloutCounts reads what Rollout.Evaluate judges, and no more: the
// whole rollout's counters only when it has a failure threshold, the
// current stage's only when it has stages.
func rolloutCounts(r domain.Rollout, stats func(since time.Time) (domain.TaskStats, error)) (total, stage domain.TaskStats, err error) {
	if r.FailureThresholdPercent() != nil {
		if total, err = stats(time.Time{}); err != nil {
			return total, stage, err
		}
	}
	if since := r.StageSince(); !since.IsZero() {
		stage, err = stats(since)
	}
	return total, stage, err
}
