package application

import (
	"context"
	"fmt"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// TaskUpdater changes a task outside a device's event (the protocols'
// stop before install), through UpdateTask, so that its rollout's
// counters change with it.
type TaskUpdater interface {
	TaskTransactor
}

// StopBeforeInstall stores domain.Task.StopBeforeInstall's decision on the
// task v, of rollout r: the one place the device protocols (Mender's status
// reports, DDI's deploymentBase and feedback; application/mender and
// application/ddi) stop a task whose firmware was revoked or rollout
// cancelled before its device began installing. It returns the task as it
// stands: cancelled when it was stopped, else as v had it.
func StopBeforeInstall(ctx context.Context, tasks TaskUpdater, metrics ports.Metrics, v ports.TaskView, r domain.Rollout, now time.Time) (domain.Task, error) {
	if probe := v.Task; !probe.StopBeforeInstall(v.Firmware, r, now) {
		return v.Task, nil
	}
	t, err := UpdateTask(ctx, tasks, v.Task.ID(), func(t *domain.Task) error {
		t.StopBeforeInstall(v.Firmware, r, now)
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
