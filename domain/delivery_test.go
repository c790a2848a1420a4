package domain_test

import (
	"errors"
	"testing"

	"github.com/ai-device/ota/domain"
)

// deliveryFirmware publishes fw-<label> of cam-x1 at version, with a sha1
// and an artifact name only when asked.
func deliveryFirmware(t *testing.T, label, version string, sha1, artifact bool) domain.Firmware {
	t.Helper()
	spec := validSpec()
	spec.Version = version
	if sha1 {
		spec.SHA1 = "0123456789abcdef0123456789abcdef01234567"
	}
	if artifact {
		spec.ArtifactName = "release-" + version
	}
	fw, err := domain.NewFirmware(idOf(label), spec, t0)
	if err != nil {
		t.Fatal(err)
	}
	return fw
}

// TestSelectTargetSkipsFirmwareTheProtocolCannotDeliver: the highest
// firmware a device's protocol can deliver wins; what it cannot deliver
// is not offered at all (REST devices take anything).
func TestSelectTargetSkipsFirmwareTheProtocolCannotDeliver(t *testing.T) {
	withBoth := deliveryFirmware(t, "fw-both", "1.1.0", true, true)
	noSHA1 := deliveryFirmware(t, "fw-nosha1", "1.2.0", false, true)
	noName := deliveryFirmware(t, "fw-noname", "1.3.0", true, false)
	offers := []domain.Offer{
		{Firmware: withBoth, Rollout: mustRollout(t, rolloutA, withBoth, domain.RolloutSpec{Percentage: 100}, t0)},
		{Firmware: noSHA1, Rollout: mustRollout(t, rolloutB, noSHA1, domain.RolloutSpec{Percentage: 100}, t0)},
		{Firmware: noName, Rollout: mustRollout(t, rolloutC, noName, domain.RolloutSpec{Percentage: 100}, t0)},
	}
	for _, c := range []struct {
		delivery domain.Delivery
		want     domain.Firmware
	}{
		{domain.DeliverAny, noName},
		{domain.DeliverWithSHA1, noName},
		{domain.DeliverWithArtifactName, noSHA1},
	} {
		target, ok, _ := domain.SelectTarget(domain.CheckInput{
			Device: mustDevice(t, "cam-0001", "cam-x1", "1.0.0"), Reported: domain.MustParseVersion("1.0.0"),
			Offers: offers, Now: t0, Delivery: c.delivery,
		})
		if !ok || target.Firmware.ID() != c.want.ID() {
			t.Errorf("delivery %d: target %s (found %v), want %s", c.delivery, target.Firmware.Version(), ok, c.want.Version())
		}
	}
	only := offers[1:2] // 1.2.0 without sha1
	if _, ok, _ := domain.SelectTarget(domain.CheckInput{Device: mustDevice(t, "cam-0001", "cam-x1", "1.0.0"),
		Reported: domain.MustParseVersion("1.0.0"), Offers: only, Now: t0, Delivery: domain.DeliverWithSHA1}); ok {
		t.Error("firmware without sha1 offered over DDI")
	}
	if err := noSHA1.CheckDeliverable(domain.DeliverWithSHA1); !errors.Is(err, domain.ErrNotDeliverable) {
		t.Errorf("CheckDeliverable(sha1) of firmware without sha1: %v", err)
	}
}

// TestPlanCheckCancelsAPendingTaskItsProtocolCannotDeliver: a pending task
// of firmware the asking protocol cannot deliver is cancelled
// (NOT_DELIVERABLE, not an attempt), and the best deliverable firmware is
// offered in its place, even a lower one.
func TestPlanCheckCancelsAPendingTaskItsProtocolCannotDeliver(t *testing.T) {
	good := deliveryFirmware(t, "fw-good", "1.1.0", true, true)
	bare := deliveryFirmware(t, "fw-1", "1.2.0", false, true) // taskIn's firmware
	rGood := mustRollout(t, rolloutA, good, domain.RolloutSpec{Percentage: 100}, t0)
	rBare := mustRollout(t, rolloutB, bare, domain.RolloutSpec{Percentage: 100}, t0)
	in := domain.CheckInput{
		Device: mustDevice(t, "cam-0001", "cam-x1", "1.0.0"), Reported: domain.MustParseVersion("1.0.0"),
		Active: &domain.ActiveTask{Task: taskIn(domain.TaskPending, 0), Firmware: bare, Rollout: rBare},
		Offers: []domain.Offer{{Firmware: good, Rollout: rGood}, {Firmware: bare, Rollout: rBare}},
		Now:    t0, Delivery: domain.DeliverWithSHA1,
	}
	plan := domain.PlanCheck(in)
	if plan.Ended == nil || plan.Ended.Status() != domain.TaskCancelled || plan.Ended.ErrorCode() != domain.CodeNotDeliverable {
		t.Fatalf("the undeliverable pending task is not cancelled: %+v", plan.Ended)
	}
	if plan.Action != domain.CheckCreate || plan.Offer.Firmware.ID() != good.ID() || plan.Attempt != 1 {
		t.Fatalf("plan %s of %s (attempt %d), want create of the deliverable 1.1.0, attempt 1", plan.Action, plan.Offer.Firmware.Version(), plan.Attempt)
	}
	// A started task is the device's own business; REST takes anything.
	in.Active.Task = taskIn(domain.TaskDownloading, 10)
	if plan := domain.PlanCheck(in); plan.Ended != nil || plan.Action != domain.CheckKeep {
		t.Fatalf("a started task was ended or replaced: %s %+v", plan.Action, plan.Ended)
	}
	in.Active.Task, in.Delivery = taskIn(domain.TaskPending, 0), domain.DeliverAny
	if plan := domain.PlanCheck(in); plan.Ended != nil || plan.Action != domain.CheckReuse {
		t.Fatalf("a REST device's pending task was ended or replaced: %s %+v", plan.Action, plan.Ended)
	}
}
