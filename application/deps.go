// Package application holds the OTA service's use cases: the device check
// (find or create the upgrade task under a distributed lock), progress
// events, and the operators' commands and queries. It orchestrates ports and
// leaves every rule to the domain.
package application

import (
	"context"
	"errors"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// PollInterval is the hint sent to devices as poll_after_seconds.
type PollInterval time.Duration

// Deps are the ports the use cases run on. Every field is required.
type Deps struct {
	Devices   ports.DeviceRepository
	Firmwares ports.FirmwareRepository
	Rollouts  ports.RolloutRepository
	Tasks     ports.TaskRepository
	Locker    ports.Locker
	Clock     ports.Clock
	IDs       ports.IDGenerator
	Metrics   ports.Metrics
	// Limiter spends each device's request budget on checks and non-final
	// events (ports.Unlimited turns limits off).
	Limiter ports.RateLimiter
}

func (d Deps) validate() error {
	if d.Devices == nil || d.Firmwares == nil || d.Rollouts == nil || d.Tasks == nil ||
		d.Locker == nil || d.Clock == nil || d.IDs == nil || d.Metrics == nil || d.Limiter == nil {
		return errors.New("application: every dependency is required")
	}
	return nil
}

// firmwareOf loads the firmware of a task, preferring ones already at hand.
func (d Deps) firmwareOf(ctx context.Context, known map[string]domain.Firmware, id string) (domain.Firmware, error) {
	if fw, ok := known[id]; ok {
		return fw, nil
	}
	fw, err := d.Firmwares.Get(ctx, id)
	if err != nil {
		return domain.Firmware{}, err
	}
	if known != nil {
		known[id] = fw
	}
	return fw, nil
}

// view pairs a task with its firmware.
func (d Deps) view(ctx context.Context, known map[string]domain.Firmware, t domain.Task) (ports.TaskView, error) {
	fw, err := d.firmwareOf(ctx, known, t.FirmwareID())
	if err != nil {
		return ports.TaskView{}, err
	}
	return ports.TaskView{Task: t, Firmware: fw}, nil
}

// activeTask returns the device's active task, or nil.
func (d Deps) activeTask(ctx context.Context, deviceID string) (*domain.Task, error) {
	t, err := d.Tasks.Active(ctx, deviceID)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// activeAndFailed returns the device's active task (nil if none) and its
// failed counts by firmware id (never nil).
func (d Deps) activeAndFailed(ctx context.Context, deviceID string) (*domain.Task, map[string]int, error) {
	if r, ok := d.Tasks.(ports.ActiveAndFailedReader); ok {
		return r.ActiveAndFailedCounts(ctx, deviceID)
	}
	active, err := d.activeTask(ctx, deviceID)
	if err != nil {
		return nil, nil, err
	}
	failed, err := d.Tasks.FailedCounts(ctx, deviceID)
	if err != nil {
		return nil, nil, err
	}
	return active, failed, nil
}
