package application

import (
	"context"
	"fmt"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// StopRule is a protocol's point for stopping a task whose firmware was
// revoked or rollout cancelled: it cancels the task, when the rule says
// its device may still be stopped, and reports whether it did.
// (*domain.Task).StopBeforeInstall is Mender's (its device asks before
// every step), (*domain.Task).StopBeforeStart DDI's (its device reports
// download and install alike, so any progress means it has started).
type StopRule func(t *domain.Task, fw domain.Firmware, r domain.Rollout, now time.Time) bool

// StopBeforeInstall stores stop's decision on the task v, of rollout r:
// the one place the device protocols (Mender's status reports, DDI's
// deploymentBase; application/mender and application/ddi) stop a task
// whose firmware was revoked or rollout cancelled before its device began
// installing, each by its own StopRule. It returns the task as it stands:
// cancelled when it was stopped, else as v had it.
func StopBeforeInstall(ctx context.Context, tasks TaskTransactor, metrics ports.Metrics, v ports.TaskView, r domain.Rollout, now time.Time, stop StopRule) (domain.Task, error) {
	if probe := v.Task; !stop(&probe, v.Firmware, r, now) {
		return v.Task, nil
	}
	t, err := UpdateTask(ctx, tasks, v.Task.ID(), func(t *domain.Task) error {
		stop(t, v.Firmware, r, now) // judged again on the locked row
		return nil
	})
	if err != nil {
		return domain.Task{}, fmt.Errorf("stopping task: %w", err)
	}
	if t.Status() == domain.TaskCancelled {
		metrics.TaskTransition(t.Status().String())
	}
	return t, nil
}

// EndsTask reports whether an event request's status ends its task
// (TaskStatus.IsFinal), as the protocols must know before the event is
// judged: a status that does not parse ends nothing.
func EndsTask(status string) bool {
	st, err := domain.ParseTaskStatus(status)
	return err == nil && st.IsFinal()
}
