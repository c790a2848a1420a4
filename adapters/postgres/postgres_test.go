package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/bootstrap"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// env is one test's database with the repositories on it.
type env struct {
	db        *sqlx.DB
	url       string
	devices   *postgres.DeviceRepository
	firmwares *postgres.FirmwareRepository
	rollouts  *postgres.RolloutRepository
	tasks     *postgres.TaskRepository
	now       time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	db, url := testenv.PostgresDB(t)
	repos, err := postgres.NewRepositories(db)
	if err != nil {
		t.Fatal(err)
	}
	return &env{
		db: db, url: url,
		devices:   repos.Devices,
		firmwares: repos.Firmwares,
		rollouts:  repos.Rollouts,
		tasks:     repos.Tasks,
		// Microseconds, as stored: values read back compare equal.
		now: time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC),
	}
}

func (e *env) device(t *testing.T, id, model string) domain.Device {
	t.Helper()
	_, h, err := domain.NewDeviceToken()
	if err != nil {
		t.Fatal(err)
	}
	d, err := domain.NewDevice(asDeviceID(id), model, "1.0.0", h, e.now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.devices.Create(context.Background(), d, domain.AuditRecord{}); err != nil {
		t.Fatalf("creating device: %v", err)
	}
	return d
}

func (e *env) firmware(t *testing.T, model, version string) domain.Firmware {
	t.Helper()
	f, err := domain.NewFirmware(domain.UUIDOf(uuid.New()), domain.FirmwareSpec{
		Model: model, Version: version, URL: "https://fw.example/" + model + "/" + version + ".bin",
		SizeBytes: 1 << 20, SHA256: strings.Repeat("ab", 32),
	}, e.now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.firmwares.Create(context.Background(), f, domain.AuditRecord{}); err != nil {
		t.Fatalf("creating firmware: %v", err)
	}
	return f
}

func (e *env) rollout(t *testing.T, f domain.Firmware, pct int) domain.Rollout {
	t.Helper()
	r, err := domain.NewRollout(domain.UUIDOf(uuid.New()), f, domain.RolloutSpec{Percentage: pct}, e.now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rollouts.Create(context.Background(), r, domain.AuditRecord{}); err != nil {
		t.Fatalf("creating rollout: %v", err)
	}
	return r
}

// offer publishes a firmware with a 100% rollout.
func (e *env) offer(t *testing.T, model, version string) domain.Offer {
	t.Helper()
	f := e.firmware(t, model, version)
	return domain.Offer{Firmware: f, Rollout: e.rollout(t, f, 100)}
}

func (e *env) newTask(t *testing.T, deviceID string, o domain.Offer) domain.Task {
	t.Helper()
	tk, err := domain.NewTask(asUUID(uuid.NewString()), asDeviceID(deviceID), o, 1, e.now)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// createTask stores a new active task for the device (the device must have none).
func (e *env) createTask(t *testing.T, deviceID string, o domain.Offer) domain.Task {
	t.Helper()
	tk := e.newTask(t, deviceID, o)
	got, created, err := application.ReplaceActive(context.Background(), e.tasks, asDeviceID(deviceID), onActive(func(active *domain.Task) (*domain.Task, error) {
		if active != nil {
			return nil, fmt.Errorf("device %s already has active task %s", deviceID, active.ID())
		}
		return &tk, nil
	}), nil)
	if err != nil || !created {
		t.Fatalf("creating task: created=%v err=%v", created, err)
	}
	return got
}

func (e *env) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.Get(&n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// checkFn is what a device check does with the active task: reuse a task
// for the target, supersede a pending task for another firmware, keep a
// started one, create one when there is none.
func checkFn(deviceID string, target domain.Offer, now time.Time) func(application.TaskState) (*domain.Task, error) {
	return func(st application.TaskState) (*domain.Task, error) {
		if st.Active != nil {
			active := &st.Active.Task
			if active.FirmwareID() == target.Firmware.ID() || active.Status() != domain.TaskPending {
				return nil, nil // reuse, or keep a started task
			}
			if err := active.Cancel(domain.CodeSuperseded, "superseded", now); err != nil {
				return nil, err
			}
		}
		tk, err := domain.NewTask(asUUID(uuid.NewString()), asDeviceID(deviceID), target, 1, now)
		if err != nil {
			return nil, err
		}
		return &tk, nil
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

// try captures a (value, error) pair so that one expression can both make
// a call and fail the test on its error: try(repo.Get(ctx, id)).must(t).
func try[T any](v T, err error) result[T] { return result[T]{v, err} }

type result[T any] struct {
	v   T
	err error
}

func (r result[T]) must(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func TestDevices(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d := e.device(t, "cam-1", "cam.v2")

	got := try(e.devices.Get(ctx, asDeviceID("cam-1"))).must(t)
	if got.ID().String() != "cam-1" || got.Model() != "cam.v2" || got.CurrentVersion().String() != "1.0.0" ||
		got.TokenHash() != d.TokenHash() || !got.CreatedAt().Equal(e.now) || !got.LastSeenAt().IsZero() {
		t.Fatalf("got %+v, want %+v", got, d)
	}
	if err := e.devices.Create(ctx, d, domain.AuditRecord{}); !errors.Is(err, domain.ErrDeviceExists) {
		t.Fatalf("duplicate create: %v, want ErrDeviceExists", err)
	}
	byToken := try(e.tasks.CheckView(ctx, d.TokenHash())).must(t).Device
	if byToken.ID().String() != "cam-1" {
		t.Fatalf("by token: %s", byToken.ID())
	}
	for _, id := range []string{"nobody", "", "bad id", "nul\x00", string([]byte{0xff, 0xfe}), strings.Repeat("x", 65)} {
		if _, err := e.devices.Get(ctx, asDeviceID(id)); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", id, err)
		}
		if _, err := e.devices.Update(ctx, asDeviceID(id), func(*domain.Device) error { return nil }, domain.AuditRecord{}); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("Update(%q): %v, want ErrNotFound", id, err)
		}
		// A device carries a typed id: one that breaks the rule cannot
		// be made, so only an unknown id and the zero one reach RecordSeen.
		if asDeviceID(id).IsZero() && id != "" {
			continue
		}
		if err := e.devices.RecordSeen(ctx, unseen(id), domain.MustParseVersion("1.0.0"), e.now); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("RecordSeen(%q): %v, want ErrNotFound", id, err)
		}
	}
	if _, err := e.tasks.CheckView(ctx, domain.HashToken("nope")); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown token: %v", err)
	}

	// Rotating the token: the old hash stops finding the device at once.
	_, newHash, _ := domain.NewDeviceToken()
	rotated := try(e.devices.Update(ctx, asDeviceID("cam-1"), func(d *domain.Device) error { d.RotateToken(newHash); return nil }, domain.AuditRecord{})).must(t)
	if rotated.TokenHash() != newHash {
		t.Fatal("Update did not return the rotated device")
	}
	if _, err := e.tasks.CheckView(ctx, d.TokenHash()); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("old token still works: %v", err)
	}
	boom := errors.New("boom")
	if _, err := e.devices.Update(ctx, asDeviceID("cam-1"), func(d *domain.Device) error { d.RotateToken(d.TokenHash()); return boom }, domain.AuditRecord{}); err != boom {
		t.Fatalf("fn's error must come back as is, got %v", err)
	}

	// RecordSeen: newest report wins, whatever the order of arrival.
	t1, t2 := e.now.Add(time.Minute), e.now.Add(2*time.Minute)
	if err := e.devices.RecordSeen(ctx, unseen("cam-1"), domain.MustParseVersion("1.2.0+b7"), t2); err != nil {
		t.Fatal(err)
	}
	if err := e.devices.RecordSeen(ctx, unseen("cam-1"), domain.MustParseVersion("1.1.0"), t1); err != nil {
		t.Fatal(err)
	}
	got = try(e.devices.Get(ctx, asDeviceID("cam-1"))).must(t)
	if got.CurrentVersion().String() != "1.2.0+b7" || !got.LastSeenAt().Equal(t2) {
		t.Fatalf("after RecordSeen: %s at %s", got.CurrentVersion(), got.LastSeenAt())
	}
	// A device registered without a version stores none.
	nv, err := domain.NewDevice(asDeviceID("cam-2"), "cam.v2", "", newHashFor(t), e.now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.devices.Create(ctx, nv, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	if got := try(e.devices.Get(ctx, asDeviceID("cam-2"))).must(t); !got.CurrentVersion().IsZero() {
		t.Fatalf("version: %q", got.CurrentVersion())
	}
}

func newHashFor(t *testing.T) domain.TokenHash {
	_, h, err := domain.NewDeviceToken()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestTimesAreStoredInUTCMicroseconds(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	local := time.FixedZone("UTC+8", 8*3600)
	at := time.Date(2025, 3, 1, 20, 0, 0, 123456789, local) // nanoseconds, not UTC
	d, err := domain.NewDevice(asDeviceID("tz-1"), "m", "", newHashFor(t), at)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.devices.Create(ctx, d, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	got := try(e.devices.Get(ctx, asDeviceID("tz-1"))).must(t)
	want := time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC)
	if got.CreatedAt() != want { // same instant, location and precision
		t.Fatalf("created_at = %v, want %v", got.CreatedAt(), want)
	}
}

func TestFirmwares(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	spec := domain.FirmwareSpec{
		Model: "spk", Version: "2.0.0-rc.1+build.7", URL: "https://fw.example/spk.bin", SizeBytes: 42,
		SHA256: strings.Repeat("0f", 32), SHA1: strings.Repeat("a", 40), MD5: strings.Repeat("b", 32),
		Signature: "sig==", ReleaseNotes: "fixes", Mandatory: true, MinSourceVersion: "1.5.0",
	}
	f, err := domain.NewFirmware(domain.UUIDOf(uuid.New()), spec, e.now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.firmwares.Create(ctx, f, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	got := try(e.firmwares.Get(ctx, f.ID())).must(t)
	if got.Spec() != spec || got.Status() != domain.FirmwareReleased || !got.CreatedAt().Equal(e.now) {
		t.Fatalf("got %+v", got.Spec())
	}
	// Upper-case ids find the same firmware; the returned id is canonical.
	if got := try(e.firmwares.Get(ctx, asUUID(strings.ToUpper(f.ID().String())))).must(t); got.ID() != f.ID() {
		t.Fatalf("id %s", got.ID())
	}

	// Same version with other build metadata: the same version.
	spec2 := spec
	spec2.Version = "2.0.0-rc.1+build.8"
	dup, _ := domain.NewFirmware(domain.UUIDOf(uuid.New()), spec2, e.now)
	if err := e.firmwares.Create(ctx, dup, domain.AuditRecord{}); !errors.Is(err, domain.ErrFirmwareExists) {
		t.Fatalf("duplicate version: %v, want ErrFirmwareExists", err)
	}
	for _, id := range []string{"not-a-uuid", "", uuid.NewString(), "'; DROP TABLE firmwares; --"} {
		if _, err := e.firmwares.Get(ctx, asUUID(id)); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", id, err)
		}
		if _, err := e.firmwares.Update(ctx, asUUID(id), func(*domain.Firmware) error { return nil }, nil); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("Update(%q): %v, want ErrNotFound", id, err)
		}
	}

	// Optional fields left empty come back empty.
	e.now = e.now.Add(time.Second)
	plain := e.firmware(t, "spk", "2.1.0")
	if got := try(e.firmwares.Get(ctx, plain.ID())).must(t).Spec(); got != plain.Spec() {
		t.Fatalf("got %+v, want %+v", got, plain.Spec())
	}
	e.now = e.now.Add(time.Second)
	other := e.firmware(t, "cam", "1.0.0")

	list := try(e.firmwares.List(ctx, "spk")).must(t)
	if len(list) != 2 || list[0].ID() != plain.ID() || list[1].ID() != f.ID() {
		t.Fatalf("List(spk) = %v, want newest first", ids(list))
	}
	if all := try(e.firmwares.List(ctx, "")).must(t); len(all) != 3 || all[0].ID() != other.ID() {
		t.Fatalf("List() = %v", ids(all))
	}
	if none := try(e.firmwares.List(ctx, "no such model!")).must(t); none == nil || len(none) != 0 {
		t.Fatalf("List(bad model) = %v", none)
	}

	revoked := try(e.firmwares.Update(ctx, f.ID(), func(f *domain.Firmware) error { f.Revoke(e.now.Add(time.Hour)); return nil }, nil)).must(t)
	if !revoked.Revoked() || !revoked.UpdatedAt().Equal(e.now.Add(time.Hour)) {
		t.Fatalf("revoke returned %v", revoked.Status())
	}
	if got := try(e.firmwares.Get(ctx, f.ID())).must(t); !got.Revoked() {
		t.Fatal("revoke not stored")
	}
}

func ids(fs []domain.Firmware) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Model() + "@" + f.Version().String()
	}
	return out
}

func TestRolloutsAndOffers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	f1 := e.firmware(t, "box", "1.1.0")
	f2 := e.firmware(t, "box", "1.2.0")
	f3 := e.firmware(t, "box", "1.3.0")
	fOther := e.firmware(t, "cam", "9.0.0")

	thr, ms, ma := 10, 5, 2
	r1, err := domain.NewRollout(domain.UUIDOf(uuid.New()), f1, domain.RolloutSpec{Percentage: 50, MaxAttempts: &ma, FailureThresholdPercent: &thr, MinSample: &ms}, e.now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rollouts.Create(ctx, r1, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	got := try(e.rollouts.Get(ctx, r1.ID())).must(t)
	if got.MaxAttempts() != 2 || got.MinSample() != 5 || *got.FailureThresholdPercent() != 10 || got.Percentage() != 50 {
		t.Fatalf("got %+v", got.Record())
	}
	r2 := e.rollout(t, f2, 100)
	r3 := e.rollout(t, f3, 100)
	e.rollout(t, fOther, 100)

	// Unknown firmware: not found, whether or not the id is a UUID.
	ghost, _ := domain.NewFirmware(domain.UUIDOf(uuid.New()), f1.Spec(), e.now)
	rg, _ := domain.NewRollout(domain.UUIDOf(uuid.New()), ghost, domain.RolloutSpec{Percentage: 1}, e.now)
	if err := e.rollouts.Create(ctx, rg, domain.AuditRecord{}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("rollout of unknown firmware: %v, want ErrNotFound", err)
	}
	for _, id := range []string{"not-a-uuid", uuid.NewString()} {
		if _, err := e.rollouts.Get(ctx, asUUID(id)); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("Get(%q): %v", id, err)
		}
	}

	paused := try(application.UpdateRollout(ctx, e.tasks, r2.ID(), func(r *domain.Rollout, _ domain.Firmware) error {
		return r.ChangeStatus(domain.RolloutPaused, f2, e.now.Add(time.Minute))
	}, nil)).must(t)
	if paused.Status() != domain.RolloutPaused || paused.PausedReason() != domain.PausedManual {
		t.Fatalf("paused: %+v", paused.Record())
	}
	if got := try(e.rollouts.Get(ctx, r2.ID())).must(t); !got.Record().Equal(paused.Record()) {
		t.Fatalf("stored %+v, returned %+v", got.Record(), paused.Record())
	}
	if _, err := application.UpdateRollout(ctx, e.tasks, r3.ID(), func(r *domain.Rollout, _ domain.Firmware) error {
		return r.ChangeStatus(domain.RolloutStatus{}, f3, e.now)
	}, nil); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("fn's error: %v", err)
	}
	try(e.firmwares.Update(ctx, f3.ID(), func(f *domain.Firmware) error { f.Revoke(e.now); return nil }, nil)).must(t)

	// Only r1 remains: r2 is paused, r3's firmware revoked, the last is another model.
	offers := try(e.rollouts.Offers(ctx, "box")).must(t)
	if len(offers) != 1 || offers[0].Rollout.ID() != r1.ID() || offers[0].Firmware.ID() != f1.ID() {
		t.Fatalf("offers: %+v", offers)
	}
	try(application.UpdateRollout(ctx, e.tasks, r2.ID(), func(r *domain.Rollout, _ domain.Firmware) error {
		return r.ChangeStatus(domain.RolloutActive, f2, e.now)
	}, nil)).must(t)
	offers = try(e.rollouts.Offers(ctx, "box")).must(t)
	if len(offers) != 2 || offers[0].Firmware.ID() != f2.ID() {
		t.Fatalf("offers must come highest version first: %+v", offers)
	}
	if none := try(e.rollouts.Offers(ctx, "nobody")).must(t); none == nil || len(none) != 0 {
		t.Fatalf("offers of an unknown model: %v", none)
	}
}

func TestTaskReferencesMustExist(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	o := e.offer(t, "m", "2.0.0")
	e.device(t, "d1", "m")

	// Unknown device.
	tk := e.newTask(t, "ghost", o)
	if _, _, err := application.ReplaceActive(ctx, e.tasks, asDeviceID("ghost"), onActive(func(*domain.Task) (*domain.Task, error) { return &tk, nil }), nil); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown device: %v, want ErrNotFound", err)
	}
	// Unknown rollout, and a rollout of another firmware.
	other := e.offer(t, "m", "3.0.0")
	for name, off := range map[string]domain.Offer{
		"unknown rollout":  {Firmware: o.Firmware, Rollout: try(domain.NewRollout(domain.UUIDOf(uuid.New()), o.Firmware, domain.RolloutSpec{Percentage: 1}, e.now)).must(t)},
		"mismatched pair":  {Firmware: o.Firmware, Rollout: other.Rollout},
		"unknown firmware": {Firmware: try(domain.NewFirmware(domain.UUIDOf(uuid.New()), o.Firmware.Spec(), e.now)).must(t), Rollout: o.Rollout},
	} {
		tk := e.newTask(t, "d1", off)
		if _, _, err := application.ReplaceActive(ctx, e.tasks, asDeviceID("d1"), onActive(func(*domain.Task) (*domain.Task, error) { return &tk, nil }), nil); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM tasks`); n != 0 {
		t.Fatalf("%d tasks stored", n)
	}
	for _, id := range []string{"not-a-uuid", uuid.NewString()} {
		if _, err := e.tasks.Get(ctx, asUUID(id)); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("Get(%q): %v", id, err)
		}
		if _, err := application.UpdateTask(ctx, e.tasks, asUUID(id), func(*domain.Task) error { return nil }); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("Update(%q): %v", id, err)
		}
		ev := try(domain.NewEvent("e1", "downloading", nil, "", "")).must(t)
		if _, err := application.ApplyEvent(ctx, e.tasks, asUUID(id), ev, func(*domain.Task, *domain.Event) (bool, error) { return true, nil }, nil); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("ApplyEvent(%q): %v", id, err)
		}
	}
	if _, err := e.tasks.Active(ctx, asDeviceID("d1")); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("Active with no task: %v", err)
	}
}

func TestReplaceActiveLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.device(t, "d1", "m")
	o1 := e.offer(t, "m", "2.0.0")
	o2 := e.offer(t, "m", "3.0.0")

	// No active task, nothing to insert: zero task.
	res, created, err := application.ReplaceActive(ctx, e.tasks, asDeviceID("d1"), onActive(func(a *domain.Task) (*domain.Task, error) {
		if a != nil {
			t.Errorf("active %v", a.ID())
		}
		return nil, nil
	}), nil)
	if err != nil || created || !res.ID().IsZero() {
		t.Fatalf("empty: %v %v %v", res.ID(), created, err)
	}

	first, created, err := application.ReplaceActive(ctx, e.tasks, asDeviceID("d1"), checkFn("d1", o1, e.now), nil)
	if err != nil || !created || first.ActionID() <= 0 || first.Status() != domain.TaskPending {
		t.Fatalf("create: %+v %v %v", first.Record(), created, err)
	}
	if got := try(e.tasks.Get(ctx, first.ID())).must(t); got.Record() != first.Record() {
		t.Fatalf("stored %+v, returned %+v", got.Record(), first.Record())
	}
	// Reuse.
	again, created, err := application.ReplaceActive(ctx, e.tasks, asDeviceID("d1"), checkFn("d1", o1, e.now), nil)
	if err != nil || created || again.ID() != first.ID() {
		t.Fatalf("reuse: %v %v %v", again.ID(), created, err)
	}
	// Supersede the pending task.
	second, created, err := application.ReplaceActive(ctx, e.tasks, asDeviceID("d1"), checkFn("d1", o2, e.now.Add(time.Second)), nil)
	if err != nil || !created || second.ID() == first.ID() || second.ActionID() <= first.ActionID() {
		t.Fatalf("supersede: %v %v %v", second.ID(), created, err)
	}
	old := try(e.tasks.Get(ctx, first.ID())).must(t)
	if old.Status() != domain.TaskCancelled || old.ErrorCode() != domain.CodeSuperseded {
		t.Fatalf("superseded task: %+v", old.Record())
	}
	if active := try(e.tasks.Active(ctx, asDeviceID("d1"))).must(t); active.ID() != second.ID() {
		t.Fatalf("active %s, want %s", active.ID(), second.ID())
	}
	// fn's error: nothing written.
	boom := errors.New("boom")
	if _, _, err := application.ReplaceActive(ctx, e.tasks, asDeviceID("d1"), onActive(func(a *domain.Task) (*domain.Task, error) {
		_ = a.Cancel(domain.CodeSuperseded, "x", e.now)
		return nil, boom
	}), nil); err != boom {
		t.Fatalf("fn's error: %v", err)
	}
	// A cancel with nothing inserted returns the task as fn left it.
	res, created, err = application.ReplaceActive(ctx, e.tasks, asDeviceID("d1"), onActive(func(a *domain.Task) (*domain.Task, error) {
		return nil, a.Cancel(domain.CodeFirmwareRevoked, "revoked", e.now.Add(2*time.Second))
	}), nil)
	if err != nil || created || res.ID() != second.ID() || res.Status() != domain.TaskCancelled {
		t.Fatalf("cancel only: %+v %v %v", res.Record(), created, err)
	}
	if got := try(e.tasks.Get(ctx, second.ID())).must(t); got.Record() != res.Record() {
		t.Fatalf("stored %+v, returned %+v", got.Record(), res.Record())
	}
}

// The store alone keeps one active task per device: 200 concurrent
// ReplaceActive calls with no application lock, each wanting to insert.
func TestReplaceActiveRace(t *testing.T) {
	e := newEnv(t)
	e.device(t, "racer", "m")
	o := e.offer(t, "m", "2.0.0")

	const n = 200
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		created atomic.Int32
		ids     sync.Map
		errs    = make(chan error, n)
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tk, c, err := application.ReplaceActive(context.Background(), e.tasks, asDeviceID("racer"), onActive(func(active *domain.Task) (*domain.Task, error) {
				// Each caller wants its own new task, whatever it sees:
				// only the index can stop it.
				nt, err := domain.NewTask(asUUID(uuid.NewString()), asDeviceID("racer"), o, 1, e.now)
				return &nt, err
			}), nil)
			if err != nil {
				errs <- err
				return
			}
			if c {
				created.Add(1)
			}
			ids.Store(tk.ID(), true)
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("ReplaceActive: %v", err)
	}
	if c := created.Load(); c != 1 {
		t.Errorf("%d tasks created, want 1", c)
	}
	distinct := 0
	ids.Range(func(any, any) bool { distinct++; return true })
	if distinct != 1 {
		t.Errorf("callers got %d different tasks, want 1", distinct)
	}
	if got := e.count(t, `SELECT count(*) FROM tasks WHERE device_id = 'racer' AND status IN ('pending', 'downloading', 'downloaded', 'installing')`); got != 1 {
		t.Errorf("%d active tasks, want 1", got)
	}
	if got := e.count(t, `SELECT count(*) FROM tasks`); got != 1 {
		t.Errorf("%d tasks stored, want 1", got)
	}
}

// Concurrent checks that all supersede the same pending task: one cancels
// it and creates the new task; the others, blocked on its row lock, find it
// no longer active after the wait and end up with the winner's task.
func TestReplaceActiveSupersedeRace(t *testing.T) {
	e := newEnv(t)
	e.device(t, "sup", "m")
	o1 := e.offer(t, "m", "2.0.0")
	o2 := e.offer(t, "m", "3.0.0")
	old := e.createTask(t, "sup", o1)

	const n = 60
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		created atomic.Int32
		results = make(chan string, n)
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tk, c, err := application.ReplaceActive(context.Background(), e.tasks, asDeviceID("sup"), checkFn("sup", o2, e.now.Add(time.Second)), nil)
			if err != nil {
				t.Errorf("ReplaceActive: %v", err)
				return
			}
			if c {
				created.Add(1)
			}
			results <- tk.ID().String()
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	if c := created.Load(); c != 1 {
		t.Errorf("%d tasks created, want 1", c)
	}
	active := try(e.tasks.Active(context.Background(), asDeviceID("sup"))).must(t)
	if active.FirmwareID() != o2.Firmware.ID() {
		t.Errorf("active task is for %s, want the new firmware", active.FirmwareID())
	}
	for id := range results {
		if id != active.ID().String() {
			t.Errorf("a caller got task %s, want the active %s", id, active.ID())
		}
	}
	if got := try(e.tasks.Get(context.Background(), old.ID())).must(t); got.Status() != domain.TaskCancelled || got.ErrorCode() != domain.CodeSuperseded {
		t.Errorf("old task: %s %s", got.Status(), got.ErrorCode())
	}
	if got := e.count(t, `SELECT count(*) FROM tasks`); got != 2 {
		t.Errorf("%d tasks stored, want 2", got)
	}
}

func TestApplyEvent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.device(t, "ev", "m")
	o := e.offer(t, "m", "2.0.0")
	tk := e.createTask(t, "ev", o)
	apply := func(ev domain.Event, at time.Time) func(*domain.Task, *domain.Event) (bool, error) {
		return func(t *domain.Task, prior *domain.Event) (bool, error) { return t.ApplyEvent(ev, prior, at) }
	}
	p := 40
	ev1 := try(domain.NewEvent("e1", "downloading", &p, "", "")).must(t)
	got := try(application.ApplyEvent(ctx, e.tasks, tk.ID(), ev1, apply(ev1, e.now.Add(time.Second)), nil)).must(t)
	if got.Status() != domain.TaskDownloading || got.Progress() != 40 || !got.UpdatedAt().Equal(e.now.Add(time.Second)) {
		t.Fatalf("after e1: %+v", got.Record())
	}
	if stored := try(e.tasks.Get(ctx, tk.ID())).must(t); stored.Record() != got.Record() {
		t.Fatalf("stored %+v, returned %+v", stored.Record(), got.Record())
	}
	// A replay: nothing changes, the task comes back as it is.
	again := try(application.ApplyEvent(ctx, e.tasks, tk.ID(), ev1, apply(ev1, e.now.Add(time.Hour)), nil)).must(t)
	if again.Record() != got.Record() {
		t.Fatalf("replay changed the task: %+v", again.Record())
	}
	// The same id, another body.
	q := 50
	ev1b := try(domain.NewEvent("e1", "downloading", &q, "", "")).must(t)
	if _, err := application.ApplyEvent(ctx, e.tasks, tk.ID(), ev1b, apply(ev1b, e.now), nil); !errors.Is(err, domain.ErrIdempotencyConflict) {
		t.Fatalf("conflicting reuse: %v", err)
	}
	// Going back is refused and nothing is recorded.
	ev2 := try(domain.NewEvent("e2", "downloading", new(int), "", "")).must(t)
	if _, err := application.ApplyEvent(ctx, e.tasks, tk.ID(), ev2, apply(ev2, e.now), nil); !errors.Is(err, domain.ErrInvalidTransition) {
		t.Fatalf("progress down: %v", err)
	}
	if n := e.count(t, `SELECT count(*) FROM task_events WHERE task_id = $1`, tk.ID().String()); n != 1 {
		t.Fatalf("%d events recorded, want 1", n)
	}
}

// The same event sent 50 times at once is applied once.
func TestApplyEventConcurrentSameID(t *testing.T) {
	e := newEnv(t)
	e.device(t, "ev", "m")
	o := e.offer(t, "m", "2.0.0")
	tk := e.createTask(t, "ev", o)
	p := 10
	ev := try(domain.NewEvent("same", "downloading", &p, "", "")).must(t)

	const n = 50
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		changed atomic.Int32
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got, err := application.ApplyEvent(context.Background(), e.tasks, tk.ID(), ev, func(t *domain.Task, prior *domain.Event) (bool, error) {
				c, err := t.ApplyEvent(ev, prior, e.now.Add(time.Second))
				if c {
					changed.Add(1)
				}
				return c, err
			}, nil)
			if err != nil {
				t.Errorf("ApplyEvent: %v", err)
				return
			}
			if got.Status() != domain.TaskDownloading || got.Progress() != 10 {
				t.Errorf("got %s %d", got.Status(), got.Progress())
			}
		}()
	}
	close(start)
	wg.Wait()
	if c := changed.Load(); c != 1 {
		t.Errorf("applied %d times, want 1", c)
	}
	if got := e.count(t, `SELECT count(*) FROM task_events WHERE task_id = $1`, tk.ID().String()); got != 1 {
		t.Errorf("%d events recorded, want 1", got)
	}
}

// A context cancelled while the transaction runs (a lost lock) rolls back:
// nothing half-written, and the caller gets the error.
func TestCancelledContextRollsBack(t *testing.T) {
	e := newEnv(t)
	e.device(t, "cx", "m")
	o1 := e.offer(t, "m", "2.0.0")
	o2 := e.offer(t, "m", "3.0.0")
	old := e.createTask(t, "cx", o1)

	ctx, cancel := context.WithCancel(context.Background())
	supersede := checkFn("cx", o2, e.now)
	_, _, err := application.ReplaceActive(ctx, e.tasks, asDeviceID("cx"), func(st application.TaskState) (*domain.Task, error) {
		ins, err := supersede(st) // cancels the old task, returns a new one
		cancel()                  // the lock is lost before the writes
		return ins, err
	}, nil)
	if err == nil {
		t.Fatal("ReplaceActive committed with a cancelled context")
	}
	if got := try(e.tasks.Get(context.Background(), old.ID())).must(t); got.Status() != domain.TaskPending {
		t.Fatalf("old task is %s: a half-written supersede", got.Status())
	}
	if n := e.count(t, `SELECT count(*) FROM tasks`); n != 1 {
		t.Fatalf("%d tasks stored, want 1", n)
	}

	ctx, cancel = context.WithCancel(context.Background())
	_, err = application.UpdateTask(ctx, e.tasks, old.ID(), func(tk *domain.Task) error {
		cancel()
		return tk.Cancel(domain.CodeSuperseded, "x", e.now)
	})
	if err == nil {
		t.Fatal("Update committed with a cancelled context")
	}
	if got := try(e.tasks.Get(context.Background(), old.ID())).must(t); got.Status() != domain.TaskPending {
		t.Fatalf("old task is %s after a cancelled Update", got.Status())
	}

	ctx, cancel = context.WithCancel(context.Background())
	_, err = e.devices.Update(ctx, asDeviceID("cx"), func(d *domain.Device) error {
		cancel()
		d.RotateToken(newHashFor(t))
		return nil
	}, domain.AuditRecord{})
	if err == nil {
		t.Fatal("device Update committed with a cancelled context")
	}
}

func TestStatsAndFailedCounts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	o1 := e.offer(t, "m", "2.0.0")
	o2 := e.offer(t, "m", "3.0.0")
	finish := func(deviceID string, o domain.Offer, status string) domain.Task {
		tk := e.createTask(t, deviceID, o)
		ev := try(domain.NewEvent("fin-"+tk.ID().String(), status, nil, "E", "m")).must(t)
		return try(application.ApplyEvent(ctx, e.tasks, tk.ID(), ev, func(t *domain.Task, prior *domain.Event) (bool, error) {
			return t.ApplyEvent(ev, prior, e.now)
		}, nil)).must(t)
	}
	for i := 0; i < 3; i++ {
		e.device(t, fmt.Sprintf("d%d", i), "m")
	}
	finish("d0", o1, "failed")
	finish("d0", o1, "failed")
	finish("d0", o2, "failed")
	finish("d0", o1, "succeeded")
	finish("d1", o1, "failed")
	e.createTask(t, "d1", o1)
	e.createTask(t, "d2", o1)
	if _, _, err := application.ReplaceActive(ctx, e.tasks, asDeviceID("d2"), checkFn("d2", o2, e.now), nil); err != nil { // cancels d2's o1 task
		t.Fatal(err)
	}

	stats := try(e.tasks.RolloutStatsSince(ctx, o1.Rollout.ID(), time.Time{})).must(t)
	// Each device once (domain.CountsOver): d0 by its last outcome on o1,
	// d1 by its failure (its retry is in flight), d2 by its cancel.
	want := domain.TaskStats{Succeeded: 1, Failed: 1, Cancelled: 1}
	if stats != want {
		t.Fatalf("stats %+v, want %+v", stats, want)
	}
	if s := try(e.tasks.RolloutStatsSince(ctx, asUUID("not-a-uuid"), time.Time{})).must(t); s != (domain.TaskStats{}) {
		t.Fatalf("stats of nothing: %+v", s)
	}
	fc := try(e.tasks.CheckViewOf(ctx, asDeviceID("d0"))).must(t).Tasks.Failed
	if len(fc) != 2 || fc[o1.Firmware.ID().String()] != 2 || fc[o2.Firmware.ID().String()] != 1 {
		t.Fatalf("failed counts %v", fc)
	}
	if fc := try(e.tasks.CheckViewOf(ctx, asDeviceID("d2"))).must(t).Tasks.Failed; fc == nil || len(fc) != 0 {
		t.Fatalf("failed counts of d2: %v", fc)
	}

	// The check's one-round-trip read agrees with Active.
	for _, id := range []string{"d0", "d1", "d2", "nobody", "bad\x00id"} {
		v, err := e.tasks.CheckViewOf(ctx, asDeviceID(id))
		if id == "nobody" || id == "bad\x00id" {
			if !errors.Is(err, domain.ErrNotFound) {
				t.Errorf("%q: %v, want not found", id, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		active := v.Tasks.Active
		if v.Device.ID().String() != id {
			t.Errorf("%q: device %q", id, v.Device.ID())
		}
		wantActive, err := e.tasks.Active(ctx, asDeviceID(id))
		switch {
		case errors.Is(err, domain.ErrNotFound):
			if active != nil {
				t.Errorf("%q: active %v, want none", id, active.ID())
			}
		case err != nil:
			t.Fatal(err)
		case active == nil || active.Record() != wantActive.Record():
			t.Errorf("%q: active %+v, want %+v", id, active, wantActive.Record())
		}
	}
}

func TestListKeysetPagination(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	o1 := e.offer(t, "m", "2.0.0")
	o2 := e.offer(t, "m", "3.0.0")
	var all []domain.Task
	for i := 0; i < 7; i++ {
		id := fmt.Sprintf("dev-%d", i)
		e.device(t, id, "m")
		o := o1
		if i%2 == 1 {
			o = o2
		}
		if i == 3 || i == 4 {
			e.now = e.now.Add(time.Second) // some share a timestamp: the id breaks the tie
		}
		all = append(all, e.createTask(t, id, o))
	}
	var pages [][]domain.Task
	f := ports.TaskFilter{Limit: 3}
	for {
		page := try(e.tasks.List(ctx, f)).must(t)
		if len(page) == 0 {
			break
		}
		pages = append(pages, page)
		last := page[len(page)-1]
		f.After = &ports.TaskCursor{CreatedAt: last.CreatedAt(), ID: last.ID()}
	}
	var seen []domain.Task
	for _, p := range pages {
		seen = append(seen, p...)
	}
	if len(pages) != 3 || len(seen) != len(all) {
		t.Fatalf("%d pages, %d tasks; want 3 and %d", len(pages), len(seen), len(all))
	}
	for i := 1; i < len(seen); i++ {
		a, b := seen[i-1], seen[i]
		if a.CreatedAt().After(b.CreatedAt()) || (a.CreatedAt().Equal(b.CreatedAt()) && a.ID().String() >= b.ID().String()) {
			t.Fatalf("not in (created_at, id) order at %d", i)
		}
	}
	byRollout := try(e.tasks.List(ctx, ports.TaskFilter{RolloutID: o2.Rollout.ID(), Limit: 10})).must(t)
	if len(byRollout) != 3 {
		t.Fatalf("by rollout: %d", len(byRollout))
	}
	pending := domain.TaskPending
	byDevice := try(e.tasks.List(ctx, ports.TaskFilter{DeviceID: asDeviceID("dev-3"), Status: &pending, Limit: 10})).must(t)
	if len(byDevice) != 1 || byDevice[0].ID() != all[3].ID() {
		t.Fatalf("by device: %v", byDevice)
	}
	failed := domain.TaskFailed
	if none := try(e.tasks.List(ctx, ports.TaskFilter{Status: &failed})).must(t); none == nil || len(none) != 0 {
		t.Fatalf("failed: %v", none)
	}
	// Filter ids are typed (the application parses and refuses malformed
	// ones); unknown ones match nothing.
	for _, f := range []ports.TaskFilter{{DeviceID: asDeviceID("nobody")}, {RolloutID: asUUID(uuid.NewString())}} {
		if none := try(e.tasks.List(ctx, f)).must(t); len(none) != 0 {
			t.Fatalf("%+v: %v", f, none)
		}
	}
	// The cursor's id is typed (the application decodes and parses it):
	// the zero id stands before every id at the cursor's time, as in the
	// memory adapter.
	first := all[0]
	from := try(e.tasks.List(ctx, ports.TaskFilter{After: &ports.TaskCursor{CreatedAt: first.CreatedAt()}, Limit: len(all)})).must(t)
	if len(from) == 0 || from[0].CreatedAt().Before(first.CreatedAt()) {
		t.Fatalf("zero cursor id: %v", from)
	}
	for _, tk := range all {
		if tk.CreatedAt().Equal(first.CreatedAt()) && !slices.ContainsFunc(from, func(x domain.Task) bool { return x.ID() == tk.ID() }) {
			t.Fatalf("zero cursor id left out task %s created at the cursor's time", tk.ID())
		}
	}
}

func TestMigrateRoundTrip(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var out bytes.Buffer
	run := func(cmd string) string {
		t.Helper()
		out.Reset()
		if err := bootstrap.Migrate(ctx, e.db.DB, cmd, &out); err != nil {
			t.Fatalf("migrate %s: %v", cmd, err)
		}
		return out.String()
	}
	tables := func() int {
		return e.count(t, `SELECT count(*) FROM information_schema.tables
			WHERE table_schema = 'public' AND table_name IN ('devices', 'firmwares', 'rollouts', 'tasks', 'task_events')`)
	}
	if s := run("status"); !strings.Contains(s, "applied 00001_init.sql") {
		t.Fatalf("status: %q", s)
	}
	if s := run("up"); !strings.Contains(s, "up to date") {
		t.Fatalf("up on a migrated database: %q", s)
	}
	// Roll back every migration, newest first (each range adds its own).
	var s string
	for i := 0; i < 100 && !strings.Contains(s, "schema is now at version 0"); i++ {
		s = run("down")
	}
	if !strings.Contains(s, "rolled back 00001_init.sql") || tables() != 0 {
		t.Fatalf("down: %q, %d tables left", s, tables())
	}
	if s := run("status"); !strings.Contains(s, "pending 00001_init.sql") {
		t.Fatalf("status after down: %q", s)
	}
	if s := run("down"); !strings.Contains(s, "no migration to roll back") {
		t.Fatalf("down at version 0: %q", s)
	}
	if s := run("up"); !strings.Contains(s, "applied 00001_init.sql") || tables() != 5 {
		t.Fatalf("up: %q, %d tables", s, tables())
	}
	// The schema works after the round trip.
	e.device(t, "after", "m")
	if err := bootstrap.Migrate(ctx, e.db.DB, "sideways", &out); err == nil || !strings.Contains(err.Error(), `"sideways"`) {
		t.Fatalf("unknown command: %v", err)
	}
	// Migrate never closes the caller's pool.
	if err := e.db.PingContext(ctx); err != nil {
		t.Fatalf("pool closed by Migrate: %v", err)
	}
}

func TestOpenAndHealth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	db, cleanup, err := postgres.Open(postgres.Config{URL: postgres.DatabaseURL(e.url), MaxOpenConns: 2})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	hc := postgres.NewHealthCheck(db)
	if hc.Name() != "postgres" {
		t.Fatalf("name %q", hc.Name())
	}
	var _ ports.HealthCheck = hc
	if err := hc.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	cleanup()
	if err := hc.Check(ctx); err == nil {
		t.Fatal("Check passed on a closed pool")
	}

	if _, _, err := postgres.Open(postgres.Config{}); err == nil {
		t.Fatal("Open with no URL succeeded")
	}
	// Nothing listens on port 1.
	_, _, err = postgres.Open(postgres.Config{
		URL:         "postgres://ota:s3cret@127.0.0.1:1/fleetdb?sslmode=disable",
		PingTimeout: 2 * time.Second,
	})
	if err == nil || !strings.Contains(err.Error(), `"fleetdb"`) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("unreachable database: %v", err)
	}
	// A database that does not exist on a server that answers.
	_, _, err = postgres.Open(postgres.Config{URL: postgres.DatabaseURL(replaceDB(t, e.url, "no_such_db_x"))})
	if err == nil || !strings.Contains(err.Error(), `"no_such_db_x"`) {
		t.Fatalf("missing database: %v", err)
	}
}

func replaceDB(t *testing.T, u, name string) string {
	t.Helper()
	i := strings.LastIndex(u, "/")
	j := strings.Index(u[i:], "?")
	if j < 0 {
		return u[:i+1] + name
	}
	return u[:i+1] + name + u[i+j:]
}
