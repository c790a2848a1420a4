// Package application holds the OTA service's use cases: the device check
// (find or create the upgrade task under a distributed lock), progress
// events, authentication, and the operators' commands and queries by
// aggregate. It orchestrates ports and leaves every rule to the domain.
//
// Each use case is its own type whose constructor takes only the ports it
// uses (auth.go, check.go, events.go, admin_*.go); Devices and Admin put
// them together behind ports.DeviceService and ports.AdminService.
package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// PollInterval is the hint sent to devices as poll_after_seconds.
type PollInterval time.Duration

// TaskStore is every task port the use cases declare (AuthStore,
// CheckStore, EventStore, ActiveTasks, RolloutCounts, TaskHistory),
// for callers that build them all from one store (Deps).
// No use case takes it: each takes the few methods it calls.
type TaskStore interface {
	AuthStore
	CheckStore
	EventStore
	ActiveTasks
	RolloutCounts
	TaskHistory
}

// Deps are every port the use cases run on, for callers that build the
// whole application at once (tests, tools): NewDevices and NewAdmin hand
// each use case the ports it uses. Every field is required.
type Deps struct {
	Devices   ports.DeviceRepository
	Firmwares ports.FirmwareRepository
	Rollouts  ports.RolloutRepository
	Tasks     TaskStore
	Locker    ports.Locker
	Clock     ports.Clock
	IDs       ports.IDGenerator
	Metrics   ports.Metrics
	// Limiter spends each device's request budget on checks and non-final
	// events (ports.Unlimited turns limits off).
	Limiter ports.RateLimiter
	// Attributes and Directory hold what devices report and the
	// operators' tags (docs/DOMAIN.md, rule T2): the check stores reported
	// attributes, and the admin's device view shows both.
	Attributes ports.DeviceAttributes
	Directory  DeviceDirectory
	// Artifacts are the uploaded artifacts firmware may be published
	// from; optional here (without it an artifact_id is not found).
	Artifacts ports.ArtifactRepository
}

// noArtifacts stands in for a missing artifact store in Deps: it holds none.
type noArtifacts struct{}

func (noArtifacts) Get(context.Context, domain.UUID) (domain.Artifact, error) {
	return domain.Artifact{}, domain.ErrNotFound
}

func (d Deps) artifacts() ArtifactReader {
	if d.Artifacts == nil {
		return noArtifacts{}
	}
	return d.Artifacts
}

func (d Deps) validate() error {
	return required(d.Devices, d.Firmwares, d.Rollouts, d.Tasks, d.Locker, d.Clock, d.IDs, d.Metrics, d.Limiter,
		d.Attributes, d.Directory)
}

// required fails when any dependency is missing (a nil interface).
func required(deps ...any) error {
	for _, d := range deps {
		if d == nil {
			return errors.New("application: every dependency is required")
		}
	}
	return nil
}

// firmwareOf loads the firmware of a task, preferring ones already at hand.
func firmwareOf(ctx context.Context, firmwares ports.FirmwareRepository, known map[domain.UUID]domain.Firmware, id domain.UUID) (domain.Firmware, error) {
	if fw, ok := known[id]; ok {
		return fw, nil
	}
	fw, err := firmwares.Get(ctx, id)
	if err != nil {
		return domain.Firmware{}, err
	}
	if known != nil {
		known[id] = fw
	}
	return fw, nil
}

// taskView pairs a task with its firmware.
func taskView(ctx context.Context, firmwares ports.FirmwareRepository, known map[domain.UUID]domain.Firmware, t domain.Task) (ports.TaskView, error) {
	fw, err := firmwareOf(ctx, firmwares, known, t.FirmwareID())
	if err != nil {
		return ports.TaskView{}, fmt.Errorf("loading task firmware: %w", err)
	}
	return ports.TaskView{Task: t, Firmware: fw}, nil
}

// newID takes a fresh id from the generator. A generator never makes the
// zero UUID (ports.IDGenerator); one that does is a bug, reported as such
// rather than stored.
func newID(ids ports.IDGenerator) (domain.UUID, error) {
	id := ids.NewID()
	if id.IsZero() {
		return domain.UUID{}, errors.New("application: id generator made the zero id")
	}
	return id, nil
}
