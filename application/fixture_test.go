package application_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// env is the application over the in-memory adapters: the same code paths
// as production, minus the network.
type env struct {
	t       *testing.T
	ctx     context.Context
	store   *memory.Store
	deps    application.Deps
	devices *application.Devices
	admin   *application.Admin
	seq     atomic.Int64
}

func newEnv(t *testing.T, locker ports.Locker) *env {
	t.Helper()
	if locker == nil {
		locker = local.NewLocker(defaultWait, ports.NopLockMetrics{})
	}
	svc := testenv.NewMemoryService(t, testenv.MemoryOptions{Locker: locker})
	return &env{t: t, ctx: context.Background(), store: svc.Store, deps: svc.Deps, devices: svc.Devices, admin: svc.Admin}
}

const defaultWait = 2e9 // 2s: generous on a shared machine

const model = "cam-x1"

func (e *env) device(version string) string {
	e.t.Helper()
	id := fmt.Sprintf("dev-%d", e.seq.Add(1))
	if _, err := e.admin.RegisterDevice(e.ctx, testActor, ports.RegisterDevice{DeviceID: id, Model: model, CurrentVersion: version}); err != nil {
		e.t.Fatalf("register %s: %v", id, err)
	}
	return id
}

func (e *env) firmware(version string, mutate ...func(*domain.FirmwareSpec)) domain.Firmware {
	e.t.Helper()
	spec := domain.FirmwareSpec{Model: model, Version: version, URL: "https://files.example/" + version + ".bin",
		SizeBytes: 1024, SHA256: strings.Repeat("ab", 32)}
	for _, m := range mutate {
		m(&spec)
	}
	fw, err := e.admin.PublishFirmware(e.ctx, testActor, spec)
	if err != nil {
		e.t.Fatalf("publish %s: %v", version, err)
	}
	return fw
}

func (e *env) rollout(fw domain.Firmware, pct int, mutate ...func(*domain.RolloutSpec)) domain.Rollout {
	e.t.Helper()
	spec := domain.RolloutSpec{Percentage: pct}
	for _, m := range mutate {
		m(&spec)
	}
	r, err := e.admin.StartRollout(e.ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: spec})
	if err != nil {
		e.t.Fatalf("start rollout: %v", err)
	}
	return r
}

// watchedRollout starts a rollout of a new 1.1.0 to every device that
// pauses itself once half of at least minSample finished tasks failed.
func (e *env) watchedRollout(minSample int) domain.Rollout {
	e.t.Helper()
	return e.rollout(e.firmware("1.1.0"), 100, func(s *domain.RolloutSpec) {
		s.FailureThresholdPercent = intp(50)
		s.MinSample = intp(minSample)
	})
}

// req is a check request of the device as the edge makes it: identified
// (with its task state read alongside). An unknown device makes a request
// with no device, which Check refuses.
func (e *env) req(deviceID, model, version string) ports.CheckRequest {
	e.t.Helper()
	dev, err := e.devices.IdentifyDevice(e.ctx, asDeviceID(deviceID))
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		e.t.Fatalf("identify %s: %v", deviceID, err)
	}
	return ports.CheckRequest{Device: dev, Model: model, CurrentVersion: version}
}

// devicesWith builds the device use cases over e's ports as change leaves
// them: a test's own metrics, store wrapper or locker.
func (e *env) devicesWith(change func(*application.Deps)) *application.Devices {
	e.t.Helper()
	deps := e.deps
	change(&deps)
	devices, err := application.NewDevices(deps, application.PollInterval(time.Hour))
	if err != nil {
		e.t.Fatal(err)
	}
	return devices
}

func (e *env) check(deviceID, version string) ports.CheckResult {
	e.t.Helper()
	res, err := e.devices.Check(e.ctx, e.req(deviceID, model, version))
	if err != nil {
		e.t.Fatalf("check %s@%s: %v", deviceID, version, err)
	}
	return res
}

func (e *env) event(deviceID domain.DeviceID, taskID domain.UUID, eventID, status string, progress *int) (ports.TaskView, error) {
	return e.devices.ReportEvent(e.ctx, deviceID, taskID, ports.EventRequest{EventID: eventID, Status: status, Progress: progress})
}

func (e *env) mustEvent(deviceID domain.DeviceID, taskID domain.UUID, eventID, status string) ports.TaskView {
	e.t.Helper()
	v, err := e.event(deviceID, taskID, eventID, status, nil)
	if err != nil {
		e.t.Fatalf("event %s %s: %v", eventID, status, err)
	}
	return v
}

func (e *env) task(id domain.UUID) domain.Task {
	e.t.Helper()
	t, err := e.deps.Tasks.Get(e.ctx, id)
	if err != nil {
		e.t.Fatalf("get task %s: %v", id, err)
	}
	return t
}

func (e *env) tasksOf(deviceID domain.DeviceID) []domain.Task {
	e.t.Helper()
	ts, err := e.deps.Tasks.List(e.ctx, ports.TaskFilter{DeviceID: deviceID, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return ts
}

func intp(v int) *int { return &v }

// busyLocker refuses every lock, as Redis would when down.
type busyLocker struct{ calls atomic.Int64 }

func (b *busyLocker) WithLock(context.Context, string, func(context.Context) error) error {
	b.calls.Add(1)
	return &ports.BusyError{Reason: ports.LockUnavailable, Err: errors.New("redis: connection refused")}
}

func strp(s string) *string { return &s }
