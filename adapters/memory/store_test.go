package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/google/uuid"
)

// These tests pin what only the memory adapter promises, or what the shared
// contract in tests/contract cannot observe through the ports alone. The
// port behaviour itself is covered there, against this adapter too.

type storeFixture struct {
	t   *testing.T
	s   *Store
	dev *Devices
	fw  *Firmwares
	ro  *Rollouts
	tk  *Tasks
	now time.Time
}

func newStoreFixture(t *testing.T) *storeFixture {
	s := NewStore()
	return &storeFixture{t: t, s: s, dev: NewDevices(s), fw: NewFirmwares(s), ro: NewRollouts(s), tk: NewTasks(s),
		now: time.Date(2026, 1, 2, 3, 4, 5, 6789, time.UTC)}
}

func (f *storeFixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *storeFixture) device(id string) domain.Device {
	f.t.Helper()
	_, h, err := domain.NewDeviceToken()
	f.must(err)
	d, err := domain.NewDevice(asDeviceID(id), "cam", "1.0.0", h, f.now)
	f.must(err)
	f.must(f.dev.Create(f.t.Context(), d, domain.AuditRecord{}))
	return d
}

func (f *storeFixture) offer(id, version string) domain.Offer {
	f.t.Helper()
	fw, err := domain.NewFirmware(asUUID(id), domain.FirmwareSpec{
		Model: "cam", Version: version, URL: "https://x.example/fw.bin", SizeBytes: 1, SHA256: strings.Repeat("a", 64),
	}, f.now)
	f.must(err)
	f.must(f.fw.Create(f.t.Context(), fw, domain.AuditRecord{}))
	r, err := domain.NewRollout(domain.UUIDOf(uuid.New()), fw, domain.RolloutSpec{Percentage: 100}, f.now)
	f.must(err)
	f.must(f.ro.Create(f.t.Context(), r, domain.AuditRecord{}))
	return domain.Offer{Firmware: fw, Rollout: r}
}

func (f *storeFixture) task(deviceID domain.DeviceID, o domain.Offer) domain.Task {
	f.t.Helper()
	tk, err := domain.NewTask(asUUID(uuid.NewString()), deviceID, o, 1, f.now)
	f.must(err)
	return tk
}

func (f *storeFixture) insert(tk domain.Task) domain.Task {
	f.t.Helper()
	got, created, err := application.ReplaceActive(f.t.Context(), f.tk, tk.DeviceID(), onActive(func(*domain.Task) (*domain.Task, error) { return &tk, nil }), nil)
	f.must(err)
	if !created {
		f.t.Fatal("not created")
	}
	return got
}

func TestActionIDsCountFromOne(t *testing.T) {
	f := newStoreFixture(t)
	o := f.offer(uuid.NewString(), "2.0.0")
	for want := int64(1); want <= 3; want++ {
		d := f.device(uuid.NewString())
		if got := f.insert(f.task(d.ID(), o)).ActionID(); got != want {
			t.Fatalf("action id %d, want %d", got, want)
		}
	}
	// An insert that loses, or fails a key, is no task: the next one
	// still gets a number no task has.
	d := f.device("busy")
	f.insert(f.task(d.ID(), o))
	loser := f.task(d.ID(), o)
	if _, created, err := application.ReplaceActive(t.Context(), f.tk, d.ID(), onActive(func(*domain.Task) (*domain.Task, error) { return &loser, nil }), nil); err != nil || created {
		t.Fatalf("losing insert: created=%v err=%v", created, err)
	}
	ghost := f.task(asDeviceID("ghost"), o)
	if _, _, err := application.ReplaceActive(t.Context(), f.tk, asDeviceID("ghost"), onActive(func(*domain.Task) (*domain.Task, error) { return &ghost, nil }), nil); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("insert for an unknown device: %v", err)
	}
	if got := f.insert(f.task(f.device("next").ID(), o)).ActionID(); got != 5 {
		t.Errorf("action id %d after 4 tasks, want 5", got)
	}
}

