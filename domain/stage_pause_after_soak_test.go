package domain_test

import (
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// TestPauseAfterTheSoakKeepsTheStageThatBegan: once the current stage's
// soak is over, the next stage has begun (stage rule G2: "the next stage
// began when the soak ended", its devices admitted by every check,
// PercentageAt) even before a final event stores it. An operator's pause
// then must not undo it: the advance is stored first, as it is before an
// operator's percentage (Rollout.SetPercentage, G1: "the next stage
// starts, which never narrows it"), and resuming restarts that stage's
// sample at its percentage (G3: "at the percentage the rollout has").
// ChangeStatus stores no due advance: the pause closes the stage before
// as "paused by an operator", dated at the pause though it ended with its
// soak, and the resume starts that earlier stage over at 10 % — the
// devices between 10 % and 50 %, admitted until the pause, are shut out
// again, and the stage must gather its sample and soak once more.
func TestPauseAfterTheSoakKeepsTheStageThatBegan(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	plan := domain.RolloutSpec{Stages: []domain.StageRequest{
		{Percentage: new(10), Soak: time.Hour},
		{Percentage: new(50), Soak: time.Hour},
		{Percentage: new(100)},
	}}
	r := mustRollout(t, rolloutA, fw, plan, t0)
	r.Evaluate(stats(1, 0), stats(1, 0), t1) // the gate holds: the soak starts
	pauseAt := t1.Add(2 * time.Hour)
	if got := r.PercentageAt(pauseAt); got != 50 {
		t.Fatalf("before the pause, checks admit %d%%, want the second stage's 50%%", got)
	}
	if err := r.ChangeStatus(domain.RolloutPaused, fw, pauseAt); err != nil {
		t.Fatal(err)
	}
	if err := r.ChangeStatus(domain.RolloutActive, fw, pauseAt.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	h := r.History()
	if r.Stage() != 1 || r.PercentageAt(pauseAt.Add(time.Minute)) != 50 || len(h) == 0 ||
		h[0].Outcome != domain.StageAdvanced || !h[0].EndedAt.Equal(t1.Add(time.Hour).UTC()) {
		t.Errorf("after a pause and a resume: stage %d, checks admit %d%%, history %+v; want stage 1 at 50%%, "+
			"the first stage advanced when its soak ended", r.Stage(), r.PercentageAt(pauseAt.Add(time.Minute)), h)
	}
}
