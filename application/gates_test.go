package application_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// onEachStore runs test against the use cases over the memory store and
// over Postgres (a database cloned for the test; skipped without one),
// each with a manual clock starting at start: a rule that a store helps
// decide (what it counts, what it locks) holds on both.
func onEachStore(t *testing.T, start time.Time, test func(t *testing.T, e *env, clock *manualClock)) {
	t.Run("memory", func(t *testing.T) {
		e, clock := newPolicyEnv(t, start)
		test(t, e, clock)
	})
	t.Run("postgres", func(t *testing.T) {
		db, _ := testenv.PostgresDB(t)
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			t.Fatal(err)
		}
		clock := &manualClock{now: start}
		deps := application.Deps{
			Devices: repos.Devices, Firmwares: repos.Firmwares, Rollouts: repos.Rollouts, Tasks: repos.Tasks,
			Locker: local.NewLocker(defaultWait, ports.NopLockMetrics{}), Clock: clock, IDs: local.NewUUIDs(),
			Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
			Attributes: postgres.NewAttributeRepository(db), Directory: postgres.NewDeviceDirectory(db),
		}
		devices, admin := testenv.UseCases(t, deps, time.Hour)
		test(t, &env{t: t, ctx: context.Background(), deps: deps, devices: devices, admin: admin}, clock)
	})
}

// devicesIn registers devices until n of them are in the rollout's bucket
// range [from, to).
func (e *env) devicesIn(r domain.Rollout, from, to, n int) []string {
	e.t.Helper()
	var out []string
	for len(out) < n {
		d := e.device("1.0.0")
		if b := domain.Bucket(r.ID().String(), d); b >= from && b < to {
			out = append(out, d)
		}
	}
	return out
}

// finish gives the device a task (it must be offered one) and reports its
// final status.
func (e *env) finish(d, status string) {
	e.t.Helper()
	res := e.check(d, "1.0.0")
	if res.Task == nil {
		e.t.Fatalf("device %s was offered nothing", d)
	}
	e.mustEvent(asDeviceID(d), res.Task.Task.ID(), "end-"+d, status)
}

