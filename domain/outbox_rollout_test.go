package domain_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/ai-device/ota/domain"
)

// announced is what RolloutAnnouncements announces of before's change to
// after, by type.
func announced(t *testing.T, before, after domain.Rollout) []domain.EventType {
	t.Helper()
	as, err := domain.RolloutAnnouncements(before, after, t1)
	if err != nil {
		t.Fatal(err)
	}
	var got []domain.EventType
	for _, a := range as {
		got = append(got, a.Type())
	}
	return got
}

// changed is r after an operator's change at t1: its percentage (when
// pct > 0), then its status (when given), in that order, as
// UpdateRollout applies them.
func changed(t *testing.T, r domain.Rollout, fw domain.Firmware, pct int, to *domain.RolloutStatus) domain.Rollout {
	t.Helper()
	if pct > 0 {
		if err := r.SetPercentage(pct, t1); err != nil {
			t.Fatal(err)
		}
	}
	if to != nil {
		if err := r.ChangeStatus(*to, fw, t1); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// A rollout completes once: when it reaches 100 % (or its last stage),
// which a pause does not undo (docs/DOMAIN.md, events: "completed when it
// reaches its last stage or, unstaged, 100 %"). A receiver that closes a
// release on completion must see it complete once, and never a cancelled
// one.
func TestRolloutCompletesOnceAndNeverWhenCancelled(t *testing.T) {
	fw := mustFirmware(t, "fw", "cam-x1", "1.2.0", "")
	paused, active, cancelled := domain.RolloutPaused, domain.RolloutActive, domain.RolloutCancelled
	at100 := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100}, t0)
	at50 := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 50}, t0)
	pausedAt100 := changed(t, at100, fw, 0, &paused)
	pausedAt50 := changed(t, at50, fw, 0, &paused)
	widenedWhilePaused := changed(t, pausedAt50, fw, 100, nil)
	for _, c := range []struct {
		name          string
		before, after domain.Rollout
		want          []domain.EventType
	}{
		{"resumed at 100 %", pausedAt100, changed(t, pausedAt100, fw, 0, &active), []domain.EventType{domain.EventRolloutResumed}},
		{"widened to 100 % while paused", pausedAt50, widenedWhilePaused, []domain.EventType{domain.EventRolloutCompleted}},
		{"then resumed", widenedWhilePaused, changed(t, widenedWhilePaused, fw, 0, &active), []domain.EventType{domain.EventRolloutResumed}},
		{"cancelled at 100 %", at100, changed(t, at100, fw, 0, &cancelled), []domain.EventType{domain.EventRolloutCancelled}},
		// PATCH {"percentage":100,"status":"cancelled"}: the percentage
		// applies first, yet a cancelled rollout never reached its end.
		{"cancelled in the request that widened it", at50, changed(t, at50, fw, 100, &cancelled), []domain.EventType{domain.EventRolloutCancelled}},
	} {
		if got := announced(t, c.before, c.after); !slices.Equal(got, c.want) {
			t.Errorf("%s: announced %v, want %v", c.name, got, c.want)
		}
	}
}

// openapi.yaml WebhookRolloutData: "reason only on rollout.paused". A
// pause in the request that widens to 100 % announces paused and
// completed; completed's data carries no reason.
func TestReasonIsOnlyOnThePausedEvent(t *testing.T) {
	fw := mustFirmware(t, "fw", "cam-x1", "1.2.0", "")
	paused := domain.RolloutPaused
	before := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 50}, t0)
	as, err := domain.RolloutAnnouncements(before, changed(t, before, fw, 100, &paused), t1)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 2 {
		t.Fatalf("announced %d events, want paused and completed", len(as))
	}
	for _, a := range as {
		var data map[string]any
		if err := json.Unmarshal(a.Payload(), &data); err != nil {
			t.Fatal(err)
		}
		if _, has := data["reason"]; has != (a.Type() == domain.EventRolloutPaused) {
			t.Errorf("%s data %s: reason present %v, want it only on rollout.paused", a.Type(), a.Payload(), has)
		}
	}
}
