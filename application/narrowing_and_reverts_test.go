package application_test

import (
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Stage rules G1–G2 crossed with an operator's narrowing: once a stage's
// soak is over, checks admit the next stage's share (PercentageAt) — the
// next stage has begun, dated when the soak ended, and tasks created since
// count in it (event rule 5, "Counters"). An operator who then narrows the
// rollout ("a narrowing reacts to trouble") overrides the current stage's
// percentage (G1): devices outside the narrowed share must not be offered
// the image. Here the narrowing is ignored — PercentageAt still answers the
// next stage's 50 % whenever the stored percentage is below it — and the
// next final event stores the advance at max(5, 50) = 50, undoing it.
func TestNarrowingAfterTheSoakEndedIsNotIgnored(t *testing.T) {
	onEachStore(t, policyStart, func(t *testing.T, e *env, clock *manualClock) {
		fw := e.firmware("2.0.0")
		r := e.rollout(fw, 0, func(s *domain.RolloutSpec) {
			s.Stages = []domain.StageRequest{
				{Percentage: new(10), MinFinished: new(1), SuccessPercent: new(100), Soak: time.Hour},
				// The second stage soaks too: the next final event (a task
				// of that stage) meets its gate, but may not start the third.
				{Percentage: new(50), Soak: time.Hour},
				{Percentage: new(100)},
			}
		})
		first := e.devicesIn(r, 0, 5, 2)
		clock.Add(time.Second)
		e.finish(first[0], "succeeded") // the first stage's gate holds; its soak starts
		if got := e.rolloutNow(r.ID()); got.GateMetAt().IsZero() {
			t.Fatalf("gate not met after the stage's one success")
		}
		clock.Add(2 * time.Hour) // the soak is over: checks admit the next stage's 50 %

		five := 5
		narrowed, err := e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{Percentage: &five})
		if err != nil {
			t.Fatal(err)
		}
		if narrowed.Percentage() != 5 {
			t.Fatalf("narrowed to 5 %%: percentage %d", narrowed.Percentage())
		}
		clock.Add(time.Second)
		outside := e.devicesIn(r, 10, 50, 1)[0]
		if res := e.check(outside, "1.0.0"); res.Task != nil {
			t.Errorf("the operator narrowed the rollout to 5 %% after the soak ended, yet a device in bucket %d was offered the image (PercentageAt = %d)",
				domain.Bucket(r.ID().String(), outside), e.rolloutNow(r.ID()).PercentageAt(clock.Now()))
		}
		// The next final event stores the advance: the narrowing must stand.
		clock.Add(time.Second)
		e.finish(first[1], "succeeded")
		if got := e.rolloutNow(r.ID()); got.Percentage() > 5 {
			t.Errorf("after the next final event the rollout is at stage %d, %d %%: the operator's narrowing to 5 %% was undone",
				got.Stage(), got.Percentage())
		}
	})
}

// Rollback rule R1 crossed with event rule 7: a rollback is "a rollout
// like any other". A device on the bad 2.0.0 takes the rollback to 1.0.0
// and reports success; its bootloader then falls back to the 2.0.0 slot
// and it reports 2.0.0. The install did not stay: as with any install the
// device contradicts (event rule 7), the success must become a failed
// attempt (INSTALL_REVERTED) and the image be offered again only as the
// next attempt — never a second attempt 1 of the same firmware beside a
// success ("one task per (device, firmware) attempt"), and never past
// max_attempts. Here the revert is only caught when the reported version
// is below the installed one: the rollback's success stands, and the
// device is handed 1.0.0 at attempt 1 again, on every revert, for ever.
func TestRevertedRollbackIsAFailedAttempt(t *testing.T) {
	onEachStore(t, policyStart, func(t *testing.T, e *env, clock *manualClock) {
		good := e.firmware("1.0.0")
		bad := e.firmware("2.0.0")
		d := e.device("1.0.0")
		up := e.rollout(bad, 100)
		clock.Add(time.Second)
		e.finish(d, "succeeded") // the device now runs the bad 2.0.0
		paused := "paused"
		if _, err := e.admin.UpdateRollout(e.ctx, testActor, up.ID(), ports.RolloutChange{Status: &paused}); err != nil {
			t.Fatal(err)
		}
		e.rollout(good, 100, func(s *domain.RolloutSpec) {
			s.Selector = domain.SelectorSpec{Versions: ">=2.0.0"}
			s.AllowDowngrade = true
			s.MaxAttempts = intp(2)
		})
		clock.Add(time.Second)
		res := e.check(d, "2.0.0")
		if res.Task == nil || res.Task.Task.FirmwareID() != good.ID() {
			t.Fatalf("the rollback offered %+v, want a 1.0.0 task", res.Task)
		}
		rollbackTask := res.Task.Task.ID()
		clock.Add(time.Second)
		e.mustEvent(asDeviceID(d), rollbackTask, "rb-ok", "succeeded")

		clock.Add(time.Minute)
		res = e.check(d, "2.0.0") // the rollback did not stay
		if tk := e.task(rollbackTask); tk.Status() != domain.TaskFailed || tk.ErrorCode() != domain.CodeInstallReverted {
			t.Errorf("the device reports 2.0.0 after its rollback to 1.0.0 succeeded: the success is %s (%q), want failed %s",
				tk.Status(), tk.ErrorCode(), domain.CodeInstallReverted)
		}
		if res.Task != nil && res.Task.Task.Attempt() == 1 {
			t.Errorf("the reverted rollback was handed out again as attempt 1 (task %s), beside the success of attempt 1", res.Task.Task.ID())
		}
	})
}

