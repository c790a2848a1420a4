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
	store := memory.NewStore()
	s := &MemoryService{Store: store, Deps: application.Deps{
		Devices: memory.NewDevices(store), Firmwares: memory.NewFirmwares(store),
		Rollouts: memory.NewRollouts(store), Tasks: memory.NewTasks(store),
		Locker: memory.NewLocker(o.LockWait, ports.NopLockMetrics{}), Clock: o.Clock, IDs: memory.NewUUIDs(),
		Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
	}}
	var err error
	if s.Devices, err = application.NewDevices(s.Deps, application.PollInterval(o.PollInterval)); err != nil {
		t.Fatal(err)
	}
	if s.Admin, err = application.NewAdmin(s.Deps); err != nil {
		t.Fatal(err)
	}
	if s.Fleet, err = application.NewFleet(memory.NewFleet(store), s.Deps.Firmwares, s.Deps.Rollouts, s.Deps.Clock); err != nil {
		t.Fatal(err)
	}
	return s
}
