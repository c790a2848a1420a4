package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/artifactfile"
	"github.com/ai-device/ota/adapters/blobstore"
	"github.com/ai-device/ota/adapters/local"
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
	// Artifacts uploads images (MemoryOptions.Artifacts).
	Artifacts *application.Artifacts
}

// MemoryOptions are what the tests vary; zero values take the defaults.
type MemoryOptions struct {
	Clock        ports.Clock   // default local.NewClock()
	Locker       ports.Locker  // default a local.Locker waiting LockWait
	LockWait     time.Duration // default 2s: generous on a shared machine
	PollInterval time.Duration // default 1h
	// Artifacts adds hosted artifacts: the upload use case over a
	// directory blob store in the test's temporary directory, reading
	// uploads with adapters/artifactfile, and Deps.Artifacts so firmware
	// is published from them.
	Artifacts bool
}

// NewMemoryService wires a MemoryService on a fresh store.
func NewMemoryService(t testing.TB, o MemoryOptions) *MemoryService {
	t.Helper()
	if o.Clock == nil {
		o.Clock = local.NewClock()
	}
	if o.LockWait == 0 {
		o.LockWait = 2 * time.Second
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Hour
	}
	if o.Locker == nil {
		o.Locker = local.NewLocker(o.LockWait, ports.NopLockMetrics{})
	}
	store := memory.NewStore()
	s := &MemoryService{Store: store, Deps: application.Deps{
		Devices: memory.NewDevices(store), Firmwares: memory.NewFirmwares(store),
		Rollouts: memory.NewRollouts(store), Tasks: memory.NewTasks(store),
		Locker: o.Locker, Clock: o.Clock, IDs: local.NewUUIDs(),
		Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
		Attributes: memory.NewAttributes(store), Directory: memory.NewDirectory(store),
	}}
	if o.Artifacts {
		repo := memory.NewArtifacts(store)
		s.Deps.Artifacts = repo
		blobs, err := blobstore.Open(context.Background(), "file://"+t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = blobs.Close() })
		if s.Artifacts, err = application.NewArtifacts(blobs, repo, artifactfile.Inspector{}, o.Clock, s.Deps.IDs, 1<<30); err != nil {
			t.Fatal(err)
		}
	}
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
