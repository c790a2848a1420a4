package application_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

func TestCheckNoRolloutMeansNoUpdate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.firmware("1.1.0") // published but not rolled out
	d := e.device("1.0.0")
	res := e.check(d, "1.0.0")
	if res.Task != nil || res.Outcome != ports.CheckNoUpdate {
		t.Fatalf("want no update, got %+v", res)
	}
	if res.PollAfter.Seconds() != 3600 {
		t.Fatalf("poll hint %v, want 1h", res.PollAfter)
	}
}

func TestCheckCreatesOnceThenReuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	fw := e.firmware("1.1.0")
	e.rollout(fw, 100)
	d := e.device("1.0.0")
	first := e.check(d, "1.0.0")
	if first.Task == nil || first.Outcome != ports.CheckCreated {
		t.Fatalf("first check: %+v", first)
	}
	if first.Task.Firmware.ID() != fw.ID() || first.Task.Task.Status() != domain.TaskPending || first.Task.Task.Attempt() != 1 {
		t.Fatalf("unexpected task %+v", first.Task.Task.Record())
	}
	for i := 0; i < 3; i++ {
		again := e.check(d, "1.0.0")
		if again.Task == nil || again.Task.Task.ID() != first.Task.Task.ID() || again.Outcome != ports.CheckReused {
			t.Fatalf("repeat %d: %+v", i, again)
		}
	}
	if n := len(e.tasksOf(asDeviceID(d))); n != 1 {
		t.Fatalf("%d tasks, want 1", n)
	}
	dev, err := e.admin.GetDevice(e.ctx, asDeviceID(d))
	if err != nil || dev.ActiveTask == nil || dev.ActiveTask.Task.ID() != first.Task.Task.ID() {
		t.Fatalf("GetDevice: %+v %v", dev, err)
	}
	if dev.Device.LastSeenAt().IsZero() || dev.Device.CurrentVersion().String() != "1.0.0" {
		t.Fatalf("check not recorded: %+v", dev.Device)
	}
}

func TestCheckRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	d := e.device("1.0.0")
	cases := []struct {
		name string
		req  ports.CheckRequest
		want error
	}{
		{"model mismatch", e.req(d, "other-model", "1.0.0"), domain.ErrModelMismatch},
		{"bad version", e.req(d, model, "1.0"), domain.ErrValidation},
		{"bad model", e.req(d, "bad model", "1.0.0"), domain.ErrValidation},
		{"unauthenticated", e.req("nobody", model, "1.0.0"), domain.ErrUnauthorized},
	}
	if _, err := e.devices.IdentifyDevice(e.ctx, asDeviceID("nobody")); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("identify an unknown device: %v", err)
	}
	for _, c := range cases {
		if _, err := e.devices.Check(e.ctx, c.req); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestCheckPicksHighestEligibleVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.rollout(e.firmware("1.1.0"), 100)
	best := e.firmware("1.3.0")
	e.rollout(best, 100)
	e.rollout(e.firmware("1.2.0"), 100)
	needsNewer := e.firmware("2.0.0", func(s *domain.FirmwareSpec) { s.MinSourceVersion = "1.2.0" })
	e.rollout(needsNewer, 100)
	d := e.device("1.0.0")
	res := e.check(d, "1.0.0")
	if res.Task == nil || res.Task.Firmware.ID() != best.ID() {
		t.Fatalf("want 1.3.0 (2.0.0 needs min 1.2.0), got %+v", res.Task)
	}
}

func TestCheckSupersedesPendingButNeverStarted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.rollout(e.firmware("1.1.0"), 100)
	d := e.device("1.0.0")
	old := e.check(d, "1.0.0").Task.Task

	fw2 := e.firmware("1.2.0")
	e.rollout(fw2, 100)
	res := e.check(d, "1.0.0")
	if res.Outcome != ports.CheckSuperseded || res.Task.Firmware.ID() != fw2.ID() {
		t.Fatalf("want superseded by 1.2.0, got %+v", res)
	}
	if got := e.task(old.ID()); got.Status() != domain.TaskCancelled || got.ErrorCode() != domain.CodeSuperseded {
		t.Fatalf("old task %+v", got.Record())
	}
	started := res.Task.Task
	e.mustEvent(asDeviceID(d), started.ID(), "e1", "downloading")

	e.rollout(e.firmware("1.3.0"), 100)
	res = e.check(d, "1.0.0")
	if res.Task == nil || res.Task.Task.ID() != started.ID() || res.Task.Task.Status() != domain.TaskDownloading {
		t.Fatalf("a started task must be returned unchanged, got %+v", res.Task)
	}
}