func (e *env) rolloutNow(id domain.UUID) domain.Rollout {
	e.t.Helper()
	v, err := e.admin.GetRollout(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return v.Rollout
}

// A stage's gate counts only the tasks created in that stage (stage rule
// G1): the first stage's successes do not make the second stage's sample.
func TestStageGateCountsOnlyTheStagesTasks(t *testing.T) {
	onEachStore(t, policyStart, func(t *testing.T, e *env, clock *manualClock) {
		fw := e.firmware("2.0.0")
		r := e.rollout(fw, 0, func(s *domain.RolloutSpec) {
			s.Stages = []domain.StageRequest{
				{Percentage: new(50), MinFinished: new(2), SuccessPercent: new(100)},
				{Percentage: new(60), MinFinished: new(3), SuccessPercent: new(50)},
				{Percentage: new(100)},
			}
		})
		first := e.devicesIn(r, 0, 50, 3)
		for _, d := range first[:2] {
			clock.Add(time.Second)
			e.finish(d, "succeeded")
		}
		if got := e.rolloutNow(r.ID()); got.Stage() != 1 {
			t.Fatalf("stage %d after the first stage's gate held, want 1", got.Stage())
		}
		clock.Add(time.Second)
		e.finish(first[2], "succeeded")
		// One of the second stage's three: its gate has not held. Counting
		// the first stage's two as well would make it hold and advance.
		got := e.rolloutNow(r.ID())
		if got.Stage() != 1 || !got.GateMetAt().IsZero() {
			t.Fatalf("stage %d, gate met at %v: the second stage counted the first stage's tasks", got.Stage(), got.GateMetAt())
		}
	})
}

// The failure threshold (event rule 5) is judged in every stage, on the
// whole rollout, not only in the first.
func TestFailureThresholdAppliesInEveryStage(t *testing.T) {
	onEachStore(t, policyStart, func(t *testing.T, e *env, clock *manualClock) {
		fw := e.firmware("2.0.0")
		r := e.rollout(fw, 0, func(s *domain.RolloutSpec) {
			threshold, sample := 50, 2
			s.FailureThresholdPercent, s.MinSample = &threshold, &sample
			s.Stages = []domain.StageRequest{
				{Percentage: new(50), MinFinished: new(1), SuccessPercent: new(100)},
				{Percentage: new(100), MinFinished: new(10), SuccessPercent: new(100)}, // no gate judgement in this test
			}
		})
		first := e.devicesIn(r, 0, 50, 1)
		clock.Add(time.Second)
		e.finish(first[0], "succeeded")
		if got := e.rolloutNow(r.ID()); got.Stage() != 1 || got.Status() != domain.RolloutActive {
			t.Fatalf("stage %d %s after the first stage's gate held, want stage 1 active", got.Stage(), got.Status())
		}
		clock.Add(time.Second)
		e.finish(e.devicesIn(r, 50, 100, 1)[0], "failed")
		got := e.rolloutNow(r.ID())
		h := got.History()
		if got.Status() != domain.RolloutPaused || got.PausedReason() != domain.PausedAuto ||
			!strings.Contains(h[len(h)-1].Reason, "failure threshold") {
			t.Fatalf("rollout %s (%q), last stage %+v: 1 of 2 devices failed in the second stage, want paused by the threshold",
				got.Status(), got.PausedReason(), h[len(h)-1])
		}
	})
}

// A rollout that paused itself (event rule 5, stage rule G3) stops the
// image spreading: a device's task not yet begun is withdrawn at its next
// check (cancelled, ROLLOUT_PAUSED), while a begun one is handed back to
// finish (check rule 5).
func TestSelfPausedRolloutWithholdsPendingTasks(t *testing.T) {
	onEachStore(t, policyStart, func(t *testing.T, e *env, clock *manualClock) {
		fw := e.firmware("2.0.0")
		r := e.rollout(fw, 100, func(s *domain.RolloutSpec) {
			threshold, sample := 50, 1
			s.FailureThresholdPercent, s.MinSample = &threshold, &sample
		})
		failing, waiting, started := e.device("1.0.0"), e.device("1.0.0"), e.device("1.0.0")
		tasks := map[string]domain.UUID{}
		for _, d := range []string{failing, waiting, started} {
			res := e.check(d, "1.0.0")
			if res.Task == nil {
				t.Fatalf("device %s was offered nothing", d)
			}
			tasks[d] = res.Task.Task.ID()
		}
		e.mustEvent(asDeviceID(started), tasks[started], "dl", "downloading")
		clock.Add(time.Second)
		e.mustEvent(asDeviceID(failing), tasks[failing], "end", "failed")
		if got := e.rolloutNow(r.ID()); got.Status() != domain.RolloutPaused || got.PausedReason() != domain.PausedAuto {
			t.Fatalf("rollout %s (%q) after its first task failed, want paused by itself", got.Status(), got.PausedReason())
		}

		clock.Add(time.Second)
		if res := e.check(waiting, "1.0.0"); res.Task != nil {
			t.Fatalf("a self-paused rollout handed out its pending task %s (%s)", res.Task.Task.ID(), res.Task.Task.Status())
		}
		if tk := e.task(tasks[waiting]); tk.Status() != domain.TaskCancelled || tk.ErrorCode() != domain.CodeRolloutPaused {
			t.Fatalf("pending task %s (%q), want cancelled %s", tk.Status(), tk.ErrorCode(), domain.CodeRolloutPaused)
		}
		res := e.check(started, "1.0.0")
		if res.Task == nil || res.Task.Task.ID() != tasks[started] || res.Task.Task.Status() != domain.TaskDownloading {
			t.Fatalf("the started task was not handed back to finish: %+v", res.Task)
		}
	})
}

// replica is another instance of the use cases over the same stores,
// telling the time by clock: a second otad replica whose clock differs.
func (e *env) replica(clock ports.Clock) *env {
	e.t.Helper()
	deps := e.deps
	deps.Clock = clock
	devices, admin := testenv.UseCases(e.t, deps, time.Hour)
	return &env{t: e.t, ctx: e.ctx, store: e.store, deps: deps, devices: devices, admin: admin}
}

// Two replicas whose clocks differ (stage rule G2, "Clocks"): a replica
// behind the one that started a stage never dates the stage's gate before
// the stage began — a gate "met" before its stage would end the soak early
// and leave a history that runs backwards.
func TestGateIsNeverDatedBeforeItsStage(t *testing.T) {
	const skew = 10 * time.Second
	onEachStore(t, policyStart, func(t *testing.T, behind *env, behindClock *manualClock) {
		aheadClock := &manualClock{now: policyStart.Add(skew)}
		ahead := behind.replica(aheadClock)
		fw := ahead.firmware("2.0.0")
		r := ahead.rollout(fw, 0, func(s *domain.RolloutSpec) {
			s.Stages = []domain.StageRequest{
				{Percentage: new(50), MinFinished: new(1), SuccessPercent: new(100)},
				{Percentage: new(60), MinFinished: new(1), SuccessPercent: new(100), Soak: time.Hour},
				{Percentage: new(100)},
			}
		})
		aheadClock.Add(time.Second)
		ahead.finish(ahead.devicesIn(r, 0, 50, 1)[0], "succeeded") // the ahead replica starts stage 1
		started := ahead.rolloutNow(r.ID()).StageSince()

		aheadClock.Add(time.Second)
		d := ahead.devicesIn(r, 0, 60, 1)[0]
		res := ahead.check(d, "1.0.0")
		if res.Task == nil {
			t.Fatalf("stage 1 offered device %s nothing", d)
		}
		behindClock.Add(2 * time.Second)
		behind.mustEvent(asDeviceID(d), res.Task.Task.ID(), "end", "succeeded") // the replica behind judges the gate
		got := behind.rolloutNow(r.ID())
		if got.Stage() != 1 || got.GateMetAt().IsZero() {
			t.Fatalf("stage %d, gate met at %v: want stage 1's gate held", got.Stage(), got.GateMetAt())
		}
		if got.GateMetAt().Before(started) {
			t.Fatalf("gate met at %v, before its stage started at %v: the soak would end %v early",
				got.GateMetAt(), started, started.Sub(got.GateMetAt()))
		}
	})
}
