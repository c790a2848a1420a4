package application

import (
	"context"
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

// Events shows devices their tasks and applies their progress events.
type Events struct {
	tasks     EventStore
	firmwares ports.FirmwareRepository
	devices   ports.DeviceRepository
	clock     ports.Clock
	metrics   ports.Metrics
	limiter   ports.RateLimiter
}

// NewEvents builds the task and event use cases; devices records the
// version of a device whose success came after its task timed out.
func NewEvents(tasks EventStore, firmwares ports.FirmwareRepository, devices ports.DeviceRepository, clock ports.Clock,
	metrics ports.Metrics, limiter ports.RateLimiter) (*Events, error) {
	if err := required(tasks, firmwares, devices, clock, metrics, limiter); err != nil {
		return nil, err
	}
	return &Events{tasks: tasks, firmwares: firmwares, devices: devices, clock: clock, metrics: metrics, limiter: limiter}, nil
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
	var changed bool
	var late *domain.Task // a success after the task timed out (Task.InstalledLate)
	var onRollout RolloutEvaluation
	if ev.IsFinal() {
		onRollout = judgeRollout(s.clock)
	}
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
