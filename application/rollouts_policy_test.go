package application_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// manualClock is a clock the test moves by hand (an injectable clock for
// windows, soak times and task timeouts).
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newPolicyEnv is newEnv with the targeting stores and a manual clock
// starting at start.
func newPolicyEnv(t *testing.T, start time.Time) (*env, *manualClock) {
	t.Helper()
	store := memory.NewStore()
	clock := &manualClock{now: start}
	deps := application.Deps{
		Devices: memory.NewDevices(store), Firmwares: memory.NewFirmwares(store),
		Rollouts: memory.NewRollouts(store), Tasks: memory.NewTasks(store),
		Locker: local.NewLocker(defaultWait, ports.NopLockMetrics{}), Clock: clock, IDs: local.NewUUIDs(),
		Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
		Attributes: memory.NewAttributes(store), Directory: memory.NewDirectory(store),
	}
	devices, err := application.NewDevices(deps, application.PollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := application.NewAdmin(deps)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: context.Background(), store: store, deps: deps, devices: devices, admin: admin}, clock
}

var policyStart = time.Date(2026, 6, 10, 12, 0, 0, 0, time.UTC)

// Targeting rule T1 end to end: tags set by an operator and attributes
// reported in this very poll select the device; the report is stored and
// shown in the device view and the listing.
func TestTargetingByTagsAndReportedAttributes(t *testing.T) {
	e, _ := newPolicyEnv(t, policyStart)
	fw := e.firmware("2.0.0")
	e.rollout(fw, 100, func(s *domain.RolloutSpec) {
		s.Selector = domain.SelectorSpec{TagsAll: []string{"eu"}, Attributes: map[string]string{"hw": "rev2"}, Versions: ">=1.0.0 <2.0.0"}
	})
	dev := e.device("1.0.0")
	other := e.device("1.0.0")
	if _, err := e.admin.SetDeviceTags(e.ctx, testActor, asDeviceID(dev), []string{"eu", "lab", "eu"}); err != nil {
		t.Fatal(err)
	}
	if res := e.check(dev, "1.0.0"); res.Task != nil {
		t.Fatal("offered without the hw attribute")
	}
	req := e.req(dev, model, "1.0.0")
	req.Attributes = map[string]string{"hw": "rev2", "timezone": "Europe/Berlin"}
	res, err := e.devices.Check(e.ctx, req)
	if err != nil || res.Task == nil {
		t.Fatalf("with tag and reported attribute: %+v %v", res, err)
	}
	// The other device reports the attribute but has no tag.
	req = e.req(other, model, "1.0.0")
	req.Attributes = map[string]string{"hw": "rev2"}
	if res, err := e.devices.Check(e.ctx, req); err != nil || res.Task != nil {
		t.Fatalf("untagged device: %+v %v", res, err)
	}
	// Stored: a later poll without attributes still matches (the task is reused).
	if res := e.check(dev, "1.0.0"); res.Task == nil || res.Outcome != ports.CheckReused {
		t.Fatalf("later poll: %+v", res)
	}
	v, err := e.admin.GetDevice(e.ctx, asDeviceID(dev))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(v.Tags) != "[eu lab]" || v.Attributes.Values()["hw"] != "rev2" {
		t.Fatalf("device view tags %v attributes %v", v.Tags, v.Attributes.Values())
	}
	page, err := e.admin.ListDevices(e.ctx, ports.DeviceQuery{Tags: []string{"eu"}, Attributes: []string{"hw=rev2"}})
	if err != nil || len(page.Items) != 1 || page.Items[0].Device.ID().String() != dev {
		t.Fatalf("listing: %+v %v", page, err)
	}
	page, err = e.admin.ListDevices(e.ctx, ports.DeviceQuery{Attributes: []string{"hw=rev2"}, Limit: "1"})
	if err != nil || len(page.Items) != 1 || page.Next == "" {
		t.Fatalf("first page: %+v %v", page, err)
	}
	page, err = e.admin.ListDevices(e.ctx, ports.DeviceQuery{Attributes: []string{"hw=rev2"}, Limit: "1", After: page.Next})
	if err != nil || len(page.Items) != 1 || page.Next != "" {
		t.Fatalf("second page: %+v %v", page, err)
	}
	// Bad reports and filters are validation errors and store nothing.
	req = e.req(dev, model, "1.0.0")
	req.Attributes = map[string]string{"": "x"}
	if _, err := e.devices.Check(e.ctx, req); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("empty attribute name: %v", err)
	}
	for _, q := range []ports.DeviceQuery{{Attributes: []string{"novalue"}}, {Tags: []string{"bad tag"}}, {Limit: "0"}} {
		if _, err := e.admin.ListDevices(e.ctx, q); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("query %+v: %v", q, err)
		}
	}
	if _, err := e.admin.ChangeDeviceTags(e.ctx, testActor, ports.TagChange{DeviceIDs: []string{dev, "nobody"}, Add: []string{"x"}}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("bulk with an unknown device: %v", err)
	}
	if v, _ := e.admin.GetDevice(e.ctx, asDeviceID(dev)); fmt.Sprint(v.Tags) != "[eu lab]" {
		t.Fatalf("a refused bulk change wrote tags: %v", v.Tags)
	}
	out, err := e.admin.ChangeDeviceTags(e.ctx, testActor, ports.TagChange{DeviceIDs: []string{dev, other}, Add: []string{"wave2"}, Remove: []string{"lab"}})
	if err != nil || fmt.Sprint(out[dev]) != "[eu wave2]" || fmt.Sprint(out[other]) != "[wave2]" {
		t.Fatalf("bulk: %v %v", out, err)
	}
}