// Event rule 7 crossed with a cancelled rollout (check rule 5): a device
// installs 2.0.0 (success), is handed a 3.0.0 task that is then withdrawn
// (its rollout cancelled: the pending task is cancelled at the next
// check), and then reports 1.0.0 — its bootloader fell back. The device
// ran 2.0.0 after that success, and a cancelled task "says nothing about
// the device" (check rule 4): the revert must re-mark the 2.0.0 success
// failed (INSTALL_REVERTED) and 2.0.0 be offered only as attempt 2. Here
// the check reads only the device's latest task, the cancelled one, finds
// no success to contradict, and hands out 2.0.0 at attempt 1 a second
// time, beside the success that still counts in its rollout.
func TestRevertAfterAWithdrawnTaskIsStillARevert(t *testing.T) {
	onEachStore(t, policyStart, func(t *testing.T, e *env, clock *manualClock) {
		two := e.firmware("2.0.0")
		three := e.firmware("3.0.0")
		d := e.device("1.0.0")
		e.rollout(two, 100)
		clock.Add(time.Second)
		res := e.check(d, "1.0.0")
		if res.Task == nil || res.Task.Task.FirmwareID() != two.ID() {
			t.Fatalf("offered %+v, want a 2.0.0 task", res.Task)
		}
		success := res.Task.Task.ID()
		clock.Add(time.Second)
		e.mustEvent(asDeviceID(d), success, "ok", "succeeded")

		next := e.rollout(three, 100)
		clock.Add(time.Second)
		res = e.check(d, "2.0.0")
		if res.Task == nil || res.Task.Task.FirmwareID() != three.ID() {
			t.Fatalf("offered %+v, want a 3.0.0 task", res.Task)
		}
		withdrawn := res.Task.Task.ID()
		cancelled := "cancelled"
		if _, err := e.admin.UpdateRollout(e.ctx, testActor, next.ID(), ports.RolloutChange{Status: &cancelled}); err != nil {
			t.Fatal(err)
		}
		clock.Add(time.Second)
		if res := e.check(d, "2.0.0"); res.Task != nil {
			t.Fatalf("offered %+v after the 3.0.0 rollout was cancelled", res.Task)
		}
		if tk := e.task(withdrawn); tk.Status() != domain.TaskCancelled {
			t.Fatalf("the 3.0.0 task is %s, want cancelled", tk.Status())
		}

		clock.Add(time.Minute)
		res = e.check(d, "1.0.0") // the 2.0.0 install did not stay
		if tk := e.task(success); tk.Status() != domain.TaskFailed || tk.ErrorCode() != domain.CodeInstallReverted {
			t.Errorf("the device reports 1.0.0 after its 2.0.0 success: the success is %s (%q), want failed %s",
				tk.Status(), tk.ErrorCode(), domain.CodeInstallReverted)
		}
		if res.Task != nil && res.Task.Task.Attempt() == 1 {
			t.Errorf("2.0.0 handed out again as attempt 1 (task %s), beside the attempt-1 success it reverted", res.Task.Task.ID())
		}
	})
}
