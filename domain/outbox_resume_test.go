package domain_test

import (
	"slices"
	"testing"

	"github.com/ai-device/ota/domain"
)

// A rollout completes once: when it reaches 100 % (or its last stage).
// Pausing a complete rollout and resuming it changes what it admits in
// nothing, yet the resume announces rollout.completed a second time, to
// every webhook and the NATS sink: a receiver that closes a release on
// completion sees the release complete twice (docs/DOMAIN.md, events:
// "completed when it reaches its last stage or, unstaged, 100 %").
func TestResumingACompleteRolloutDoesNotCompleteItAgain(t *testing.T) {
	fw := mustFirmware(t, "fw", "cam-x1", "1.2.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100}, t0)
	paused := r
	if err := paused.ChangeStatus(domain.RolloutPaused, fw, t1); err != nil {
		t.Fatal(err)
	}
	resumed := paused
	if err := resumed.ChangeStatus(domain.RolloutActive, fw, t1); err != nil {
		t.Fatal(err)
	}
	as, err := domain.RolloutAnnouncements(paused, resumed, t1)
	if err != nil {
		t.Fatal(err)
	}
	var got []domain.EventType
	for _, a := range as {
		got = append(got, a.Type())
	}
	if want := []domain.EventType{domain.EventRolloutResumed}; !slices.Equal(got, want) {
		t.Fatalf("resuming a rollout that was at 100 %% before its pause announced %v, want %v", got, want)
	}
}

// A rollout paused below 100 % and widened to 100 % while paused reaches
// its end at the widening: completed is announced then, once, and the
// resume that follows announces only the resume.
func TestWideningAPausedRolloutCompletesItOnce(t *testing.T) {
	fw := mustFirmware(t, "fw", "cam-x1", "1.2.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 50}, t0)
	paused := r
	if err := paused.ChangeStatus(domain.RolloutPaused, fw, t1); err != nil {
		t.Fatal(err)
	}
	widened := paused
	if err := widened.SetPercentage(100, t1); err != nil {
		t.Fatal(err)
	}
	resumed := widened
	if err := resumed.ChangeStatus(domain.RolloutActive, fw, t1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		before, after domain.Rollout
		want          []domain.EventType
	}{
		{"widened while paused", paused, widened, []domain.EventType{domain.EventRolloutCompleted}},
		{"then resumed", widened, resumed, []domain.EventType{domain.EventRolloutResumed}},
		{"cancelled at 100 %", resumed, cancelled(t, resumed, fw), []domain.EventType{domain.EventRolloutCancelled}},
	} {
		as, err := domain.RolloutAnnouncements(c.before, c.after, t1)
		if err != nil {
			t.Fatal(err)
		}
		var got []domain.EventType
		for _, a := range as {
			got = append(got, a.Type())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: announced %v, want %v", c.name, got, c.want)
		}
	}
}

func cancelled(t *testing.T, r domain.Rollout, fw domain.Firmware) domain.Rollout {
	t.Helper()
	if err := r.ChangeStatus(domain.RolloutCancelled, fw, t1); err != nil {
		t.Fatal(err)
	}
	return r
}