func TestCheckReportingTheTargetVersionSucceedsTheTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.rollout(e.firmware("1.1.0+build.7"), 100)
	d := e.device("1.0.0")
	task := e.check(d, "1.0.0").Task.Task
	e.mustEvent(asDeviceID(d), task.ID(), "e1", "installing")
	res := e.check(d, "1.1.0") // rebooted into the new image; build metadata ignored
	if res.Task != nil {
		t.Fatalf("want no update after install, got %+v", res.Task.Task.Record())
	}
	if got := e.task(task.ID()); got.Status() != domain.TaskSucceeded || got.Progress() != 100 {
		t.Fatalf("task %+v", got.Record())
	}
}

func TestRevokeCancelsPendingAtNextCheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	fw := e.firmware("1.1.0")
	e.rollout(fw, 100)
	pending := e.device("1.0.0")
	started := e.device("1.0.0")
	tp := e.check(pending, "1.0.0").Task.Task
	ts := e.check(started, "1.0.0").Task.Task
	e.mustEvent(asDeviceID(started), ts.ID(), "e1", "downloading")

	if _, err := e.admin.RevokeFirmware(e.ctx, testActor, fw.ID()); err != nil {
		t.Fatal(err)
	}
	if res := e.check(pending, "1.0.0"); res.Task != nil {
		t.Fatalf("revoked firmware still offered: %+v", res.Task.Task.Record())
	}
	if got := e.task(tp.ID()); got.Status() != domain.TaskCancelled || got.ErrorCode() != domain.CodeFirmwareRevoked {
		t.Fatalf("pending task %+v", got.Record())
	}
	if _, err := e.event(asDeviceID(pending), tp.ID(), "late", "downloading", nil); !errors.Is(err, domain.ErrTaskFinished) {
		t.Fatalf("event on cancelled task: %v", err)
	}
	if res := e.check(started, "1.0.0"); res.Task == nil || res.Task.Task.ID() != ts.ID() {
		t.Fatalf("a started task finishes despite revocation, got %+v", res)
	}
	if _, err := e.admin.StartRollout(e.ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: domain.RolloutSpec{Percentage: 10}}); !errors.Is(err, domain.ErrFirmwareRevoked) {
		t.Fatalf("rollout of revoked firmware: %v", err)
	}
	if newcomer := e.device("1.0.0"); e.check(newcomer, "1.0.0").Task != nil {
		t.Fatal("revoked firmware offered to a new device")
	}
}

func TestRolloutPauseAndCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	fw := e.firmware("1.1.0")
	r := e.rollout(fw, 100)
	withTask := e.device("1.0.0")
	tp := e.check(withTask, "1.0.0").Task.Task

	paused := "paused"
	if _, err := e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{Status: &paused}); err != nil {
		t.Fatal(err)
	}
	if e.check(e.device("1.0.0"), "1.0.0").Task != nil {
		t.Fatal("paused rollout created a task")
	}
	if res := e.check(withTask, "1.0.0"); res.Task == nil || res.Task.Task.ID() != tp.ID() {
		t.Fatal("pausing must not cancel existing tasks")
	}
	cancelled := "cancelled"
	if _, err := e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{Status: &cancelled}); err != nil {
		t.Fatal(err)
	}
	if res := e.check(withTask, "1.0.0"); res.Task != nil {
		t.Fatal("cancelled rollout's pending task still handed out")
	}
	if got := e.task(tp.ID()); got.ErrorCode() != domain.CodeRolloutCancelled {
		t.Fatalf("task %+v", got.Record())
	}
	active := "active"
	if _, err := e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{Status: &active}); !errors.Is(err, domain.ErrInvalidTransition) {
		t.Fatalf("reviving a cancelled rollout: %v", err)
	}
	if _, err := e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{}); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("empty change: %v", err)
	}
}

func TestRetriesStopAtMaxAttemptsThenNextLowerTarget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	lower := e.firmware("1.1.0")
	e.rollout(lower, 100)
	higher := e.firmware("1.2.0")
	e.rollout(higher, 100, func(s *domain.RolloutSpec) { s.MaxAttempts = intp(2) })
	d := e.device("1.0.0")
	for attempt := 1; attempt <= 2; attempt++ {
		res := e.check(d, "1.0.0")
		if res.Task == nil || res.Task.Firmware.ID() != higher.ID() || res.Task.Task.Attempt() != attempt {
			t.Fatalf("attempt %d: %+v", attempt, res.Task)
		}
		e.mustEvent(asDeviceID(d), res.Task.Task.ID(), "fail", "failed")
	}
	res := e.check(d, "1.0.0")
	if res.Task == nil || res.Task.Firmware.ID() != lower.ID() {
		t.Fatalf("after max attempts the next lower target is offered, got %+v", res.Task)
	}
}

