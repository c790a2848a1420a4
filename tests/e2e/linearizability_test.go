package e2e

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ai-device/ota/tests/testenv"
)

// testLinearizable records the checks, progress events and rollout changes
// of 4 devices × 3 clients spread over three otad instances, and checks
// each history against the sequential model of the service
// (testenv.LinModel) with porcupine. Round 1 is plain concurrency; in
// round 2 the tasks table is locked for 400ms in the middle of the load, so
// that every call in flight queues in Postgres and they all run at once
// when it opens. A history the model cannot explain fails the test, with
// the path of its visualisation.
func testLinearizable(t *testing.T) {
	t.Parallel()
	for round := range 2 {
		e := newEnv(t)
		insts := e.start(t, instanceConfig{env: map[string]string{"OTA_DEVICE_RATE_LIMIT": "0", "OTA_LOCK_TTL": "1s"}}, "L1", "L2", "L3")
		c := newClient(t, insts[0])
		model := uniq("lin")
		var devs []testenv.LinDevice
		for range 4 {
			id := uniq("dev")
			devs = append(devs, testenv.LinDevice{ID: id, Token: c.registerDevice(t, e.adminToken, id, model, "1.0.0"), Model: model, Version: "1.0.0"})
		}
		urls := []string{insts[0].URL, insts[1].URL, insts[2].URL}
		h := &testenv.History{}
		operator := len(devs) * 3 // the client id after the devices'
		start := func(version string) (rollout string) {
			testenv.LinRolloutStart(h, operator, version, 0, func() error {
				rollout = c.startRollout(t, e.adminToken, c.publishFirmware(t, e.adminToken, model, version), 100)
				return nil
			})
			time.Sleep(1200 * time.Millisecond) // every catalog cache has the rollout
			return rollout
		}
		start("2.0.0")

		load := testenv.LinWorkload{URLs: urls, Devices: devs, ClientsPerDevice: 3, OpsPerClient: 14, Timeout: 5 * time.Second,
			Pause: func() time.Duration { return time.Duration(10+rand.N(40)) * time.Millisecond }}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		done := make(chan struct{})
		go func() {
			defer close(done)
			load.Run(ctx, h)
		}()
		if round == 1 {
			time.Sleep(150 * time.Millisecond)
			g := closeTasksGate(t, e)
			time.Sleep(400 * time.Millisecond)
			g.open(t)
		}
		<-done
		// A newer version supersedes pending tasks; pausing it makes the
		// older one the target again.
		rollout3 := start("3.0.0")
		more := testenv.LinWorkload{URLs: urls, Devices: devs, ClientsPerDevice: 3, OpsPerClient: 8, Timeout: 5 * time.Second, Pause: load.Pause}
		more.Run(ctx, h)
		once := testenv.LinWorkload{URLs: urls, Devices: devs, ClientsPerDevice: 1, OpsPerClient: 1, Timeout: 5 * time.Second}
		for _, status := range []string{"paused", "active"} {
			if out := testenv.LinRolloutChange(ctx, h, operator, insts[1].URL, e.adminToken, rollout3, "3.0.0", status); out.Outcome != "ok" {
				t.Fatalf("setting the rollout %s: %+v", status, out)
			}
			time.Sleep(1200 * time.Millisecond)
			once.Run(ctx, h)
		}
		cancel()
		name := "e2e-plain"
		if round == 1 {
			name = "e2e-gated"
		}
		testenv.CheckLinearizable(t, name, h)
	}
}