func TestUUIDsAreCanonical(t *testing.T) {
	f := newStoreFixture(t)
	upper := strings.ToUpper(uuid.NewString())
	o := f.offer(upper, "2.0.0")
	lower := strings.ToLower(upper)

	got, err := f.fw.Get(t.Context(), asUUID(lower))
	f.must(err)
	if got.ID().String() != lower {
		t.Errorf("stored firmware id %q, want canonical %q", got.ID(), lower)
	}
	if _, err := f.fw.Get(t.Context(), asUUID(upper)); err != nil {
		t.Errorf("an upper-case id must find the firmware, as a Postgres uuid column does: %v", err)
	}
	ro, err := f.ro.Get(t.Context(), o.Rollout.ID())
	f.must(err)
	if ro.FirmwareID().String() != lower {
		t.Errorf("rollout's firmware id %q, want canonical %q", ro.FirmwareID(), lower)
	}
	for _, id := range []string{strings.ReplaceAll(lower, "-", ""), "urn:uuid:" + lower, "{" + lower + "}", lower + "0", "g" + lower[1:]} {
		if _, err := f.fw.Get(t.Context(), asUUID(id)); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("get %q: err = %v, want ErrNotFound (only the hyphenated form is an id, as in Postgres)", id, err)
		}
	}
}

// Firmware, rollout and task ids are domain.UUIDs: one that is not a UUID
// cannot be made (the domain's constructors refuse the zero id), so no
// store sees it. A duplicate id is refused, and is not the (model, version)
// conflict.
func TestDuplicateIDsAreRefused(t *testing.T) {
	f := newStoreFixture(t)
	o := f.offer(uuid.NewString(), "2.0.0")
	again, err := domain.NewFirmware(o.Firmware.ID(), domain.FirmwareSpec{Model: "cam", Version: "3.0.0", URL: "https://x.example/b", SizeBytes: 1, SHA256: strings.Repeat("c", 64)}, f.now)
	f.must(err)
	if err := f.fw.Create(t.Context(), again, domain.AuditRecord{}); err == nil || errors.Is(err, domain.ErrFirmwareExists) {
		t.Errorf("duplicate firmware id: err = %v, want a plain refusal", err)
	}
}

func TestTaskForAnotherDeviceIsRefused(t *testing.T) {
	f := newStoreFixture(t)
	o := f.offer(uuid.NewString(), "2.0.0")
	a, b := f.device("a"), f.device("b")
	tk := f.task(b.ID(), o)
	if _, _, err := application.ReplaceActive(t.Context(), f.tk, a.ID(), onActive(func(*domain.Task) (*domain.Task, error) { return &tk, nil }), nil); err == nil || !strings.Contains(err.Error(), "another device") {
		t.Errorf("err = %v, want the task for another device refused", err)
	}
	if _, err := f.tk.Get(t.Context(), tk.ID()); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("the refused task was stored: %v", err)
	}
}

func TestContextErrorsAreTheContexts(t *testing.T) {
	f := newStoreFixture(t)
	o := f.offer(uuid.NewString(), "2.0.0")
	d := f.device("d")
	tk := f.insert(f.task(d.ID(), o))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	errs := map[string]error{}
	_, errs["devices.get"] = f.dev.Get(ctx, d.ID())
	errs["devices.recordSeen"] = f.dev.RecordSeen(ctx, d, domain.MustParseVersion("1.0.1"), f.now)
	_, errs["firmwares.list"] = f.fw.List(ctx, "")
	_, errs["firmwares.update"] = f.fw.Update(ctx, o.Firmware.ID(), func(*domain.Firmware) error { return nil }, nil)
	_, errs["rollouts.offers"] = f.ro.Offers(ctx, "cam")
	_, errs["rollouts.update"] = application.UpdateRollout(ctx, f.tk, o.Rollout.ID(), func(*domain.Rollout, domain.Firmware) error { return nil }, nil)
	_, errs["tasks.active"] = f.tk.Active(ctx, d.ID())
	_, errs["tasks.update"] = application.UpdateTask(ctx, f.tk, tk.ID(), func(*domain.Task) error { return nil })
	_, errs["tasks.list"] = f.tk.List(ctx, ports.TaskFilter{})
	_, errs["tasks.checkView"] = f.tk.CheckViewOf(ctx, d.ID())
	_, errs["tasks.stats"] = f.tk.RolloutStatsSince(ctx, o.Rollout.ID(), time.Time{})
	for name, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want context.Canceled", name, err)
		}
	}
}

