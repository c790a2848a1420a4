package domain_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/ai-device/ota/domain"
)

// PATCH /admin/rollouts/{id} {"percentage":100,"status":"cancelled"} is
// applied percentage first (UpdateRollout: "{percentage:0, status:
// cancelled} is a coherent request"), so the change goes from active at
// 50 % to cancelled at 100 %. A cancelled rollout never reached its end:
// it is announced rollout.cancelled, not also rollout.completed (a
// receiver closing a release on completion would close a cancelled one).
func TestCancellingWhileWideningDoesNotCompleteTheRollout(t *testing.T) {
	fw := mustFirmware(t, "fw", "cam-x1", "1.2.0", "")
	before := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 50}, t0)
	after := before
	if err := after.SetPercentage(100, t1); err != nil {
		t.Fatal(err)
	}
	if err := after.ChangeStatus(domain.RolloutCancelled, fw, t1); err != nil {
		t.Fatal(err)
	}
	as, err := domain.RolloutAnnouncements(before, after, t1)
	if err != nil {
		t.Fatal(err)
	}
	var got []domain.EventType
	for _, a := range as {
		got = append(got, a.Type())
	}
	if want := []domain.EventType{domain.EventRolloutCancelled}; !slices.Equal(got, want) {
		t.Fatalf("cancelling a rollout in the request that widened it to 100 %% announced %v, want %v", got, want)
	}
}

// openapi.yaml WebhookRolloutData: "reason only on rollout.paused". A
// pause in the request that widens to 100 % announces paused and
// completed; completed's data carries no reason.
func TestReasonIsOnlyOnThePausedEvent(t *testing.T) {
	fw := mustFirmware(t, "fw", "cam-x1", "1.2.0", "")
	before := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 50}, t0)
	after := before
	if err := after.SetPercentage(100, t1); err != nil {
		t.Fatal(err)
	}
	if err := after.ChangeStatus(domain.RolloutPaused, fw, t1); err != nil {
		t.Fatal(err)
	}
	as, err := domain.RolloutAnnouncements(before, after, t1)
	if err != nil {
		t.Fatal(err)
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
