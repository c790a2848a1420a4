package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/application/ddi"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// successClock is a clock a test moves by hand, safe for concurrent use.
type successClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *successClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

func (c *successClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

// sstack is the device, admin and DDI use cases over one store, with the
// store's own repositories at hand.
type sstack struct {
	t       *testing.T
	ctx     context.Context
	clock   *successClock
	deps    application.Deps
	devices *application.Devices
	admin   *application.Admin
	ddi     *ddi.UseCases
	model   string
	// flush stores the checks a write-behind holds (a no-op in memory).
	flush func()
	// lock is the stack's locker; lock.busy answers every creation
	// SERVICE_BUSY, as a Redis outage does.
	lock *busyLocker
	// actions are the store's DDI action records.
	actions ddi.TaskActions
}

// busyLocker is a locker that refuses the lock while busy is set, and
// holds every caller at its door while hold is set: each says so on
// entered, then waits for hold to close.
type busyLocker struct {
	ports.Locker
	busy    atomic.Bool
	hold    atomic.Pointer[chan struct{}]
	entered chan struct{}
}

func (l *busyLocker) WithLock(ctx context.Context, name string, fn func(context.Context) error) error {
	if l.busy.Load() {
		return &ports.BusyError{}
	}
	if h := l.hold.Load(); h != nil {
		l.entered <- struct{}{}
		<-*h
	}
	return l.Locker.WithLock(ctx, name, fn)
}

// onEveryStore runs test against the memory store and against Postgres
// as production wires it (checks written behind, every check written:
// OTA_LAST_SEEN_RESOLUTION=0, the setting under which a stale write-back
// shows at once).
func onEveryStore(t *testing.T, test func(t *testing.T, s *sstack)) {
	t.Run("memory", func(t *testing.T) {
		store := memory.NewStore()
		deps := application.Deps{
			Devices: memory.NewDevices(store), Firmwares: memory.NewFirmwares(store),
			Rollouts: memory.NewRollouts(store), Tasks: memory.NewTasks(store),
			Attributes: memory.NewAttributes(store), Directory: memory.NewDirectory(store),
		}
		test(t, newSStack(t, deps, memory.NewTaskActions(store)))
	})
	t.Run("postgres", func(t *testing.T) {
		db, _ := testenv.PostgresDB(t)
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			t.Fatal(err)
		}
		seen, stop, err := postgres.NewWriteBehindDevices(repos.Devices,
			postgres.WriteBehindConfig{Interval: 10 * time.Millisecond, Resolution: postgres.SeenEveryCheck}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		deps := application.Deps{
			Devices: seen, Firmwares: repos.Firmwares, Rollouts: repos.Rollouts, Tasks: repos.Tasks,
			Attributes: postgres.NewAttributeRepository(db), Directory: postgres.NewDeviceDirectory(db),
		}
		s := newSStack(t, deps, postgres.NewTaskActionRepository(db))
		s.flush = func() {
			if err := seen.Flush(s.ctx); err != nil {
				t.Fatal(err)
			}
		}
		test(t, s)
	})
}

func newSStack(t *testing.T, deps application.Deps, actions ddi.TaskActions) *sstack {
	t.Helper()
	clock := &successClock{at: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	lock := &busyLocker{Locker: local.NewLocker(2*time.Second, ports.NopLockMetrics{}), entered: make(chan struct{}, 16)}
	deps.Locker = lock
	deps.Clock, deps.IDs, deps.Metrics, deps.Limiter = clock, local.NewUUIDs(), ports.NopMetrics{}, ports.Unlimited{}
	devices, admin := testenv.UseCases(t, deps, time.Hour)
	dd, err := ddi.New(devices, deps.Devices, deps.Rollouts, deps.Attributes, actions, deps.Tasks, deps.Metrics, clock,
		application.PollInterval(time.Hour), "sw_version")
	if err != nil {
		t.Fatal(err)
	}
	return &sstack{t: t, ctx: context.Background(), clock: clock, deps: deps, devices: devices, admin: admin, ddi: dd, lock: lock, actions: actions,
		model: "succ-" + strings.ReplaceAll(local.NewUUIDs().NewID().String()[:8], "-", ""), flush: func() {}}
}

// release publishes firmware version of the stack's model (with the sha1
// DDI agents need) and rolls it out to every device.
func (s *sstack) release(version string, spec domain.RolloutSpec) (domain.Firmware, domain.Rollout) {
	s.t.Helper()
	fw, err := s.admin.PublishFirmware(s.ctx, testActor, domain.FirmwareSpec{Model: s.model, Version: version,
		URL: "https://fw.example/" + version + ".swu", SizeBytes: 10, SHA256: strings.Repeat("ab", 32), SHA1: strings.Repeat("cd", 20)})
	if err != nil {
		s.t.Fatal(err)
	}
	if spec.Percentage == 0 && len(spec.Stages) == 0 {
		spec.Percentage = 100
	}
	r, err := s.admin.StartRollout(s.ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: spec})
	if err != nil {
		s.t.Fatal(err)
	}
	return fw, r
}

// register registers a device of the stack's model running version.
func (s *sstack) register(name, version string) domain.DeviceID {
	s.t.Helper()
	id := s.model + "-" + name
	if _, err := s.admin.RegisterDevice(s.ctx, testActor, ports.RegisterDevice{DeviceID: id, Model: s.model, CurrentVersion: version}); err != nil {
		s.t.Fatal(err)
	}
	return asDeviceID(id)
}

// read is the device with its task state, as a poll's authentication reads it.
func (s *sstack) read(id domain.DeviceID) ports.AuthenticatedDevice {
	s.t.Helper()
	dev, err := s.devices.IdentifyDevice(s.ctx, id)
	if err != nil {
		s.t.Fatal(err)
	}
	return dev
}

// check is a REST check decided on dev (as read, perhaps a while ago).
func (s *sstack) check(dev ports.AuthenticatedDevice, version string) ports.CheckResult {
	s.t.Helper()
	res, err := s.devices.Check(s.ctx, ports.CheckRequest{Device: dev, Model: s.model, CurrentVersion: version})
	if err != nil {
		s.t.Fatalf("check at %s: %v", version, err)
	}
	return res
}

// event reports a progress event on the device's task.
func (s *sstack) event(id domain.DeviceID, task domain.UUID, eventID, status string) (ports.TaskView, error) {
	return s.devices.ReportEvent(s.ctx, id, task, ports.EventRequest{EventID: eventID, Status: status})
}

// version is the device's stored version, once the write-behind flushed.
func (s *sstack) version(id domain.DeviceID) string {
	s.t.Helper()
	s.flush()
	d, err := s.deps.Devices.Get(s.ctx, id)
	if err != nil {
		s.t.Fatal(err)
	}
	return d.CurrentVersion().String()
}

// tasks are the device's tasks, oldest first.
func (s *sstack) tasks(id domain.DeviceID) []domain.Task {
	s.t.Helper()
	ts, err := s.deps.Tasks.List(s.ctx, ports.TaskFilter{DeviceID: id, Limit: 100})
	if err != nil {
		s.t.Fatal(err)
	}
	return ts
}

// TestDDIPollReadBeforeSuccessNeverWritesTheOldVersionBack: a hawkBit
// device's poll reads it (version 1.1.0, its task installing); its
// success feedback lands; then the poll goes on with what it read. The
// poll carries no version of its own, so what it would record is the
// stale 1.1.0: it must not overwrite the 1.3.0 the success recorded, and
// the next poll must not offer 1.3.0 again (bug: a new task, attempt 1).
func TestDDIPollReadBeforeSuccessNeverWritesTheOldVersionBack(t *testing.T) {
	onEveryStore(t, func(t *testing.T, s *sstack) {
		s.release("1.3.0", domain.RolloutSpec{})
		id := s.register("ddi", "1.1.0")
		if _, err := s.ddi.ConfigData(s.ctx, id, "merge", map[string]string{"sw_version": "1.1.0"}); err != nil {
			t.Fatal(err)
		}
		s.clock.Add(time.Minute)
		p, err := s.ddi.Poll(s.ctx, s.read(id))
		if err != nil || p.Deployment == nil {
			t.Fatalf("first poll: %+v, %v", p, err)
		}
		action := p.Deployment.Task.ActionID()

		s.clock.Add(time.Minute)
		stale := s.read(id) // a poll's authentication, before the feedback
		if _, err := s.ddi.DeploymentFeedback(s.ctx, id, action, ddi.Feedback{Execution: "closed", Finished: "success"}); err != nil {
			t.Fatal(err)
		}
		s.clock.Add(time.Second)
		if _, err := s.ddi.Poll(s.ctx, stale); err != nil { // the poll goes on with its read
			t.Fatal(err)
		}
		if v := s.version(id); v != "1.3.0" {
			t.Fatalf("after a poll read before the success: version %q, want 1.3.0", v)
		}
		s.clock.Add(time.Minute)
		p, err = s.ddi.Poll(s.ctx, s.read(id))
		if err != nil {
			t.Fatal(err)
		}
		if p.Deployment != nil {
			t.Errorf("the installed image is offered again: task %s, attempt %d", p.Deployment.Task.ID(), p.Deployment.Task.Attempt())
		}
		if ts := s.tasks(id); len(ts) != 1 {
			t.Errorf("%d tasks, want the one that succeeded", len(ts))
		}
	})
}

// TestRESTSuccessEventRecordsTheInstalledVersion: a device's succeeded
// event stores the firmware's version as the device's, with the event, on
// every protocol (bug: only DDI did, in a second transaction, and REST
// not at all: a device that then polled with its old version got the
// same image again).
func TestRESTSuccessEventRecordsTheInstalledVersion(t *testing.T) {
	onEveryStore(t, func(t *testing.T, s *sstack) {
		s.release("1.3.0", domain.RolloutSpec{})
		id := s.register("rest", "1.1.0")
		res := s.check(s.read(id), "1.1.0")
		if res.Task == nil {
			t.Fatal("no task")
		}
		s.clock.Add(time.Minute)
		if _, err := s.event(id, res.Task.Task.ID(), "e-ok", "succeeded"); err != nil {
			t.Fatal(err)
		}
		if v := s.version(id); v != "1.3.0" {
			t.Errorf("after the success event: version %q, want 1.3.0", v)
		}
	})
}

// TestRevertedInstallIsTheNextAttemptBoundedByMaxAttempts: a device whose
// success was recorded and that then reports its old version reverted
// the install (event rule 7). The success is re-marked failed,
// INSTALL_REVERTED; the image is offered again only as the next attempt,
// and not after max_attempts (bug: a new task at attempt 1 on every
// check, each one more success in the rollout's stats, for ever).
func TestRevertedInstallIsTheNextAttemptBoundedByMaxAttempts(t *testing.T) {
	onEveryStore(t, func(t *testing.T, s *sstack) {
		two := 2
		_, r := s.release("1.3.0", domain.RolloutSpec{MaxAttempts: &two})
		id := s.register("revert", "1.1.0")
		var installed []domain.UUID
		for attempt := 1; attempt <= 2; attempt++ {
			s.clock.Add(time.Minute)
			res := s.check(s.read(id), "1.1.0")
			if res.Task == nil || res.Task.Task.Attempt() != attempt {
				t.Fatalf("check after %d installs: %+v, want a task at attempt %d", attempt-1, res.Task, attempt)
			}
			s.clock.Add(time.Minute)
			if _, err := s.event(id, res.Task.Task.ID(), "ok", "succeeded"); err != nil {
				t.Fatal(err)
			}
			installed = append(installed, res.Task.Task.ID())
		}
		s.clock.Add(time.Minute)
		if res := s.check(s.read(id), "1.1.0"); res.Task != nil {
			t.Errorf("after %d reverted installs of max_attempts 2: task at attempt %d", len(installed), res.Task.Task.Attempt())
		}
		for _, tid := range installed {
			got, err := s.deps.Tasks.Get(s.ctx, tid)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status() != domain.TaskFailed || got.ErrorCode() != domain.CodeInstallReverted {
				t.Errorf("task %d: %s %q, want failed %s", got.Attempt(), got.Status(), got.ErrorCode(), domain.CodeInstallReverted)
			}
		}
		if ts := s.tasks(id); len(ts) != 2 {
			t.Errorf("%d tasks, want 2", len(ts))
		}
		stats, err := s.deps.Tasks.RolloutStatsSince(s.ctx, r.ID(), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		// Stats count devices (event rule 5): the one device, failed.
		if stats.Succeeded != 0 || stats.Failed != 1 {
			t.Errorf("rollout stats %+v, want the device failed and none succeeded", stats)
		}
		if v := s.version(id); v != "1.1.0" {
			t.Errorf("version %q, want the 1.1.0 the device reports", v)
		}
	})
}

// TestBusyCheckDoesNotHideARevertedInstall: a check that reports the old
// version after a success but is answered SERVICE_BUSY (the lock could not
// be had, so the revert and the retry were not written) must not record
// that version either: the next check would read the old version, see no
// contradiction, and hand the image out again as a first attempt, the
// success still counted. Found by the linearizability run under a Redis
// cut.
func TestBusyCheckDoesNotHideARevertedInstall(t *testing.T) {
	onEveryStore(t, func(t *testing.T, s *sstack) {
		s.release("1.3.0", domain.RolloutSpec{})
		id := s.register("busy-revert", "1.1.0")
		res := s.check(s.read(id), "1.1.0")
		s.clock.Add(time.Minute)
		if _, err := s.event(id, res.Task.Task.ID(), "ok", "succeeded"); err != nil {
			t.Fatal(err)
		}
		installed := res.Task.Task.ID()
		s.clock.Add(time.Minute)
		s.lock.busy.Store(true)
		if _, err := s.devices.Check(s.ctx, ports.CheckRequest{Device: s.read(id), Model: s.model, CurrentVersion: "1.1.0"}); !errors.Is(err, domain.ErrServiceBusy) {
			t.Fatalf("check while the lock cannot be had: %v, want SERVICE_BUSY", err)
		}
		if v := s.version(id); v != "1.3.0" {
			t.Fatalf("after a busy check: version %q, want the installed 1.3.0 kept for the next check to judge", v)
		}
		s.lock.busy.Store(false)
		s.clock.Add(time.Minute)
		res = s.check(s.read(id), "1.1.0")
		if res.Task == nil || res.Task.Task.Attempt() != 2 {
			t.Fatalf("the check after: %+v, want the retry at attempt 2", res.Task)
		}
		got, err := s.deps.Tasks.Get(s.ctx, installed)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status() != domain.TaskFailed || got.ErrorCode() != domain.CodeInstallReverted {
			t.Fatalf("the contradicted success: %s %q, want failed %s", got.Status(), got.ErrorCode(), domain.CodeInstallReverted)
		}
		if v := s.version(id); v != "1.1.0" {
			t.Fatalf("after the revert: version %q, want the reported 1.1.0", v)
		}
	})
}

// TestCheckReadBeforeSuccessIsNoRevert: a check that read the device
// before its success (its task still active, its version the old one)
// and is answered after it reports what the device ran when it asked. It
// is not a reverted install, and writes nothing back.
func TestCheckReadBeforeSuccessIsNoRevert(t *testing.T) {
	onEveryStore(t, func(t *testing.T, s *sstack) {
		s.release("1.3.0", domain.RolloutSpec{})
		id := s.register("stale", "1.1.0")
		res := s.check(s.read(id), "1.1.0")
		if res.Task == nil {
			t.Fatal("no task")
		}
		s.clock.Add(time.Minute)
		stale := s.read(id)
		if _, err := s.event(id, res.Task.Task.ID(), "ok", "succeeded"); err != nil {
			t.Fatal(err)
		}
		s.clock.Add(time.Second)
		s.check(stale, "1.1.0")
		if got, err := s.deps.Tasks.Get(s.ctx, res.Task.Task.ID()); err != nil || got.Status() != domain.TaskSucceeded {
			t.Errorf("the success after a check read before it: %s %q (%v), want succeeded", got.Status(), got.ErrorCode(), err)
		}
		if v := s.version(id); v != "1.3.0" {
			t.Errorf("version %q, want 1.3.0", v)
		}
		s.clock.Add(time.Minute)
		if res := s.check(s.read(id), "1.3.0"); res.Task != nil {
			t.Errorf("the installed image is offered again: attempt %d", res.Task.Task.Attempt())
		}
		if ts := s.tasks(id); len(ts) != 1 {
			t.Errorf("%d tasks, want 1", len(ts))
		}
	})
}

// TestStaleCheckAfterASuccessChangesNothing: a check read before a
// success it never saw, and written after it, was sent before the device
// knew better: it contradicts nothing (event rule 7) and is decided with
// the version the success stored — no update, the success kept.
//   - read with no task, waiting (for the device's lock, behind a slow
//     replica) while another check created a task that the device then
//     installed: decided on the version it read, it offered the image
//     again as a first attempt beside the success, so that max_attempts
//     reverts later the device was handed one attempt too many (found by
//     the linearizability run, frozen-holder);
//   - read with its task active past the rollout's task time-out, so
//     planning to fail it (rule K1), the success committed first: it finds
//     no task to time out, and must not revert the success;
//   - read before the task, with 1.2.0 on offer too and 1.3.0's rollout
//     paused after the success: it plans 1.2.0, and must not offer it to
//     a device that installed 1.3.0 (bug: Postgres's one-statement
//     creation compared no version, and did).
func TestStaleCheckAfterASuccessChangesNothing(t *testing.T) {
	timeout := time.Minute
	for _, tc := range []struct {
		name       string
		spec       domain.RolloutSpec
		readBefore bool          // the stale read before the task's creation, else after wait
		wait       time.Duration // between the creation and the stale read
		lowerLeft  bool          // 1.2.0 on offer too, and 1.3.0 paused after the success
	}{
		{name: "read before the task", readBefore: true},
		{name: "read with the task past its time-out", spec: domain.RolloutSpec{TaskTimeout: &timeout}, wait: 2 * time.Minute},
		{name: "read before the task, a lower image left on offer", readBefore: true, lowerLeft: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onEveryStore(t, func(t *testing.T, s *sstack) {
				if tc.lowerLeft {
					s.release("1.2.0", domain.RolloutSpec{})
				}
				_, r13 := s.release("1.3.0", tc.spec)
				id := s.register("stale", "1.1.0")
				stale := s.read(id)
				first := s.check(s.read(id), "1.1.0")
				if first.Task == nil {
					t.Fatal("no task")
				}
				s.clock.Add(tc.wait)
				if !tc.readBefore {
					stale = s.read(id)
				}
				s.clock.Add(time.Minute)
				if _, err := s.event(id, first.Task.Task.ID(), "ok", "succeeded"); err != nil {
					t.Fatal(err)
				}
				if tc.lowerLeft {
					paused := "paused"
					if _, err := s.admin.UpdateRollout(s.ctx, testActor, r13.ID(), ports.RolloutChange{Status: &paused}); err != nil {
						t.Fatal(err)
					}
				}
				s.clock.Add(time.Second)
				if res := s.check(stale, "1.1.0"); res.Task != nil {
					t.Errorf("the stale check: %s at attempt %d, want no update", res.Task.Firmware.Version(), res.Task.Task.Attempt())
				}
				s.wantOneSuccess(t, id, first.Task.Task.ID())
			})
		})
	}
}

// TestStaleCheckReportingAboveASuccessKeepsItsReport: a check whose
// report is above the version a success stored since its read is not
// decided with that version: the device's report stands, and nothing
// below it is offered (here 1.3.5, above the success's 1.3.0 and below
// the 1.4.0 the device reports).
func TestStaleCheckReportingAboveASuccessKeepsItsReport(t *testing.T) {
	onEveryStore(t, func(t *testing.T, s *sstack) {
		s.release("1.3.0", domain.RolloutSpec{})
		id := s.register("stale-above", "1.1.0")
		first := s.check(s.read(id), "1.1.0")
		if first.Task == nil {
			t.Fatal("no task")
		}
		s.clock.Add(time.Minute)
		s.release("1.3.5", domain.RolloutSpec{})
		stale := s.read(id) // its pending 1.3.0 task, below the 1.4.0 it will report
		if _, err := s.event(id, first.Task.Task.ID(), "ok", "succeeded"); err != nil {
			t.Fatal(err)
		}
		s.clock.Add(time.Second)
		if res := s.check(stale, "1.4.0"); res.Task != nil {
			t.Errorf("a check reporting 1.4.0: %s offered, want no update", res.Task.Firmware.Version())
		}
		if ts := s.tasks(id); len(ts) != 1 {
			t.Errorf("%d tasks, want 1", len(ts))
		}
	})
}

// TestStaleRevertReportAfterTheRetrysSuccessChangesNothing: the device's
// version moves and comes back. A check read the device at 1.3.0 after its
// first success and reports 1.1.0; before it writes, a second check with
// the same report reverts that success, the retry is created and
// succeeds, and the device runs 1.3.0 again. The stale check finds the
// version as it read it, but the retry's success came after its read: it
// is the device's word after the report, not reverted (bug: it was, and
// the device got a third attempt it never needed).
func TestStaleRevertReportAfterTheRetrysSuccessChangesNothing(t *testing.T) {
	onEveryStore(t, func(t *testing.T, s *sstack) {
		id := s.register("aba", "1.1.0")
		stale, retry := s.revertedAndRetried(t, id)
		if res := s.check(stale, "1.1.0"); res.Task != nil {
			t.Errorf("the stale check: attempt %d of %s, want no update", res.Task.Task.Attempt(), res.Task.Firmware.Version())
		}
		if got, err := s.deps.Tasks.Get(s.ctx, retry.ID()); err != nil || got.Status() != domain.TaskSucceeded {
			t.Errorf("the retry: %s %q (%v), want succeeded", got.Status(), got.ErrorCode(), err)
		}
		if v := s.version(id); v != "1.3.0" {
			t.Errorf("version %q, want 1.3.0", v)
		}
		if ts := s.tasks(id); len(ts) != 2 {
			t.Errorf("%d tasks, want 2", len(ts))
		}
	})
}

// revertedAndRetried rolls 1.3.0 out to device id (at 1.1.0): its first
// task succeeds; between is the device read just after; a check reporting
// 1.1.0 then reverts that success, and its retry (attempt 2) succeeds.
func (s *sstack) revertedAndRetried(t *testing.T, id domain.DeviceID) (between ports.AuthenticatedDevice, retry domain.Task) {
	t.Helper()
	s.release("1.3.0", domain.RolloutSpec{})
	first := s.check(s.read(id), "1.1.0")
	if first.Task == nil {
		t.Fatal("no task")
	}
	s.clock.Add(time.Minute)
	if _, err := s.event(id, first.Task.Task.ID(), "ok", "succeeded"); err != nil {
		t.Fatal(err)
	}
	s.clock.Add(time.Minute)
	between = s.read(id) // 1.3.0, no active task
	s.clock.Add(time.Second)
	res := s.check(s.read(id), "1.1.0") // reverts the first success
	if res.Task == nil || res.Task.Task.Attempt() != 2 {
		t.Fatalf("after the revert: %+v, want attempt 2", res.Task)
	}
	s.clock.Add(time.Minute)
	if _, err := s.event(id, res.Task.Task.ID(), "ok2", "succeeded"); err != nil {
		t.Fatal(err)
	}
	s.clock.Add(time.Minute)
	return between, res.Task.Task
}

// TestChecksReadBeforeAndAfterTheRetrysSuccessAreDecidedApart: two checks
// of one device reporting 1.1.0 wait for the same lock, one read before the
// retry's success (it contradicts nothing), one after it (it reverts it).
// A replica coalesces concurrent creations of one device and firmware into
// one (createOnce); these two may not share an answer (bug: the later one
// got the earlier one's "no update", and the revert was lost).
func TestChecksReadBeforeAndAfterTheRetrysSuccessAreDecidedApart(t *testing.T) {
	onEveryStore(t, func(t *testing.T, s *sstack) {
		id := s.register("apart", "1.1.0")
		before, retry := s.revertedAndRetried(t, id)
		after := s.read(id)

		release := make(chan struct{})
		s.lock.hold.Store(&release)
		var wg sync.WaitGroup
		wg.Go(func() { s.check(before, "1.1.0") })
		<-s.lock.entered // the first holds the creation's flight
		wg.Go(func() { s.check(after, "1.1.0") })
		select {
		case <-s.lock.entered: // a flight of its own
		case <-time.After(time.Second): // joined the first's flight
		}
		s.lock.hold.Store(nil)
		close(release)
		wg.Wait()
		if got, err := s.deps.Tasks.Get(s.ctx, retry.ID()); err != nil || got.ErrorCode() != domain.CodeInstallReverted {
			t.Errorf("the retry after the check read after its success: %s %q (%v), want it reverted", got.Status(), got.ErrorCode(), err)
		}
	})
}

// wantOneSuccess asserts that the device's one task is task, succeeded,
// and that the device runs 1.3.0.
func (s *sstack) wantOneSuccess(t *testing.T, id domain.DeviceID, task domain.UUID) {
	t.Helper()
	if got, err := s.deps.Tasks.Get(s.ctx, task); err != nil || got.Status() != domain.TaskSucceeded {
		t.Errorf("the success: %s %q (%v), want succeeded", got.Status(), got.ErrorCode(), err)
	}
	if v := s.version(id); v != "1.3.0" {
		t.Errorf("version %q, want 1.3.0", v)
	}
	if ts := s.tasks(id); len(ts) != 1 {
		t.Errorf("%d tasks, want 1", len(ts))
	}
}

// TestStaleDDIPollAfterASuccessIsNoRevert: a DDI poll carries no version
// and checks with the stored one. A poll that read the device with no
// task and writes after a task was created and installed must not take
// the old stored version for a report below the success (a revert), nor
// offer the image again: it checks with the version as its transaction
// reads it, the one the success stored.
func TestStaleDDIPollAfterASuccessIsNoRevert(t *testing.T) {
	onEveryStore(t, func(t *testing.T, s *sstack) {
		s.release("1.3.0", domain.RolloutSpec{})
		id := s.register("stale-ddi", "1.1.0")
		if _, err := s.ddi.ConfigData(s.ctx, id, "merge", map[string]string{"sw_version": "1.1.0"}); err != nil {
			t.Fatal(err)
		}
		stale := s.read(id) // no task yet
		p, err := s.ddi.Poll(s.ctx, s.read(id))
		if err != nil || p.Deployment == nil {
			t.Fatalf("first poll: %+v, %v", p, err)
		}
		task := p.Deployment.Task
		s.clock.Add(time.Minute)
		if _, err := s.ddi.DeploymentFeedback(s.ctx, id, task.ActionID(), ddi.Feedback{Execution: "closed", Finished: "success"}); err != nil {
			t.Fatal(err)
		}
		s.clock.Add(time.Second)
		if p, err := s.ddi.Poll(s.ctx, stale); err != nil {
			t.Errorf("the stale poll: %v", err)
		} else if p.Deployment != nil {
			t.Errorf("the stale poll: the image again at attempt %d, want no deployment", p.Deployment.Task.Attempt())
		}
		s.wantOneSuccess(t, id, task.ID())
	})
}

// hookedDevices is a device repository that runs before ahead of every
// Update: what lands between a use case's read and its write.
type hookedDevices struct {
	ports.DeviceRepository
	before func()
}

func (h hookedDevices) Update(ctx context.Context, id domain.DeviceID, fn func(*domain.Device) error, rec domain.AuditRecord) (domain.Device, error) {
	h.before()
	return h.DeviceRepository.Update(ctx, id, fn, rec)
}

// TestDDIConfigDataReadBeforeASuccessKeepsTheSuccessVersion: a hawkBit
// device's configData reports 1.1.0 while its 1.3.0 task is installing;
// the task's success lands after configData read the device and before it
// stores the report. The report was made before the device knew better:
// the success's 1.3.0 stays stored, and the next poll offers nothing (bug:
// configData stored 1.1.0 over it, and the poll handed 1.3.0 out again).
func TestDDIConfigDataReadBeforeASuccessKeepsTheSuccessVersion(t *testing.T) {
	onEveryStore(t, func(t *testing.T, s *sstack) {
		s.release("1.3.0", domain.RolloutSpec{})
		id := s.register("ddi-config", "1.1.0")
		p, err := s.ddi.Poll(s.ctx, s.read(id))
		if err != nil || p.Deployment == nil {
			t.Fatalf("first poll: %+v, %v", p, err)
		}
		task := p.Deployment.Task
		s.clock.Add(time.Minute)
		var once sync.Once
		succeed := func() {
			once.Do(func() {
				if _, err := s.ddi.DeploymentFeedback(s.ctx, id, task.ActionID(), ddi.Feedback{Execution: "closed", Finished: "success"}); err != nil {
					t.Fatal(err)
				}
			})
		}
		hooked, err := ddi.New(s.devices, hookedDevices{DeviceRepository: s.deps.Devices, before: succeed}, s.deps.Rollouts, s.deps.Attributes,
			s.actions, s.deps.Tasks, s.deps.Metrics, s.clock, application.PollInterval(time.Hour), "sw_version")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hooked.ConfigData(s.ctx, id, "merge", map[string]string{"sw_version": "1.1.0"}); err != nil {
			t.Fatal(err)
		}
		s.clock.Add(time.Second)
		if p, err := s.ddi.Poll(s.ctx, s.read(id)); err != nil || p.Deployment != nil {
			t.Errorf("the next poll: %+v, %v; want no deployment", p.Deployment, err)
		}
		s.wantOneSuccess(t, id, task.ID())
	})
}

// TestImplicitSuccessJudgesTheRolloutGate: a check whose device reports
// its task's version ends the task as succeeded (check rule 3); like a
// final event, that success judges its rollout in the same transaction
// (rule K1's last sentence), so a stage whose gate it meets advances
// without waiting for any other device's event.
func TestImplicitSuccessJudgesTheRolloutGate(t *testing.T) {
	onEveryStore(t, func(t *testing.T, s *sstack) {
		_, r := s.release("1.3.0", domain.RolloutSpec{Stages: []domain.StageRequest{
			{Percentage: new(50), MinFinished: new(1), SuccessPercent: new(100)}, {Percentage: new(100)},
		}})
		var id domain.DeviceID
		var task domain.UUID
		for i := 0; i < 30 && task.IsZero(); i++ {
			id = s.register(fmt.Sprintf("gate-%02d", i), "1.1.0")
			if res := s.check(s.read(id), "1.1.0"); res.Task != nil {
				task = res.Task.Task.ID()
			}
		}
		if task.IsZero() {
			t.Fatal("no device of 30 admitted at 50%")
		}
		s.clock.Add(time.Minute)
		s.check(s.read(id), "1.3.0") // rebooted into 1.3.0, no event sent
		if got, err := s.deps.Tasks.Get(s.ctx, task); err != nil || got.Status() != domain.TaskSucceeded {
			t.Fatalf("the implicit success: %s (%v)", got.Status(), err)
		}
		got, err := s.deps.Rollouts.Get(s.ctx, r.ID())
		if err != nil {
			t.Fatal(err)
		}
		if got.Stage() != 1 || got.Percentage() != 100 {
			t.Errorf("after the stage's one success: stage %d at %d%%, want stage 1 at 100%% (the gate judged)", got.Stage(), got.Percentage())
		}
	})
}

// TestLateSuccessAfterTimedOutRecordsTheVersion: a device whose task the
// service failed as TIMED_OUT (rule K1) finishes after all and sends
// succeeded. The answer stays TASK_FINISHED (event rule 3: the task is
// over, its attempt counted) — but the device runs the image, so its
// version is recorded, and its next poll — a DDI poll, which carries no
// version — is not offered the image again (it was: attempt 2).
func TestLateSuccessAfterTimedOutRecordsTheVersion(t *testing.T) {
	onEveryStore(t, func(t *testing.T, s *sstack) {
		timeout := time.Minute
		s.release("1.3.0", domain.RolloutSpec{TaskTimeout: &timeout})
		id := s.register("late", "1.1.0")
		if _, err := s.ddi.ConfigData(s.ctx, id, "merge", map[string]string{"sw_version": "1.1.0"}); err != nil {
			t.Fatal(err)
		}
		p, err := s.ddi.Poll(s.ctx, s.read(id))
		if err != nil || p.Deployment == nil {
			t.Fatalf("first poll: %+v, %v", p, err)
		}
		task := p.Deployment.Task
		s.clock.Add(2 * time.Minute)
		if _, err := s.ddi.Poll(s.ctx, s.read(id)); err != nil { // fails the stuck task
			t.Fatal(err)
		}
		if got, err := s.deps.Tasks.Get(s.ctx, task.ID()); err != nil || got.ErrorCode() != domain.CodeTimedOut {
			t.Fatalf("the stuck task: %s %q (%v), want failed %s", got.Status(), got.ErrorCode(), err, domain.CodeTimedOut)
		}
		s.clock.Add(time.Second)
		_, err = s.ddi.DeploymentFeedback(s.ctx, id, task.ActionID(), ddi.Feedback{Execution: "closed", Finished: "success"})
		if !errors.Is(err, domain.ErrTaskFinished) {
			t.Errorf("a late success: %v, want TASK_FINISHED", err)
		}
		if v := s.version(id); v != "1.3.0" {
			t.Errorf("after a late success: version %q, want 1.3.0 (the device runs it)", v)
		}
		s.clock.Add(time.Minute)
		if p, err := s.ddi.Poll(s.ctx, s.read(id)); err != nil || p.Deployment != nil {
			t.Errorf("the next poll: %+v (%v), want no deployment", p.Deployment, err)
		}
	})
}

// TestDDIConfigDataBelowASuccessIsARevertedInstall: a hawkBit device
// reports its version only in configData, and its polls check with the
// stored one. A configData below the version its success recorded is a
// reverted install (event rule 7): the success becomes a failed attempt
// and the next poll offers the next attempt (it was: nothing ever, the
// device left on the old image with its success counted).
func TestDDIConfigDataBelowASuccessIsARevertedInstall(t *testing.T) {
	onEveryStore(t, func(t *testing.T, s *sstack) {
		s.release("1.3.0", domain.RolloutSpec{})
		id := s.register("ddi-revert", "1.1.0")
		if _, err := s.ddi.ConfigData(s.ctx, id, "merge", map[string]string{"sw_version": "1.1.0"}); err != nil {
			t.Fatal(err)
		}
		p, err := s.ddi.Poll(s.ctx, s.read(id))
		if err != nil || p.Deployment == nil {
			t.Fatalf("first poll: %+v, %v", p, err)
		}
		first := p.Deployment.Task
		s.clock.Add(time.Minute)
		if _, err := s.ddi.DeploymentFeedback(s.ctx, id, first.ActionID(), ddi.Feedback{Execution: "closed", Finished: "success"}); err != nil {
			t.Fatal(err)
		}
		s.clock.Add(time.Minute)
		if _, err := s.ddi.ConfigData(s.ctx, id, "merge", map[string]string{"sw_version": "1.1.0"}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.deps.Tasks.Get(s.ctx, first.ID()); err != nil || got.ErrorCode() != domain.CodeInstallReverted {
			t.Errorf("the contradicted success: %s %q (%v), want failed %s", got.Status(), got.ErrorCode(), err, domain.CodeInstallReverted)
		}
		s.clock.Add(time.Minute)
		p, err = s.ddi.Poll(s.ctx, s.read(id))
		if err != nil || p.Deployment == nil || p.Deployment.Task.Attempt() != 2 {
			t.Errorf("the poll after a reverted install: %+v (%v), want the next attempt", p.Deployment, err)
		}
	})
}
