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

// Deps are every port the use cases run on, for callers that build the
// whole application at once (tests, tools): NewDevices and NewAdmin hand
// each use case the ports it uses. Every field is required.
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
	// Attributes and Directory hold what devices report and the
	// operators' tags (docs/DOMAIN.md, rule T2). They are optional here, for callers
	// that predate them: without them a check reporting attributes and
	// the tag and device-listing use cases fail with errNoTargetingStore.
	// The served wiring always provides both.
	Attributes ports.DeviceAttributes
	Directory  ports.DeviceDirectory
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

// errNoTargetingStore is what the targeting use cases answer when built
// from Deps without their stores.
var errNoTargetingStore = errors.New("application: no attribute or tag store configured")

// noTargetingStore stands in for missing targeting stores in Deps.
type noTargetingStore struct{}

func (noTargetingStore) Get(context.Context, domain.DeviceID) (domain.DeviceAttributes, error) {
	return domain.DeviceAttributes{}, nil
}

func (noTargetingStore) Update(context.Context, domain.DeviceID, func(*domain.DeviceAttributes) error) (domain.DeviceAttributes, error) {
	return domain.DeviceAttributes{}, errNoTargetingStore
}

func (noTargetingStore) UpdateTags(context.Context, []domain.DeviceID, func(domain.DeviceID, []string) ([]string, error)) (map[domain.DeviceID][]string, error) {
	return nil, errNoTargetingStore
}

func (noTargetingStore) Tags(context.Context, domain.DeviceID) ([]string, error) {
	return nil, errNoTargetingStore
}

func (noTargetingStore) List(context.Context, ports.DeviceFilter) ([]ports.DeviceListing, error) {
	return nil, errNoTargetingStore
}

func (d Deps) attributes() ports.DeviceAttributes {
	if d.Attributes == nil {
		return noTargetingStore{}
	}
	return d.Attributes
}

func (d Deps) directory() ports.DeviceDirectory {
	if d.Directory == nil {
		return noTargetingStore{}
	}
	return d.Directory
}

func (d Deps) validate() error {
	return required(d.Devices, d.Firmwares, d.Rollouts, d.Tasks, d.Locker, d.Clock, d.IDs, d.Metrics, d.Limiter)
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