// TestWriteLockWaitHonoursDeadline: a caller blocked behind another's fn
// gives up when its context does, as a Postgres query waiting on a row lock
// does.
func TestWriteLockWaitHonoursDeadline(t *testing.T) {
	f := newStoreFixture(t)
	o := f.offer(uuid.NewString(), "2.0.0")
	d := f.device("d")
	tk := f.insert(f.task(d.ID(), o))

	inside, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := application.UpdateTask(t.Context(), f.tk, tk.ID(), func(*domain.Task) error {
			close(inside)
			<-release
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
	<-inside
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := application.ReplaceActive(ctx, f.tk, d.ID(), onActive(func(*domain.Task) (*domain.Task, error) {
		t.Error("fn ran while another caller held the device's tasks")
		return nil, nil
	}), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Errorf("gave up after %v", waited)
	}
	close(release)
	wg.Wait()
}

func TestListEdges(t *testing.T) {
	f := newStoreFixture(t)
	o := f.offer(uuid.NewString(), "2.0.0")
	for i := range ports.DefaultListLimit + 1 {
		f.insert(f.task(f.device(fmt.Sprintf("d%03d", i)).ID(), o))
	}
	all, err := f.tk.List(t.Context(), ports.TaskFilter{})
	f.must(err)
	if len(all) != ports.DefaultListLimit {
		t.Errorf("limit 0 listed %d tasks, want the default page of %d", len(all), ports.DefaultListLimit)
	}
	// Filter ids are typed: the application parses them (and refuses a
	// malformed one) before a store sees the filter. A rollout that does
	// not exist has no tasks.
	if got, err := f.tk.List(t.Context(), ports.TaskFilter{RolloutID: asUUID(uuid.NewString())}); err != nil || len(got) != 0 {
		t.Errorf("unknown rollout filter: %d tasks, err %v; want none, nil", len(got), err)
	}
	if st, err := f.tk.RolloutStatsSince(t.Context(), asUUID("nope"), time.Time{}); err != nil || st != (domain.TaskStats{}) {
		t.Errorf("stats of a non-UUID rollout: %+v, %v; want zero counts, nil", st, err)
	}
	if _, _, err := application.ReplaceActive(t.Context(), f.tk, asDeviceID("no spaces allowed"), onActive(func(*domain.Task) (*domain.Task, error) {
		t.Error("fn ran for a device id that cannot exist")
		return nil, nil
	}), nil); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("replace for an impossible device id: err = %v, want ErrNotFound", err)
	}
}

func TestRecordSeenUnknownDevice(t *testing.T) {
	f := newStoreFixture(t)
	if err := f.dev.RecordSeen(t.Context(), domain.RehydrateDevice("ghost", "m", domain.Version{}, domain.TokenHash{}, time.Time{}, time.Time{}), domain.MustParseVersion("1.0.0"), f.now); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound", err)
	}
}

func TestTokenHashTakenIsPlainRefusal(t *testing.T) {
	f := newStoreFixture(t)
	a := f.device("a")
	twin, err := domain.NewDevice(asDeviceID("b"), "cam", "", a.TokenHash(), f.now)
	f.must(err)
	if err := f.dev.Create(t.Context(), twin, domain.AuditRecord{}); !errors.Is(err, errTokenTaken) || errors.Is(err, domain.ErrDeviceExists) {
		t.Errorf("create with a taken hash: err = %v, want errTokenTaken only", err)
	}
	// Rotating a token to its own hash is no conflict.
	if _, err := f.dev.Update(t.Context(), a.ID(), func(d *domain.Device) error { d.RotateToken(a.TokenHash()); return nil }, domain.AuditRecord{}); err != nil {
		t.Errorf("keeping its own hash: %v", err)
	}
	// After a rotation, the old hash is free for another device.
	_, h, err := domain.NewDeviceToken()
	f.must(err)
	_, err = f.dev.Update(t.Context(), a.ID(), func(d *domain.Device) error { d.RotateToken(h); return nil }, domain.AuditRecord{})
	f.must(err)
	f.must(f.dev.Create(t.Context(), twin, domain.AuditRecord{}))
	got, err := f.tk.CheckView(t.Context(), a.TokenHash())
	f.must(err)
	if got.Device.ID().String() != "b" {
		t.Errorf("the freed hash finds %q, want b", got.Device.ID())
	}
}

// onActive adapts a function of the active task alone (nil if none) to
// ReplaceActive.
func onActive(fn func(active *domain.Task) (*domain.Task, error)) func(application.TaskState) (*domain.Task, error) {
	return func(st application.TaskState) (*domain.Task, error) {
		if st.Active == nil {
			return fn(nil)
		}
		return fn(&st.Active.Task)
	}
}
