package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// TestTargetedCheckRoundTrips shows that hands-off rollouts' rules add no round trip
// to a cold poll on the serving wiring: with a rollout carrying a selector
// (tags, attribute, version range), a plan of stages and a window, a device
// with tags and stored attributes still costs one round trip (its tags and
// attributes come with the check view, the policy with the cached offers),
// whether it is selected or not, and whether it reports attributes it
// already reported or none.
func TestTargetedCheckRoundTrips(t *testing.T) {
	ctx := context.Background()
	_, devices, admin, _, writes := servingRoundTrips(t)

	model := "rtt-" + newID()[:8]
	fw, err := admin.PublishFirmware(ctx, testActor, domain.FirmwareSpec{Model: model, Version: "2.0.0",
		URL: "https://fw.example/rt.bin", SizeBytes: 10, SHA256: sha(8)})
	must(t, err)
	_, err = admin.StartRollout(ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: domain.RolloutSpec{
		Selector: domain.SelectorSpec{TagsAll: []string{"eu"}, Attributes: map[string]string{"hw": "rev2"}, Versions: ">=1.0.0 <2.0.0"},
		Stages:   []domain.StageRequest{{Percentage: new(100), MinFinished: new(5), SuccessPercent: new(90)}},
		// A window open now (it may cross midnight).
		Window: &domain.WindowSpec{Daily: time.Now().UTC().Add(-time.Hour).Format("15:04") + "-" + time.Now().UTC().Add(time.Hour).Format("15:04")},
	}})
	must(t, err)
	register := func(id string) ports.DeviceCredentials {
		c, err := admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: id, Model: model, CurrentVersion: "1.0.0"})
		must(t, err)
		return c
	}
	selected, outside := register(model+"-sel"), register(model+"-out")
	_, err = admin.SetDeviceTags(ctx, testActor, selected.Device.ID(), []string{"eu"})
	must(t, err)
	attrs := map[string]string{"hw": "rev2"}
	poll := func(c ports.DeviceCredentials, reported map[string]string) (ports.CheckResult, int64) {
		t.Helper()
		before := writes.Load()
		dev, err := devices.AuthenticateDevice(ctx, c.Token)
		must(t, err)
		res, err := devices.Check(ctx, ports.CheckRequest{Device: dev, Model: model, CurrentVersion: "1.0.0", Attributes: reported})
		must(t, err)
		return res, writes.Load() - before
	}
	// First polls: the report of new attributes is stored, the task made.
	if res, _ := poll(selected, attrs); res.Outcome != ports.CheckCreated {
		t.Fatalf("selected device: %s", res.Outcome)
	}
	if res, _ := poll(outside, attrs); res.Outcome != ports.CheckNoUpdate {
		t.Fatalf("untagged device: %s", res.Outcome)
	}
	time.Sleep(50 * time.Millisecond)
	for _, tc := range []struct {
		name     string
		c        ports.DeviceCredentials
		reported map[string]string
		want     string
	}{
		{"selected, reusing, same attributes again", selected, attrs, ports.CheckReused},
		{"selected, reusing, no attributes", selected, nil, ports.CheckReused},
		{"not selected, same attributes again", outside, attrs, ports.CheckNoUpdate},
	} {
		res, n := poll(tc.c, tc.reported)
		if res.Outcome != tc.want {
			t.Fatalf("%s: %s, want %s", tc.name, res.Outcome, tc.want)
		}
		if n != 1 {
			t.Errorf("%s: %d round trips, want 1", tc.name, n)
		}
	}
}
