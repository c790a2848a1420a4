package application_test

import (
	"context"
	"encoding/base64"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// hangUpAfterEvent is a task store whose caller hangs up the moment an
// event is stored: the request's context is cancelled after the commit.
type hangUpAfterEvent struct {
	application.TaskStore
	cancel context.CancelFunc
}

func (h hangUpAfterEvent) InTaskTx(ctx context.Context, fn func(ports.TaskTx) error) error {
	err := h.TaskStore.InTaskTx(ctx, fn)
	h.cancel()
	return err
}

// The final event that reaches the failure threshold is
// stored, then the device hangs up. The rollout must be paused all the
// same, and the device's retry of the same event (a replay) must find it
// paused — an evaluation run after the commit on the request's context
// was skipped by the hang-up and never retried by the replay.
func TestAutoPauseSurvivesHangUpAfterTheFinalEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.watchedRollout(2)
	first := e.device("1.0.0")
	e.mustEvent(asDeviceID(first), e.check(first, "1.0.0").Task.Task.ID(), "end", "failed") // 1 of 1: below min_sample

	d := e.device("1.0.0")
	task := e.check(d, "1.0.0").Task.Task
	ctx, cancel := context.WithCancel(e.ctx)
	deps := e.deps
	deps.Tasks = hangUpAfterEvent{TaskStore: e.deps.Tasks, cancel: cancel}
	hungUp, err := application.NewDevices(deps, application.PollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// The answer may be lost with the connection; what is stored is what counts.
	_, _ = hungUp.ReportEvent(ctx, asDeviceID(d), task.ID(), ports.EventRequest{EventID: "end", Status: "failed"})
	if got := e.task(task.ID()); got.Status() != domain.TaskFailed {
		t.Fatalf("the event was not stored: %s", got.Status())
	}
	v, err := e.admin.GetRollout(e.ctx, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if v.Rollout.Status() != domain.RolloutPaused || v.Rollout.PausedReason() != domain.PausedAuto {
		t.Fatalf("2 of 2 failed, threshold 50%%: rollout %s (%s) after the device hung up, want paused (auto)",
			v.Rollout.Status(), v.Rollout.PausedReason())
	}
	// The device retries: a replay, answered 200 with the task as it is.
	if _, err := e.event(asDeviceID(d), task.ID(), "end", "failed", nil); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if newcomer := e.device("1.0.0"); e.check(newcomer, "1.0.0").Task != nil {
		t.Fatal("an auto-paused rollout still creates tasks")
	}
}

// revokeInTheWindow is a lock that lets an operator revoke a firmware
// between the check's lock-free plan and its insert (after the plan chose
// the firmware, before the transaction that inserts).
type revokeInTheWindow struct {
	ports.Locker
	revoke func()
}

func (l revokeInTheWindow) WithLock(ctx context.Context, name string, fn func(context.Context) error) error {
	l.revoke()
	return l.Locker.WithLock(ctx, name, fn)
}

// A firmware revoked after the check chose it and before
// the task is inserted is not handed out: the check plans again as if it
// had never been offered, and hands out the lower offer under that
// firmware's own lock, in the same poll. No task exists for the revoked
// one.
func TestRevokeBetweenPlanAndInsertCreatesNoTask(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		pause bool // pause the rollout instead of revoking the firmware
	}{{name: "firmware revoked"}, {name: "rollout paused", pause: true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			lower := e.firmware("1.1.0")
			e.rollout(lower, 100)
			fw := e.firmware("1.2.0")
			r := e.rollout(fw, 100)
			deps := e.deps
			deps.Locker = revokeInTheWindow{Locker: e.deps.Locker, revoke: func() {
				var err error
				if tc.pause {
					_, err = e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{Status: strp("paused")})
				} else {
					_, err = e.admin.RevokeFirmware(e.ctx, testActor, fw.ID())
				}
				if err != nil {
					t.Error(err)
				}
			}}
			devices, err := application.NewDevices(deps, application.PollInterval(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			d := e.device("1.0.0")
			res, err := devices.Check(e.ctx, e.req(d, model, "1.0.0"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Task == nil || res.Outcome != ports.CheckCreated || res.Task.Firmware.ID() != lower.ID() {
				t.Fatalf("check answered %s with %+v, want a task created for 1.1.0", res.Outcome, res.Task)
			}
			if ts := e.tasksOf(asDeviceID(d)); len(ts) != 1 || ts[0].FirmwareID() != lower.ID() {
				t.Fatalf("tasks %v, want the one of 1.1.0 alone", ts)
			}
			// The next check hands out the same task.
			next := e.check(d, "1.0.0")
			if next.Task == nil || next.Task.Task.ID() != res.Task.Task.ID() {
				t.Fatalf("next check: %+v, want task %s again", next.Task, res.Task.Task.ID())
			}
		})
	}
}

// The attempt number is computed from what the locked
// transaction reads, not from the snapshot the check started with.
func TestAttemptComesFromTheLockedRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.rollout(e.firmware("1.1.0"), 100)
	d := e.device("1.0.0")
	stale := e.req(d, model, "1.0.0") // no task, no failure yet
	e.mustEvent(asDeviceID(d), e.check(d, "1.0.0").Task.Task.ID(), "end", "failed")
	res, err := e.devices.Check(e.ctx, stale)
	if err != nil || res.Task == nil {
		t.Fatalf("check: %+v %v", res, err)
	}
	if got := res.Task.Task.Attempt(); got != 2 {
		t.Fatalf("attempt %d after one failure, want 2", got)
	}
}

// A well-formed cursor holding a time far outside the
// timestamps any store keeps is a validation error, never an internal one.
func TestForgedCursorIsAValidationError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, micros := range []string{"9223372036854775807", "-9223372036854775808", "253402300800000000", "-62135596800000001"} {
		forged := base64.RawURLEncoding.EncodeToString([]byte(micros + "|3f2504e0-4f89-41d3-9a0c-0305e82c3301"))
		_, err := e.admin.ListTasks(e.ctx, ports.TaskQuery{After: forged})
		if !errors.Is(err, domain.ErrValidation) {
			t.Errorf("cursor time %s: %v, want a validation error", micros, err)
		}
	}
	// The bounds themselves are accepted.
	for _, micros := range []string{"253402300799999999", "-62135596800000000", "0"} {
		c := base64.RawURLEncoding.EncodeToString([]byte(micros + "|3f2504e0-4f89-41d3-9a0c-0305e82c3301"))
		if _, err := e.admin.ListTasks(e.ctx, ports.TaskQuery{After: c}); err != nil {
			t.Errorf("cursor time %s: %v", micros, err)
		}
	}
}

// gateLocker holds every caller until n of them are inside WithLock (or a
// second passed), then lets them go one at a time.
type gateLocker struct {
	ports.Locker
	n       int
	arrived chan struct{}
}

func (g *gateLocker) WithLock(ctx context.Context, name string, fn func(context.Context) error) error {
	g.arrived <- struct{}{}
	deadline := time.After(time.Second)
	for len(g.arrived) < g.n {
		select {
		case <-deadline:
			return g.Locker.WithLock(ctx, name, fn)
		case <-time.After(time.Millisecond):
		}
	}
	return g.Locker.WithLock(ctx, name, fn)
}

// Two polls of one device for one firmware that report
// different versions are planned each on its own version — they do not
// share one in-process flight (whose answer was computed for the other
// version).
func TestFlightKeyIncludesTheReportedVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.rollout(e.firmware("2.0.0"), 100)
	gate := &gateLocker{Locker: e.deps.Locker, n: 2, arrived: make(chan struct{}, 2)}
	deps := e.deps
	deps.Locker = gate
	devices, err := application.NewDevices(deps, application.PollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	d := e.device("1.0.0")
	reqs := []ports.CheckRequest{e.req(d, model, "1.0.0"), e.req(d, model, "1.5.0")}
	done := make(chan error, len(reqs))
	for _, r := range reqs {
		go func() {
			res, err := devices.Check(e.ctx, r)
			if err == nil && res.Task == nil {
				err = errors.New("no task")
			}
			done <- err
		}()
	}
	for range reqs {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := len(gate.arrived); got != 2 {
		t.Fatalf("%d lock calls for two polls reporting different versions, want 2 (one flight each)", got)
	}
	if n := len(e.tasksOf(asDeviceID(d))); n != 1 {
		t.Fatalf("%d tasks, want 1", n)
	}
}

// staleOffers is a catalog that has not heard of one firmware yet (a
// replica's cache within its staleness window).
type staleOffers struct {
	ports.RolloutRepository
	unseen string
}

func (s staleOffers) Offers(ctx context.Context, model string) ([]domain.Offer, error) {
	all, err := s.RolloutRepository.Offers(ctx, model)
	var out []domain.Offer
	for _, o := range all {
		if o.Firmware.ID() != asUUID(s.unseen) {
			out = append(out, o)
		}
	}
	return out, err
}

// A replica whose catalog lags behind never supersedes a
// pending task with a lower version; it hands the pending task out.
func TestStaleCatalogNeverSupersedesWithALowerVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.rollout(e.firmware("1.1.0"), 100)
	higher := e.firmware("1.2.0")
	e.rollout(higher, 100)
	d := e.device("1.0.0")
	pending := e.check(d, "1.0.0").Task.Task // for 1.2.0, on a fresh replica
	if pending.FirmwareID() != higher.ID() {
		t.Fatalf("fresh replica created %s, want 1.2.0", pending.FirmwareID())
	}
	deps := e.deps
	deps.Rollouts = staleOffers{RolloutRepository: e.deps.Rollouts, unseen: higher.ID().String()}
	lagging, err := application.NewDevices(deps, application.PollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	res, err := lagging.Check(e.ctx, e.req(d, model, "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Task == nil || res.Task.Task.ID() != pending.ID() || res.Outcome != ports.CheckReused {
		t.Fatalf("lagging replica answered %s with %+v, want the pending 1.2.0 task", res.Outcome, res.Task)
	}
	if got := e.task(pending.ID()); got.Status() != domain.TaskPending {
		t.Fatalf("pending task is %s (%s), want pending", got.Status(), got.ErrorCode())
	}
}

// countingTasks counts the calls a check makes on the task store.
type countingTasks struct {
	application.TaskStore
	calls *int
}

func (c countingTasks) CheckViewOf(ctx context.Context, id domain.DeviceID) (ports.CheckView, error) {
	*c.calls++
	return c.TaskStore.CheckViewOf(ctx, id)
}

func (c countingTasks) Active(ctx context.Context, id domain.DeviceID) (domain.Task, error) {
	*c.calls++
	return c.TaskStore.Active(ctx, id)
}

func (c countingTasks) InTaskTx(ctx context.Context, fn func(ports.TaskTx) error) error {
	*c.calls++
	return c.TaskStore.InTaskTx(ctx, fn)
}

// A check that changes nothing decides on the task state that came with the
// device's authentication and reads no more of it; without that state (an
// edge that identified the device by other means) it reads it once.
func TestCheckReadsTheTaskStateOnlyWhenNotGiven(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.rollout(e.firmware("1.1.0"), 100)
	d := e.device("1.0.0")
	created := e.check(d, "1.0.0").Task.Task
	calls := 0
	devices := e.devicesWith(func(d *application.Deps) { d.Tasks = countingTasks{TaskStore: e.deps.Tasks, calls: &calls} })
	withState := e.req(d, model, "1.0.0")
	res, err := devices.Check(e.ctx, withState)
	if err != nil || res.Task == nil || res.Task.Task.ID() != created.ID() || res.Outcome != ports.CheckReused {
		t.Fatalf("reuse: %+v %v", res, err)
	}
	if calls != 0 {
		t.Fatalf("a reuse with the task state at hand made %d task store calls, want 0", calls)
	}
	bare := withState
	bare.Device.Tasks = nil
	res, err = devices.Check(e.ctx, bare)
	if err != nil || res.Task == nil || res.Task.Task.ID() != created.ID() {
		t.Fatalf("reuse without the task state: %+v %v", res, err)
	}
	if calls != 1 {
		t.Fatalf("a reuse without the task state made %d task store calls, want 1", calls)
	}
}

// hookOnce is a lock that runs a function once, before its first hold: a
// window between a check's lock-free plan and its writing transaction.
type hookOnce struct {
	ports.Locker
	once *sync.Once
	hook func()
}

func (l hookOnce) WithLock(ctx context.Context, name string, fn func(context.Context) error) error {
	l.once.Do(l.hook)
	return l.Locker.WithLock(ctx, name, fn)
}

// When what the writing transaction sees makes the plan choose another
// firmware than the one whose lock was taken — here the device used up its
// last attempt at 3.0.0 in the window — the check creates the other
// firmware's task under that firmware's lock, in the same poll. It once
// answered "no update", which no order of the device's calls explains
// (found by the linearizability run under a Redis cut).
func TestCheckFollowsItsPlanToAnotherFirmware(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	older := e.firmware("2.0.0")
	e.rollout(older, 100)
	e.rollout(e.firmware("3.0.0"), 100)
	d := e.device("1.0.0")
	for range 2 {
		e.mustEvent(asDeviceID(d), e.check(d, "1.0.0").Task.Task.ID(), "end", "failed")
	}
	stale := e.req(d, model, "1.0.0") // two failures at 3.0.0: one attempt left
	deps := e.deps
	deps.Locker = hookOnce{Locker: e.deps.Locker, once: new(sync.Once), hook: func() {
		last := e.check(d, "1.0.0").Task.Task
		if last.Attempt() != 3 {
			t.Errorf("the window's task is attempt %d, want 3", last.Attempt())
		}
		e.mustEvent(asDeviceID(d), last.ID(), "end", "failed")
	}}
	devices, err := application.NewDevices(deps, application.PollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	res, err := devices.Check(e.ctx, stale)
	if err != nil {
		t.Fatal(err)
	}
	if res.Task == nil || res.Outcome != ports.CheckCreated || res.Task.Firmware.ID() != older.ID() {
		t.Fatalf("check answered %s with %+v, want a task created for 2.0.0", res.Outcome, res.Task)
	}
}

// failJudgement is a task store whose transactions after the first fail
// as a database gone away would: the event's transaction commits, the
// judgement after it fails.
type failJudgement struct {
	application.TaskStore
	calls *int
}

func (f failJudgement) InTaskTx(ctx context.Context, fn func(ports.TaskTx) error) error {
	if *f.calls++; *f.calls > 1 {
		return domain.ErrServiceBusy
	}
	return f.TaskStore.InTaskTx(ctx, fn)
}

// A final event whose judgement fails after the commit is answered
// SERVICE_BUSY, its transition counted once, as it is stored; the resend,
// a replay, makes the judgement (the rollout pauses) and counts nothing.
func TestFinalEventWhoseJudgementFailsIsBusyAndStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.watchedRollout(1)
	d := e.device("1.0.0")
	task := e.check(d, "1.0.0").Task.Task
	m := &outcomes{}
	calls := 0
	failing := e.devicesWith(func(deps *application.Deps) {
		deps.Metrics = m
		deps.Tasks = failJudgement{TaskStore: e.deps.Tasks, calls: &calls}
	})
	_, err := failing.ReportEvent(e.ctx, asDeviceID(d), task.ID(), ports.EventRequest{EventID: "end", Status: "failed"})
	if !errors.Is(err, domain.ErrServiceBusy) {
		t.Fatalf("a failed judgement answered %v, want SERVICE_BUSY", err)
	}
	if got := e.task(task.ID()); got.Status() != domain.TaskFailed {
		t.Fatalf("task %s, want the event stored before its judgement", got.Status())
	}
	if v, _ := e.admin.GetRollout(e.ctx, r.ID()); v.Rollout.Status() != domain.RolloutActive {
		t.Fatalf("rollout %s, want active: its judgement failed", v.Rollout.Status())
	}
	resend := e.devicesWith(func(deps *application.Deps) { deps.Metrics = m })
	if _, err := resend.ReportEvent(e.ctx, asDeviceID(d), task.ID(), ports.EventRequest{EventID: "end", Status: "failed"}); err != nil {
		t.Fatalf("resend: %v", err)
	}
	if v, _ := e.admin.GetRollout(e.ctx, r.ID()); v.Rollout.Status() != domain.RolloutPaused {
		t.Fatalf("rollout %s after the resend, want paused by its threshold", v.Rollout.Status())
	}
	if m.transitions["failed"] != 1 || len(m.transitions) != 1 {
		t.Fatalf("transitions %v, want failed once", m.transitions)
	}
}
