package application_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// fixedClock tells the same instant until moved.
type fixedClock struct{ now time.Time }

func (c *fixedClock) Now() time.Time { return c.now }

type fleetEnv struct {
	t       *testing.T
	clock   *fixedClock
	devices *application.Devices
	admin   *application.Admin
	fleet   *application.Fleet
}

func newFleetEnv(t *testing.T) *fleetEnv {
	t.Helper()
	clock := &fixedClock{now: time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)}
	svc := testenv.NewMemoryService(t, testenv.MemoryOptions{Clock: clock})
	devices, admin, fleet := svc.Devices, svc.Admin, svc.Fleet
	return &fleetEnv{t: t, clock: clock, devices: devices, admin: admin, fleet: fleet}
}

func (e *fleetEnv) publish(model, version string) domain.Firmware {
	e.t.Helper()
	fw, err := e.admin.PublishFirmware(context.Background(), testActor, domain.FirmwareSpec{
		Model: model, Version: version, URL: "https://files.example/" + model + "/" + version,
		SizeBytes: 10, SHA256: strings.Repeat("0f", 32),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return fw
}

func (e *fleetEnv) register(id, model, version string) {
	e.t.Helper()
	if _, err := e.admin.RegisterDevice(context.Background(), testActor, ports.RegisterDevice{DeviceID: id, Model: model, CurrentVersion: version}); err != nil {
		e.t.Fatal(err)
	}
}

// poll checks a device in at the clock's time minus ago.
func (e *fleetEnv) poll(id, model, version string, ago time.Duration) ports.CheckResult {
	e.t.Helper()
	saved := e.clock.now
	e.clock.now = saved.Add(-ago)
	defer func() { e.clock.now = saved }()
	ident, err := e.devices.IdentifyDevice(context.Background(), asDeviceID(id))
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := e.devices.Check(context.Background(), ports.CheckRequest{Device: ident, Model: model, CurrentVersion: version})
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

func TestFleetOverview(t *testing.T) {
	e := newFleetEnv(t)
	e.publish("cam", "1.0.0")
	e.publish("cam", "1.2.0+build.9")
	revoked := e.publish("cam", "2.0.0")
	if _, err := e.admin.RevokeFirmware(context.Background(), testActor, revoked.ID()); err != nil {
		t.Fatal(err)
	}
	e.publish("speaker", "0.9.0")

	for _, d := range []struct {
		id, version string
		ago         time.Duration
	}{
		{"c1", "1.2.0", time.Minute},            // newest, by precedence (build metadata ignored)
		{"c2", "1.2.0+other", 30 * time.Minute}, // the same version
		{"c3", "1.0.0", 2 * time.Hour},
		{"c4", "1.0.0", 30 * time.Hour},
		{"c5", "2.0.0", 10 * time.Minute}, // runs the revoked one: not "newest"
	} {
		e.register(d.id, "cam", "")
		e.poll(d.id, "cam", d.version, d.ago)
	}
	e.register("c6", "cam", "") // never polled, never reported

	got, err := e.fleet.FleetOverview(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Model != "cam" || got[1].Model != "speaker" {
		t.Fatalf("models %+v, want cam and speaker (firmware but no devices), by name", got)
	}
	cam := got[0]
	if cam.Devices != 6 || cam.PolledLastHour != 3 || cam.PolledLastDay != 4 {
		t.Errorf("cam: %d devices, %d polled last hour, %d last day; want 6, 3, 4", cam.Devices, cam.PolledLastHour, cam.PolledLastDay)
	}
	if cam.NewestVersion != "1.2.0+build.9" || cam.OnNewest != 2 {
		t.Errorf("cam newest %q with %d devices, want 1.2.0+build.9 (2.0.0 is revoked) with 2", cam.NewestVersion, cam.OnNewest)
	}
	want := []ports.VersionShare{{Version: "2.0.0", Devices: 1}, {Version: "1.2.0", Devices: 2}, {Version: "1.0.0", Devices: 2}, {Version: "", Devices: 1}}
	if len(cam.Versions) != len(want) {
		t.Fatalf("cam versions %+v, want %+v", cam.Versions, want)
	}
	for i := range want {
		if cam.Versions[i] != want[i] {
			t.Errorf("cam version %d: %+v, want %+v", i, cam.Versions[i], want[i])
		}
	}
	if sp := got[1]; sp.Devices != 0 || sp.NewestVersion != "0.9.0" || len(sp.Versions) != 0 {
		t.Errorf("speaker %+v, want no devices and newest 0.9.0", sp)
	}

	one, err := e.fleet.FleetOverview(context.Background(), "speaker")
	if err != nil || len(one) != 1 || one[0].Model != "speaker" {
		t.Errorf("one model: %+v, %v", one, err)
	}
	if _, err := e.fleet.FleetOverview(context.Background(), "bad model!"); !errors.Is(err, domain.ErrValidation) {
		t.Errorf("bad model: %v, want a validation error", err)
	}
}

func TestFleetRolloutsAndFailures(t *testing.T) {
	e := newFleetEnv(t)
	ctx := context.Background()
	old := e.publish("cam", "1.0.0")
	fw := e.publish("cam", "1.1.0")
	first, err := e.admin.StartRollout(ctx, testActor, ports.StartRollout{FirmwareID: old.ID().String(), Spec: domain.RolloutSpec{Percentage: 0}})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.now = e.clock.now.Add(time.Second)
	r, err := e.admin.StartRollout(ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: domain.RolloutSpec{Percentage: 100}})
	if err != nil {
		t.Fatal(err)
	}
	var failedIDs []domain.UUID
	for i, id := range []string{"d1", "d2", "d3"} {
		e.register(id, "cam", "1.0.0")
		res := e.poll(id, "cam", "1.0.0", 0)
		if res.Task == nil {
			t.Fatalf("%s got no task", id)
		}
		if i == 2 {
			continue // stays pending
		}
		e.clock.now = e.clock.now.Add(time.Second)
		if _, err := e.devices.ReportEvent(ctx, asDeviceID(id), res.Task.Task.ID(), ports.EventRequest{
			EventID: "e1", Status: "failed", ErrorCode: "E_CRC", ErrorMessage: "checksum mismatch"}); err != nil {
			t.Fatal(err)
		}
		failedIDs = append(failedIDs, res.Task.Task.ID())
	}

	list, err := e.fleet.ListRollouts(ctx, ports.RolloutQuery{Model: "cam"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Rollout.ID() != r.ID() || list[1].Rollout.ID() != first.ID() {
		t.Fatalf("rollouts %+v, want the newest first", list)
	}
	if s := list[0].Stats; s.Failed != 2 || s.Pending != 1 || list[0].Version != "1.1.0" {
		t.Errorf("newest rollout %+v", list[0])
	}
	if one, err := e.fleet.ListRollouts(ctx, ports.RolloutQuery{Limit: "1"}); err != nil || len(one) != 1 {
		t.Errorf("limit 1: %d rollouts, %v", len(one), err)
	}
	for _, bad := range []string{"0", "501", "x"} {
		if _, err := e.fleet.ListRollouts(ctx, ports.RolloutQuery{Limit: bad}); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("limit %q: %v, want a validation error", bad, err)
		}
	}

	fails, err := e.fleet.RecentFailures(ctx, r.ID(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(fails) != 2 || fails[0].Task.ID() != failedIDs[1] || fails[1].Task.ID() != failedIDs[0] {
		t.Fatalf("failures %v, want %v newest first", fails, failedIDs)
	}
	if fails[0].Task.ErrorCode() != "E_CRC" || fails[0].Firmware.ID() != fw.ID() {
		t.Errorf("failure %q of firmware %s", fails[0].Task.ErrorCode(), fails[0].Firmware.ID())
	}
	if _, err := e.fleet.RecentFailures(ctx, asUUID("5d8f0c2e-1111-4a4a-9b9b-000000000000"), ""); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("unknown rollout: %v, want not found", err)
	}
	if _, err := e.fleet.RecentFailures(ctx, r.ID(), "9999"); !errors.Is(err, domain.ErrValidation) {
		t.Errorf("limit 9999: %v, want a validation error", err)
	}
}