func TestAutoPauseAtFailureThreshold(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.watchedRollout(4)
	outcomes := []string{"succeeded", "failed", "failed"}
	for _, status := range outcomes {
		d := e.device("1.0.0")
		task := e.check(d, "1.0.0").Task.Task
		e.mustEvent(asDeviceID(d), task.ID(), "end", status)
	}
	if v, _ := e.admin.GetRollout(e.ctx, r.ID()); v.Rollout.Status() != domain.RolloutActive {
		t.Fatal("paused before min_sample")
	}
	d := e.device("1.0.0")
	e.mustEvent(asDeviceID(d), e.check(d, "1.0.0").Task.Task.ID(), "end", "succeeded") // 2 of 4 failed = 50%
	v, err := e.admin.GetRollout(e.ctx, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if v.Rollout.Status() != domain.RolloutPaused || v.Rollout.PausedReason() != domain.PausedAuto {
		t.Fatalf("rollout %+v", v.Rollout.Record())
	}
	if v.Stats.Succeeded != 2 || v.Stats.Failed != 2 {
		t.Fatalf("stats %+v", v.Stats)
	}
	if e.check(e.device("1.0.0"), "1.0.0").Task != nil {
		t.Fatal("auto-paused rollout still creates tasks")
	}
}

func TestStagedRolloutKeepsEarlierDevices(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.rollout(e.firmware("1.1.0"), 10)
	const n = 1000
	ids := make([]string, n)
	at10 := map[string]bool{}
	for i := range ids {
		ids[i] = e.device("1.0.0")
		if e.check(ids[i], "1.0.0").Task != nil {
			at10[ids[i]] = true
		}
	}
	fifty := 50
	if _, err := e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{Percentage: &fifty}); err != nil {
		t.Fatal(err)
	}
	at50 := 0
	for _, id := range ids {
		got := e.check(id, "1.0.0").Task != nil
		if got {
			at50++
		}
		if at10[id] && !got {
			t.Fatalf("device %s admitted at 10%% but not at 50%%", id)
		}
	}
	// Device ids are random: bounds of five standard deviations (binomial,
	// 1,000 devices) fail a correct build about once in a million runs;
	// three failed one in a few hundred.
	if len(at10) < 50 || len(at10) > 150 || at50 < 420 || at50 > 580 {
		t.Fatalf("admitted %d at 10%% and %d at 50%% of %d", len(at10), at50, n)
	}
}

func TestBusyLockAnswersServiceBusyAndWritesNothing(t *testing.T) {
	t.Parallel()
	locker := &busyLocker{}
	e := newEnv(t, locker)
	e.rollout(e.firmware("1.1.0"), 100)
	d := e.device("1.0.0")
	res, err := e.devices.Check(e.ctx, e.req(d, model, "1.0.0"))
	if !errors.Is(err, domain.ErrServiceBusy) || res.Outcome != ports.CheckBusy {
		t.Fatalf("got %+v, %v", res, err)
	}
	if locker.calls.Load() != 1 || len(e.tasksOf(asDeviceID(d))) != 0 {
		t.Fatalf("lock calls %d, tasks %d", locker.calls.Load(), len(e.tasksOf(asDeviceID(d))))
	}
}

func TestConcurrentChecksShareOneTask(t *testing.T) {
	t.Parallel()
	for name, locker := range map[string]ports.Locker{
		"memory lock":            nil,
		"lock made useless":      local.AlwaysGrantLocker{},
		"memory lock short wait": local.NewLocker(defaultWait, ports.NopLockMetrics{}),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, locker)
			e.rollout(e.firmware("1.1.0"), 100)
			d := e.device("1.0.0")
			const n = 200
			ids := make([]string, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					<-start
					res, err := e.devices.Check(e.ctx, e.req(d, model, "1.0.0"))
					if err != nil || res.Task == nil {
						t.Errorf("check %d: %+v %v", i, res, err)
						return
					}
					ids[i] = res.Task.Task.ID().String()
				}(i)
			}
			close(start)
			wg.Wait()
			for i := range ids {
				if ids[i] != ids[0] {
					t.Fatalf("caller %d got %s, caller 0 got %s", i, ids[i], ids[0])
				}
			}
			if n := len(e.tasksOf(asDeviceID(d))); n != 1 {
				t.Fatalf("%d tasks stored, want 1", n)
			}
		})
	}
}

func TestPendingTaskBelowTheReportedVersionIsNotHandedOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.rollout(e.firmware("1.1.0"), 100)
	d := e.device("1.0.0")
	task := e.check(d, "1.0.0").Task.Task
	if res := e.check(d, "9.0.0"); res.Task != nil {
		t.Fatalf("a downgrade was handed out: %+v", res.Task.Task.Record())
	}
	if got := e.task(task.ID()); got.Status() != domain.TaskCancelled || got.ErrorCode() != domain.CodeSuperseded {
		t.Fatalf("task %+v", got.Record())
	}
}

func TestPatchPercentageAndCancelTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.rollout(e.firmware("1.1.0"), 30)
	zero, cancelled := 0, "cancelled"
	got, err := e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{Percentage: &zero, Status: &cancelled})
	if err != nil || got.Status() != domain.RolloutCancelled || got.Percentage() != 0 {
		t.Fatalf("got %+v, %v", got.Record(), err)
	}
}

// outcomes records check outcomes, to see what the metrics would count.
type outcomes struct {
	ports.NopMetrics
	mu          sync.Mutex
	got         []string
	transitions map[string]int // task transitions by the status entered
}

func (o *outcomes) CheckDone(outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, outcome)
}

func (o *outcomes) TaskTransition(status string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.transitions == nil {
		o.transitions = map[string]int{}
	}
	o.transitions[status]++
}

func TestACheckWhoseCallerHungUpIsNotCountedAsAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	rec := &outcomes{}
	devices := e.devicesWith(func(d *application.Deps) { d.Metrics = rec })
	d := e.device("1.0.0")
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := devices.Check(ctx, e.req(d, model, "1.0.0")); err == nil {
		t.Fatal("a cancelled check succeeded")
	}
	if len(rec.got) != 1 || rec.got[0] != ports.CheckCancelled {
		t.Fatalf("outcomes %v, want [cancelled]", rec.got)
	}
}

// switchLocker grants locks through inner until busy is set, then refuses
// every one, as Redis would when it goes down.
type switchLocker struct {
	inner ports.Locker
	busy  atomic.Bool
}

func (l *switchLocker) WithLock(ctx context.Context, name string, fn func(context.Context) error) error {
	if l.busy.Load() {
		return &ports.BusyError{Reason: ports.LockUnavailable, Err: errors.New("redis: connection refused")}
	}
	return l.inner.WithLock(ctx, name, fn)
}

// A creation refused by a busy lock hands out the device's active task
// only when it is a task of the firmware the check wanted (check rule 7):
// a pending task of another firmware, which the creation would have
// superseded, is not answered as that firmware's.
func TestBusyLockReusesOnlyATaskOfTheWantedFirmware(t *testing.T) {
	t.Parallel()
	locker := &switchLocker{inner: local.NewLocker(defaultWait, ports.NopLockMetrics{})}
	e := newEnv(t, locker)
	e.rollout(e.firmware("1.1.0"), 100)
	d := e.device("1.0.0")
	old := e.check(d, "1.0.0").Task.Task
	e.rollout(e.firmware("1.2.0"), 100)
	locker.busy.Store(true)
	res, err := e.devices.Check(e.ctx, e.req(d, model, "1.0.0"))
	if !errors.Is(err, domain.ErrServiceBusy) || res.Task != nil {
		t.Fatalf("got %+v, %v; want SERVICE_BUSY, not the 1.1.0 task %s", res, err, old.ID())
	}
}

// ReplaceActive inserts only a task of the device whose state it read and
// locked: a task of another device would dodge that device's one-active-
// task check, so it is refused and nothing is stored.
func TestReplaceActiveRefusesAnotherDevicesTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	fw := e.firmware("1.1.0")
	o := domain.Offer{Firmware: fw, Rollout: e.rollout(fw, 100)}
	mine, other := asDeviceID(e.device("1.0.0")), asDeviceID(e.device("1.0.0"))
	_, created, err := application.ReplaceActive(e.ctx, e.deps.Tasks, mine, func(application.TaskState) (*domain.Task, error) {
		tk, err := domain.NewTask(domain.UUIDOf([16]byte{1, 2, 3}), other, o, 1, time.Now())
		return &tk, err
	}, nil)
	if err == nil || created {
		t.Fatalf("created %v, err %v; want the other device's task refused", created, err)
	}
	if n := len(e.tasksOf(other)); n != 0 {
		t.Fatalf("the other device has %d tasks, want none", n)
	}
}

// A replayed event changes nothing, and reports no transition: the
// tasks-by-status counter counts tasks entering a status, once each.
func TestReplayedEventCountsNoTransition(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.rollout(e.firmware("1.1.0"), 100)
	d := e.device("1.0.0")
	tk := e.check(d, "1.0.0").Task.Task
	m := &outcomes{}
	devices := e.devicesWith(func(d *application.Deps) { d.Metrics = m })
	for range 3 { // the first is applied, the others are replays
		if _, err := devices.ReportEvent(e.ctx, asDeviceID(d), tk.ID(), ports.EventRequest{EventID: "e1", Status: "downloading"}); err != nil {
			t.Fatal(err)
		}
	}
	if m.transitions["downloading"] != 1 || len(m.transitions) != 1 {
		t.Fatalf("transitions %v, want downloading once", m.transitions)
	}
}
