package application

import (
	"context"
	"fmt"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// GetTask returns one of the device's own tasks; anyone else's is not found.
func (s *Devices) GetTask(ctx context.Context, deviceID, taskID string) (ports.TaskView, error) {
	t, err := s.deps.Tasks.Get(ctx, taskID)
	if err != nil {
		return ports.TaskView{}, fmt.Errorf("loading task: %w", err)
	}
	if t.DeviceID() != deviceID {
		return ports.TaskView{}, fmt.Errorf("task %s: %w", taskID, domain.ErrNotFound)
	}
	return s.deps.view(ctx, nil, t)
}

// ReportEvent applies a device's progress event once per event id (event
// rules 1–3) and, on a final status, lets the rollout pause itself when its
// failure threshold is reached (rule 5) — in the event's own transaction,
// so that the evaluation happens exactly when the event is stored, whether
// or not the device waits for the answer.
func (s *Devices) ReportEvent(ctx context.Context, deviceID, taskID string, req ports.EventRequest) (ports.TaskView, error) {
	ev, err := domain.NewEvent(req.EventID, req.Status, req.Progress, req.ErrorCode, req.ErrorMessage)
	if err != nil {
		return ports.TaskView{}, err
	}
	d := s.deps
	// A final status is never refused for rate reasons: it is the word
	// that lets the device stop, and losing it would leave the task open.
	if !ev.IsFinal() {
		if ok, wait := d.Limiter.Allow(deviceID); !ok {
			return ports.TaskView{}, &ports.RateLimitedError{Wait: wait}
		}
	}
	var changed bool
	var onRollout ports.RolloutEvaluation
	if ev.IsFinal() {
		onRollout = func(r *domain.Rollout, stats func() (domain.TaskStats, error)) (bool, error) {
			if !r.WatchesFailures() {
				return false, nil
			}
			st, err := stats()
			if err != nil {
				return false, err
			}
			return r.AutoPause(st, d.Clock.Now()), nil
		}
	}
	t, err := d.Tasks.ApplyEvent(ctx, taskID, ev, func(t *domain.Task, prior *domain.Event) (bool, error) {
		if t.DeviceID() != deviceID {
			return false, fmt.Errorf("task %s: %w", taskID, domain.ErrNotFound)
		}
		var err error
		changed, err = t.ApplyEvent(ev, prior, d.Clock.Now())
		return changed, err
	}, onRollout)
	if err != nil {
		return ports.TaskView{}, fmt.Errorf("applying event: %w", err)
	}
	if changed {
		d.Metrics.TaskTransition(t.Status().String())
	}
	return d.view(ctx, nil, t)
}