// Stage rules G2–G3 through the event path: a 1% → 100% plan advances by
// itself when its first stage's gate holds, with the history recorded.
func TestStagedRolloutAdvancesOnFinalEvents(t *testing.T) {
	e, _ := newPolicyEnv(t, policyStart)
	fw := e.firmware("2.0.0")
	r := e.rollout(fw, 0, func(s *domain.RolloutSpec) {
		s.Stages = []domain.StageRequest{{Percentage: new(50), MinFinished: new(2), SuccessPercent: new(50)}, {Percentage: new(100), MinFinished: new(1), SuccessPercent: new(100)}}
	})
	var in, out []string
	for len(in) < 2 || len(out) < 1 {
		d := e.device("1.0.0")
		if domain.Bucket(r.ID().String(), d) < 50 {
			in = append(in, d)
		} else {
			out = append(out, d)
		}
	}
	if res := e.check(out[0], "1.0.0"); res.Task != nil {
		t.Fatal("stage 1 admitted a device outside its 50%")
	}
	for i, d := range in[:2] {
		res := e.check(d, "1.0.0")
		if res.Task == nil {
			t.Fatalf("stage 1 device %s got nothing", d)
		}
		e.mustEvent(asDeviceID(d), res.Task.Task.ID(), fmt.Sprintf("e%d", i), "succeeded")
	}
	v, err := e.admin.GetRollout(e.ctx, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if v.Rollout.Stage() != 1 || v.Rollout.Percentage() != 100 || len(v.Rollout.History()) != 2 || v.StageStats == nil {
		t.Fatalf("after the gate: stage %d pct %d history %+v", v.Rollout.Stage(), v.Rollout.Percentage(), v.Rollout.History())
	}
	if res := e.check(out[0], "1.0.0"); res.Task == nil {
		t.Fatal("stage 2 does not admit the rest of the fleet")
	}
}

// A failing first stage pauses the rollout itself (reason auto) and no
// further device is admitted.
func TestStagedRolloutPausesOnMissedGate(t *testing.T) {
	e, _ := newPolicyEnv(t, policyStart)
	fw := e.firmware("2.0.0")
	r := e.rollout(fw, 0, func(s *domain.RolloutSpec) {
		s.Stages = []domain.StageRequest{{Percentage: new(100), MinFinished: new(2), SuccessPercent: new(90)}}
	})
	devs := []string{e.device("1.0.0"), e.device("1.0.0"), e.device("1.0.0")}
	for i, d := range devs[:2] {
		res := e.check(d, "1.0.0")
		status := "succeeded"
		if i == 1 {
			status = "failed"
		}
		e.mustEvent(asDeviceID(d), res.Task.Task.ID(), "e", status)
	}
	v, _ := e.admin.GetRollout(e.ctx, r.ID())
	if v.Rollout.Status() != domain.RolloutPaused || v.Rollout.PausedReason() != domain.PausedAuto {
		t.Fatalf("status %s reason %q", v.Rollout.Status(), v.Rollout.PausedReason())
	}
	if h := v.Rollout.History(); h[0].Outcome != domain.StagePaused || h[0].Reason == "" {
		t.Fatalf("history %+v", h)
	}
	if res := e.check(devs[2], "1.0.0"); res.Task != nil {
		t.Fatal("an auto-paused rollout still offers")
	}
}

// Schedule rules S1–S3: outside the window the device hears "no update"
// and a poll hint that brings it back when the window opens; inside, it is
// offered; the task is kept after the window closes.
func TestWindowAndPollHint(t *testing.T) {
	e, clock := newPolicyEnv(t, policyStart) // 12:00 UTC
	fw := e.firmware("2.0.0")
	e.rollout(fw, 100, func(s *domain.RolloutSpec) { s.Window = &domain.WindowSpec{Daily: "12:30-13:00"} })
	d := e.device("1.0.0")
	res := e.check(d, "1.0.0")
	if res.Task != nil || res.PollAfter != 30*time.Minute {
		t.Fatalf("before the window: task %v poll %s", res.Task != nil, res.PollAfter)
	}
	clock.Set(policyStart.Add(30 * time.Minute))
	res = e.check(d, "1.0.0")
	if res.Task == nil || res.PollAfter != time.Hour {
		t.Fatalf("in the window: task %v poll %s", res.Task != nil, res.PollAfter)
	}
	clock.Set(policyStart.Add(2 * time.Hour))
	if res2 := e.check(d, "1.0.0"); res2.Task == nil || res2.Task.Task.ID() != res.Task.Task.ID() {
		t.Fatal("a task handed out in the window was dropped when it closed")
	}
	// Far from the window, the default poll interval applies.
	d2 := e.device("1.0.0")
	if res := e.check(d2, "1.0.0"); res.Task != nil || res.PollAfter != time.Hour {
		t.Fatalf("far from the window: task %v poll %s", res.Task != nil, res.PollAfter)
	}
}

// Stuck-task rule K1: a task without events for longer than the timeout
// fails TIMED_OUT at the next check (stored), counts in the stats, a second
// attempt is created, and a late event is TASK_FINISHED.
func TestStuckTaskTimesOut(t *testing.T) {
	e, clock := newPolicyEnv(t, policyStart)
	fw := e.firmware("2.0.0")
	r := e.rollout(fw, 100, func(s *domain.RolloutSpec) { timeout := time.Hour; s.TaskTimeout = &timeout })
	d := e.device("1.0.0")
	first := e.check(d, "1.0.0").Task.Task
	e.mustEvent(asDeviceID(d), first.ID(), "e1", "downloading")
	clock.Add(61 * time.Minute)
	res := e.check(d, "1.0.0")
	if res.Task == nil || res.Task.Task.ID() == first.ID() || res.Task.Task.Attempt() != 2 {
		t.Fatalf("after the timeout: %+v", res.Task)
	}
	stuck := e.task(first.ID())
	if stuck.Status() != domain.TaskFailed || stuck.ErrorCode() != domain.CodeTimedOut {
		t.Fatalf("stuck task is %s %s", stuck.Status(), stuck.ErrorCode())
	}
	if _, err := e.event(asDeviceID(d), first.ID(), "late", "installing", nil); !errors.Is(err, domain.ErrTaskFinished) {
		t.Fatalf("late event: %v", err)
	}
	// One device, counted once: by the time-out, its outcome, while the
	// retry is in flight (domain.CountsOver).
	v, _ := e.admin.GetRollout(e.ctx, r.ID())
	if v.Stats.Failed != 1 || v.Stats.Pending != 0 {
		t.Fatalf("stats %+v", v.Stats)
	}
}

// Rollback rule R1: a rollback rollout returns devices on the bad version
// to the previous one; others are never downgraded.
func TestRollbackReturnsDevices(t *testing.T) {
	e, _ := newPolicyEnv(t, policyStart)
	good := e.firmware("1.9.0")
	bad := e.firmware("2.0.0")
	badRollout := e.rollout(bad, 100)
	d := e.device("1.9.0")
	res := e.check(d, "1.9.0")
	e.mustEvent(asDeviceID(d), res.Task.Task.ID(), "e1", "succeeded")
	if _, err := e.admin.UpdateRollout(e.ctx, testActor, badRollout.ID(), ports.RolloutChange{Status: strp("cancelled")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.StartRollout(e.ctx, testActor, ports.StartRollout{FirmwareID: good.ID().String(), Spec: domain.RolloutSpec{Percentage: 100, AllowDowngrade: true}}); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("rollback without a version range: %v", err)
	}
	e.rollout(good, 100, func(s *domain.RolloutSpec) {
		s.AllowDowngrade = true
		s.Selector.Versions = "=2.0.0"
	})
	res = e.check(d, "2.0.0")
	if res.Task == nil || res.Task.Firmware.ID() != good.ID() {
		t.Fatalf("rollback not offered: %+v", res.Task)
	}
	e.check(d, "1.9.0") // it reports the old version: the rollback task succeeded
	if got := e.task(res.Task.Task.ID()); got.Status() != domain.TaskSucceeded {
		t.Fatalf("rollback task is %s", got.Status())
	}
	other := e.device("2.1.0")
	if res := e.check(other, "2.1.0"); res.Task != nil {
		t.Fatal("a device outside the range was downgraded")
	}
}

// Timed-out tasks count in the gates at once: a stage whose sample is all
// stuck tasks pauses itself at the checks that time them out, with no
// final event from any device.
func TestTimedOutTasksPauseAStage(t *testing.T) {
	e, clock := newPolicyEnv(t, policyStart)
	fw := e.firmware("2.0.0")
	r := e.rollout(fw, 0, func(s *domain.RolloutSpec) {
		timeout := time.Hour
		s.TaskTimeout = &timeout
		s.Stages = []domain.StageRequest{{Percentage: new(100), MinFinished: new(2), SuccessPercent: new(50)}}
	})
	a, b := e.device("1.0.0"), e.device("1.0.0")
	for _, d := range []string{a, b} {
		res := e.check(d, "1.0.0")
		e.mustEvent(asDeviceID(d), res.Task.Task.ID(), "dl", "downloading")
	}
	clock.Add(2 * time.Hour)
	e.check(a, "1.0.0")
	if v, _ := e.admin.GetRollout(e.ctx, r.ID()); v.Rollout.Status() != domain.RolloutActive {
		t.Fatalf("one timeout of a sample of two: %s", v.Rollout.Status())
	}
	e.check(b, "1.0.0")
	v, _ := e.admin.GetRollout(e.ctx, r.ID())
	if v.Rollout.Status() != domain.RolloutPaused || v.Rollout.PausedReason() != domain.PausedAuto {
		t.Fatalf("two timeouts: %s %q", v.Rollout.Status(), v.Rollout.PausedReason())
	}
}

// A check that times a task out judges its rollout in the same transaction
// as the time-out, before it creates the retry: when that failure reaches
// the rollout's threshold, the rollout pauses and no retry is handed out
// into it (event rule 5, stuck-task rule K1). Judged after the commit, as
// it once was, the retry was created and handed out in a rollout that
// paused a moment later.
func TestTimeOutThatPausesItsRolloutCreatesNoRetry(t *testing.T) {
	e, clock := newPolicyEnv(t, policyStart)
	fw := e.firmware("2.0.0")
	r := e.rollout(fw, 100, func(s *domain.RolloutSpec) {
		timeout, threshold, sample := time.Hour, 50, 1
		s.TaskTimeout, s.FailureThresholdPercent, s.MinSample = &timeout, &threshold, &sample
	})
	d := e.device("1.0.0")
	first := e.check(d, "1.0.0").Task.Task
	e.mustEvent(asDeviceID(d), first.ID(), "e1", "downloading")
	clock.Add(61 * time.Minute)
	if res := e.check(d, "1.0.0"); res.Task != nil {
		t.Fatalf("a retry (attempt %d) was handed out into a rollout its time-out paused", res.Task.Task.Attempt())
	}
	if stuck := e.task(first.ID()); stuck.Status() != domain.TaskFailed || stuck.ErrorCode() != domain.CodeTimedOut {
		t.Fatalf("stuck task is %s %s", stuck.Status(), stuck.ErrorCode())
	}
	v, _ := e.admin.GetRollout(e.ctx, r.ID())
	if v.Rollout.Status() != domain.RolloutPaused || v.Rollout.PausedReason() != domain.PausedAuto {
		t.Fatalf("rollout %s %q, want auto-paused", v.Rollout.Status(), v.Rollout.PausedReason())
	}
	if v.Stats.Failed != 1 || v.Stats.Pending != 0 {
		t.Fatalf("stats %+v, want the one timed-out task and no retry", v.Stats)
	}
}

// A creation counts its task in its rollout and in its stage at once,
// whichever way it is stored (the short path's one statement, or the
// transaction): a gate reads the stage's counters.
func TestCreationCountsInItsStage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.rollout(e.firmware("1.1.0"), 0, func(s *domain.RolloutSpec) {
		s.Stages = []domain.StageRequest{{Percentage: new(99), MinFinished: new(5)}, {Percentage: new(100)}}
	})
	d := e.device("1.0.0")
	for domain.Bucket(r.ID().String(), d) >= 99 { // one of the first stage's devices
		d = e.device("1.0.0")
	}
	if res := e.check(d, "1.0.0"); res.Task == nil || res.Outcome != ports.CheckCreated {
		t.Fatalf("check: %+v", res)
	}
	v, err := e.admin.GetRollout(e.ctx, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	one := domain.TaskStats{Pending: 1}
	if v.Stats != one || v.StageStats == nil || *v.StageStats != one {
		t.Fatalf("after one creation: stats %+v, stage stats %+v; want one pending device in each", v.Stats, v.StageStats)
	}
}

// A success reported after the service timed the task out is refused
// (TASK_FINISHED) but records the version the device now runs (stuck-task
// rule K1, domain.Task.InstalledLate), and never moves the device's last
// report back: a replica whose clock is behind the one that served the
// last check leaves last_seen_at as it was.
func TestLateInstallRecordsTheVersionNotAnEarlierSighting(t *testing.T) {
	e, clock := newPolicyEnv(t, policyStart)
	fw := e.firmware("2.0.0")
	e.rollout(fw, 100, func(s *domain.RolloutSpec) { timeout := time.Hour; s.TaskTimeout = &timeout })
	d := e.device("1.0.0")
	first := e.check(d, "1.0.0").Task.Task
	clock.Add(61 * time.Minute)
	e.check(d, "1.0.0") // times the first task out
	seen, err := e.deps.Devices.Get(e.ctx, asDeviceID(d))
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(-30 * time.Minute)
	if _, err := e.event(asDeviceID(d), first.ID(), "late", "succeeded", nil); !errors.Is(err, domain.ErrTaskFinished) {
		t.Fatalf("late success: %v, want TASK_FINISHED", err)
	}
	got, err := e.deps.Devices.Get(e.ctx, asDeviceID(d))
	if err != nil {
		t.Fatal(err)
	}
	if got.CurrentVersion().String() != "2.0.0" || !got.LastSeenAt().Equal(seen.LastSeenAt()) {
		t.Fatalf("device runs %s, last seen %v; want 2.0.0, still last seen %v", got.CurrentVersion(), got.LastSeenAt(), seen.LastSeenAt())
	}
}
