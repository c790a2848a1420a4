package application_test

import (
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Event rule 5: "An operator's resume accepts the failures counted so far
// (domain.Rollout.AcceptFailures): the threshold pauses the rollout again
// only once another task has failed, then on the whole count." The counts
// are of devices (CountsOver): a device's retry replaces its earlier
// outcome. AcceptFailures keeps the resume's failed count and AutoPause
// pauses only when the count grows past it, so a task failing after the
// resume whose failure does not grow the device count — a failed device's
// retry failing again, or a new device failing after another's retry
// succeeded — is never judged, whatever the whole count says.
func TestThresholdAfterResumeJudgesEveryNewFailure(t *testing.T) {
	t.Run("a failed device's retry fails again", func(t *testing.T) {
		e, _ := newPolicyEnv(t, policyStart)
		r := e.watchedRollout(4) // 50 %, min_sample 4
		var first string
		for i, status := range []string{"failed", "succeeded", "failed", "succeeded"} {
			d := e.device("1.0.0")
			if i == 0 {
				first = d
			}
			res := e.check(d, "1.0.0")
			e.mustEvent(asDeviceID(d), res.Task.Task.ID(), "end", status)
		}
		resume(t, e, r)
		// The first device's retry (attempt 2) fails: another task failed
		// after the resume, and the whole count is 2 of 4 = 50 %.
		res := e.check(first, "1.0.0")
		if res.Task == nil || res.Task.Task.Attempt() != 2 {
			t.Fatalf("want the retry, attempt 2: %+v", res)
		}
		e.mustEvent(asDeviceID(first), res.Task.Task.ID(), "end2", "failed")
		wantPausedAgain(t, e, r, "2 of 4 devices failed (50 %), the last failure after the resume")
	})
	t.Run("a retry succeeds, then a new device fails", func(t *testing.T) {
		e, _ := newPolicyEnv(t, policyStart)
		r := e.watchedRollout(3) // 50 %, min_sample 3
		var first string
		for i := range 3 {
			d := e.device("1.0.0")
			if i == 0 {
				first = d
			}
			res := e.check(d, "1.0.0")
			e.mustEvent(asDeviceID(d), res.Task.Task.ID(), "end", "failed")
		}
		resume(t, e, r)
		res := e.check(first, "1.0.0")
		if res.Task == nil {
			t.Fatal("no retry")
		}
		e.mustEvent(asDeviceID(first), res.Task.Task.ID(), "end2", "succeeded") // 2 failed, 1 succeeded
		d := e.device("1.0.0")
		res = e.check(d, "1.0.0")
		if res.Task == nil {
			t.Fatal("no task for the new device")
		}
		e.mustEvent(asDeviceID(d), res.Task.Task.ID(), "end", "failed") // 3 failed of 4: 75 %
		wantPausedAgain(t, e, r, "3 of 4 devices failed (75 %), the last a new device after the resume")
	})
	t.Run("a failed device's retry times out at its check", func(t *testing.T) {
		e, clock := newPolicyEnv(t, policyStart)
		r := e.rollout(e.firmware("1.1.0"), 100, func(s *domain.RolloutSpec) {
			timeout, threshold, sample := time.Hour, 50, 2
			s.TaskTimeout, s.FailureThresholdPercent, s.MinSample = &timeout, &threshold, &sample
		})
		first := e.device("1.0.0")
		for i, status := range []string{"failed", "succeeded"} {
			d := first
			if i > 0 {
				d = e.device("1.0.0")
			}
			res := e.check(d, "1.0.0")
			e.mustEvent(asDeviceID(d), res.Task.Task.ID(), "end", status)
		}
		resume(t, e, r)
		retry := e.check(first, "1.0.0").Task
		if retry == nil || retry.Task.Attempt() != 2 {
			t.Fatalf("want the retry, attempt 2: %+v", retry)
		}
		e.mustEvent(asDeviceID(first), retry.Task.ID(), "dl", "downloading")
		clock.Add(61 * time.Minute)
		e.check(first, "1.0.0") // the check fails the stuck retry (K1) and judges it
		if got := e.task(retry.Task.ID()); got.Status() != domain.TaskFailed || got.ErrorCode() != domain.CodeTimedOut {
			t.Fatalf("the stuck retry is %s %s", got.Status(), got.ErrorCode())
		}
		wantPausedAgain(t, e, r, "1 of 2 devices failed (50 %), the retry timed out after the resume")
	})
}

func resume(t *testing.T, e *env, r domain.Rollout) {
	t.Helper()
	if v, _ := e.admin.GetRollout(e.ctx, r.ID()); v.Rollout.Status() != domain.RolloutPaused {
		t.Fatalf("want the threshold's pause first: %s", v.Rollout.Status())
	}
	active := "active"
	if _, err := e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{Status: &active}); err != nil {
		t.Fatal(err)
	}
}

func wantPausedAgain(t *testing.T, e *env, r domain.Rollout, why string) {
	t.Helper()
	v, _ := e.admin.GetRollout(e.ctx, r.ID())
	if v.Rollout.Status() != domain.RolloutPaused || v.Rollout.PausedReason() != domain.PausedAuto {
		t.Errorf("%s: rollout %s (%q), stats %+v; want paused by the threshold again", why, v.Rollout.Status(), v.Rollout.PausedReason(), v.Stats)
	}
}
