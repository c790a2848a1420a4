package testenv

import (
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/ports"
)

// MemoryService is the application's use cases over the in-memory
// adapters, wired as the service wires them: the fixture of the adapter
// tests (console, HTTP, Mender) and the application's own, so that a change
// to application.Deps is made here once rather than in every test package.
type MemoryService struct {
	Store   *memory.Store
	Deps    application.Deps
	Devices *application.Devices
	Admin   *application.Admin
	Fleet   *application.Fleet
}

// MemoryOptions are what the tests vary; zero values take the defaults.
type MemoryOptions struct {
	Clock        ports.Clock   // default memory.NewClock()
	Locker       ports.Locker  // default a memory.Locker waiting LockWait
	LockWait     time.Duration // default 2s: generous on a shared machine
	PollInterval time.Duration // default 1h
}

// NewMemoryService wires a MemoryService on a fresh store.
func NewMemoryService(t testing.TB, o MemoryOptions) *MemoryService {
	t.Helper()
	if o.Clock == nil {
		o.Clock = memory.NewClock()
	}
	if o.LockWait == 0 {
		o.LockWait = 2 * time.Second
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Hour
	}
	if o.Locker == nil {
		o.Locker = memory.NewLocker(o.LockWait, ports.NopLockMetrics{})
	}
	store := memory.NewStore()
	s := &MemoryService{Store: store, Deps: application.Deps{
		Devices: memory.NewDevices(store), Firmwares: memory.NewFirmwares(store),
		Rollouts: memory.NewRollouts(store), Tasks: memory.NewTasks(store),
		Locker: o.Locker, Clock: o.Clock, IDs: memory.NewUUIDs(),
		Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
		Attributes: memory.NewAttributes(store), Directory: memory.NewDirectory(store),
	}}
	s.Devices, s.Admin = UseCases(t, s.Deps, o.PollInterval)
	var err error
	if s.Fleet, err = application.NewFleet(memory.NewFleet(store), s.Deps.Firmwares, s.Deps.Rollouts, s.Deps.Clock); err != nil {
		t.Fatal(err)
	}
	return s
}

// UseCases builds the device and admin use cases over deps, polling every
// poll: the wiring every test that assembles its own adapters (memory,
// Postgres, Redis, proxies) shares.
func UseCases(t testing.TB, deps application.Deps, poll time.Duration) (*application.Devices, *application.Admin) {
	t.Helper()
	devices, err := application.NewDevices(deps, application.PollInterval(poll))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := application.NewAdmin(deps)
	if err != nil {
		t.Fatal(err)
	}
	return devices, admin
}
