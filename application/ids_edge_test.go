package application_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// storeCalls counts every call of an id-taking store method, so a test can
// show that an id an edge could not parse is answered before any store is
// asked.
type storeCalls struct{ n atomic.Int64 }

func (c *storeCalls) hit() { c.n.Add(1) }

type watchedDevices struct {
	ports.DeviceRepository
	c *storeCalls
}

func (w watchedDevices) Get(ctx context.Context, id domain.DeviceID) (domain.Device, error) {
	w.c.hit()
	return w.DeviceRepository.Get(ctx, id)
}

func (w watchedDevices) Update(ctx context.Context, id domain.DeviceID, fn func(*domain.Device) error, rec domain.AuditRecord) (domain.Device, error) {
	w.c.hit()
	return w.DeviceRepository.Update(ctx, id, fn, rec)
}

type watchedTasks struct {
	application.TaskStore
	c *storeCalls
}

func (w watchedTasks) Get(ctx context.Context, id domain.UUID) (domain.Task, error) {
	w.c.hit()
	return w.TaskStore.Get(ctx, id)
}

func (w watchedTasks) InTaskTx(ctx context.Context, fn func(ports.TaskTx) error) error {
	w.c.hit()
	return w.TaskStore.InTaskTx(ctx, fn)
}

func (w watchedTasks) Active(ctx context.Context, id domain.DeviceID) (domain.Task, error) {
	w.c.hit()
	return w.TaskStore.Active(ctx, id)
}

func (w watchedTasks) CheckViewOf(ctx context.Context, id domain.DeviceID) (ports.CheckView, error) {
	w.c.hit()
	return w.TaskStore.CheckViewOf(ctx, id)
}

func (w watchedTasks) List(ctx context.Context, f ports.TaskFilter) ([]domain.Task, error) {
	w.c.hit()
	return w.TaskStore.List(ctx, f)
}

type watchedDirectory struct {
	application.DeviceDirectory
	c *storeCalls
}

func (w watchedDirectory) UpdateTags(ctx context.Context, ids []domain.DeviceID,
	fn func(domain.DeviceID, []string) ([]string, error), rec domain.AuditRecord) (map[domain.DeviceID][]string, error) {
	w.c.hit()
	return w.DeviceDirectory.UpdateTags(ctx, ids, fn, rec)
}

func (w watchedDirectory) List(ctx context.Context, f ports.DeviceFilter) ([]ports.DeviceListing, error) {
	w.c.hit()
	return w.DeviceDirectory.List(ctx, f)
}

// watchedUseCases builds the device and admin use cases over the memory
// stores with every id-taking store method counted.
func watchedUseCases(t *testing.T) (*application.Devices, *application.Admin, *storeCalls) {
	t.Helper()
	store := memory.NewStore()
	calls := &storeCalls{}
	deps := application.Deps{
		Devices: watchedDevices{memory.NewDevices(store), calls}, Firmwares: memory.NewFirmwares(store),
		Rollouts: memory.NewRollouts(store), Tasks: watchedTasks{memory.NewTasks(store), calls},
		Locker: local.NewLocker(time.Second, ports.NopLockMetrics{}), Clock: local.NewClock(), IDs: local.NewUUIDs(),
		Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
		Attributes: memory.NewAttributes(store), Directory: watchedDirectory{memory.NewDirectory(store), calls},
	}
	devices, err := application.NewDevices(deps, application.PollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := application.NewAdmin(deps)
	if err != nil {
		t.Fatal(err)
	}
	return devices, admin, calls
}

// An id an edge could not parse arrives as the zero id (an edge that must
// judge a body first hands it on): the use cases answer it as
// docs/ARCHITECTURE.md ("Ids are parsed once") says — NOT_FOUND for an id in a path, VALIDATION_FAILED for one
// in a body or a query — and never ask a store.
func TestMalformedIDsNeverReachAStore(t *testing.T) {
	t.Parallel()
	devices, admin, calls := watchedUseCases(t)
	ctx := context.Background()
	dev := asDeviceID("dev-1")
	notFound := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	invalid := func(name, field string, err error) {
		t.Helper()
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%s: %v, want a validation error on %s", name, err, field)
		}
	}

	_, err := devices.GetTask(ctx, dev, asUUID("not-a-task"))
	notFound("GetTask", err)
	_, err = devices.ReportEvent(ctx, dev, asUUID("not-a-task"), ports.EventRequest{EventID: "e1", Status: "downloading"})
	notFound("ReportEvent", err)
	_, err = devices.IdentifyDevice(ctx, asDeviceID("bad id"))
	notFound("IdentifyDevice", err)
	_, err = admin.SetDeviceTags(ctx, testActor, asDeviceID("bad/id"), []string{"eu"})
	notFound("SetDeviceTags", err)

	// The event is judged before the id: a bad event is VALIDATION_FAILED
	// whatever the task id.
	_, err = devices.ReportEvent(ctx, dev, asUUID("not-a-task"), ports.EventRequest{EventID: "e1", Status: "flying"})
	invalid("ReportEvent with a bad status", "status", err)

	_, err = admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: "bad id", Model: "cam-x1"})
	invalid("RegisterDevice", "device_id", err)
	_, err = admin.ChangeDeviceTags(ctx, testActor, ports.TagChange{DeviceIDs: []string{"ok-1", "bad\x00id"}, Add: []string{"eu"}})
	invalid("ChangeDeviceTags", "device_ids", err)
	_, err = admin.ListTasks(ctx, ports.TaskQuery{DeviceID: "bad id"})
	invalid("ListTasks by device", "device_id", err)
	_, err = admin.ListTasks(ctx, ports.TaskQuery{RolloutID: "not-a-rollout"})
	invalid("ListTasks by rollout", "rollout_id", err)
	_, err = admin.ListDevices(ctx, ports.DeviceQuery{After: "bad id"})
	invalid("ListDevices after", "after", err)

	if n := calls.n.Load(); n != 0 {
		t.Fatalf("the stores were asked %d times", n)
	}

	// A well-formed id of nobody does reach the store, and is not found.
	_, err = devices.GetTask(ctx, dev, asUUID("7c9e6679-7425-40de-944b-e07fc1f90ae7"))
	notFound("GetTask of an unknown task", err)
	if calls.n.Load() == 0 {
		t.Fatal("a well-formed id was not looked up: the counting proves nothing")
	}
}

// A fresh task id comes from the id generator; one that makes the zero id
// (no UUID) is a bug, reported rather than stored.
func TestCheckRefusesAGeneratorThatMakesNoUUID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	d := e.device("1.0.0")
	e.rollout(e.firmware("1.1.0"), 100)
	deps := e.deps
	deps.IDs = badIDs{}
	devices, err := application.NewDevices(deps, application.PollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := devices.IdentifyDevice(e.ctx, asDeviceID(d))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := devices.Check(e.ctx, ports.CheckRequest{Device: dev, Model: model, CurrentVersion: "1.0.0"}); err == nil {
		t.Fatal("a check stored a task under an id that is not a UUID")
	}
	if ts := e.tasksOf(asDeviceID(d)); len(ts) != 0 {
		t.Fatalf("tasks stored: %d", len(ts))
	}
}

type badIDs struct{}

func (badIDs) NewID() domain.UUID { return domain.UUID{} }
