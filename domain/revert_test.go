package domain_test

import (
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// TestPlanCheckRevertsAContradictedSuccess pins event rule 7 in the one
// planning function: a device read running the version its last success
// installed that reports a lower one re-marks that success failed
// (INSTALL_REVERTED), and the image's next task is the next attempt; a
// check that read another version (before the success, or a later report)
// reverts nothing;
// and without the last task at hand — the lock-free read — the plan asks
// for the transaction that reads it, even with nothing on offer.
func TestPlanCheckRevertsAContradictedSuccess(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.3.0", "")
	r := mustRollout(t, "ro-1", fw, domain.RolloutSpec{Percentage: 100}, t0)
	offers := []domain.Offer{{Firmware: fw, Rollout: r}}
	won := taskIn(domain.TaskSucceeded, 100)
	now := t0.Add(time.Hour)
	input := func(read string, last *domain.ActiveTask, offers []domain.Offer) domain.CheckInput {
		return domain.CheckInput{Device: mustDevice(t, "cam-0001", "cam-x1", read), Reported: domain.MustParseVersion("1.1.0"),
			Last: last, Offers: offers, Failed: map[string]int{}, Now: now}
	}

	plan := domain.PlanCheck(input("1.3.0", &domain.ActiveTask{Task: won, Firmware: fw, Rollout: r}, offers))
	if plan.Ended == nil || plan.Ended.Status() != domain.TaskFailed || plan.Ended.ErrorCode() != domain.CodeInstallReverted {
		t.Fatalf("contradicted success: ended %+v, want it failed %s", plan.Ended, domain.CodeInstallReverted)
	}
	if plan.Action != domain.CheckCreate || plan.Attempt != 2 {
		t.Errorf("contradicted success: %s attempt %d, want create attempt 2", plan.Action, plan.Attempt)
	}

	plan = domain.PlanCheck(input("1.1.0", &domain.ActiveTask{Task: won, Firmware: fw, Rollout: r}, offers))
	if plan.Ended != nil {
		t.Errorf("a check read before the success ended the task: %+v", plan.Ended)
	}

	// The device's version moved on since the success (a report of its
	// own): the success is no longer its last word, nothing to contradict.
	plan = domain.PlanCheck(input("1.4.0", &domain.ActiveTask{Task: won, Firmware: fw, Rollout: r}, offers))
	if plan.Ended != nil {
		t.Errorf("a success the device's own report replaced was reverted: %+v", plan.Ended)
	}

	// The success came after the device was read (its version moved and
	// came back: a revert, then this success): the device's word after
	// the report, not contradicted, and its image not offered again.
	// Read after it, or at an unknown time, it is contradicted.
	for _, tc := range []struct {
		name    string
		readAt  time.Time
		reverts bool
	}{
		{"read before the success", t0.Add(-time.Microsecond), false},
		{"read as it was stored", t0, true},
		{"read after the success", t0.Add(time.Minute), true},
		{"read at an unknown time", time.Time{}, true},
	} {
		in := input("1.3.0", &domain.ActiveTask{Task: won, Firmware: fw, Rollout: r}, offers)
		in.ReadAt = tc.readAt
		plan = domain.PlanCheck(in)
		if got := plan.Ended != nil; got != tc.reverts {
			t.Errorf("%s: reverted %v, want %v", tc.name, got, tc.reverts)
		}
		if !tc.reverts && plan.Action != domain.CheckNoUpdate {
			t.Errorf("%s: %s, want no update", tc.name, plan.Action)
		}
	}

	// A success after the read of another version than the one read did
	// not leave the device as read: the report stands (here 1.1.0, below
	// the 1.3.0 on offer).
	other := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	in := input("1.3.0", &domain.ActiveTask{Task: won, Firmware: other, Rollout: r}, offers)
	in.ReadAt = t0.Add(-time.Second)
	if plan = domain.PlanCheck(in); plan.Ended != nil || plan.Action != domain.CheckCreate {
		t.Errorf("a success of 1.2.0 after a read of 1.3.0: ended %+v, %s; want 1.3.0 created for the 1.1.0 reported", plan.Ended, plan.Action)
	}

	plan = domain.PlanCheck(input("1.3.0", nil, nil))
	if !plan.Recheck || !plan.Writes() {
		t.Errorf("lock-free, nothing on offer: recheck %v, writes %v; want the transaction to read the last task", plan.Recheck, plan.Writes())
	}
	if plan = domain.PlanCheck(input("1.1.0", nil, nil)); plan.Writes() {
		t.Error("a check repeating the version it read must not ask for a transaction")
	}
}

// TestWithCommittedDecidesAStaleReportWithTheNewVersion: a check whose
// transaction finds the device's version moved since its read (a success
// it never saw) and whose report is below it is decided with that version;
// a report at or above it, or an unmoved version, stands.
func TestWithCommittedDecidesAStaleReportWithTheNewVersion(t *testing.T) {
	for _, tc := range []struct {
		name, read, reported, committed string
		wantDevice, wantReported        string
	}{
		{"moved, report below", "1.1.0", "1.1.0", "1.3.0", "1.3.0", "1.3.0"},
		{"moved, report above", "1.1.0", "1.4.0", "1.3.0", "1.1.0", "1.4.0"},
		{"moved, report equal", "1.1.0", "1.3.0", "1.3.0", "1.1.0", "1.3.0"},
		{"unmoved, report below (a revert to judge)", "1.3.0", "1.1.0", "1.3.0", "1.3.0", "1.1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := domain.CheckInput{Device: mustDevice(t, "cam-0001", "cam-x1", tc.read), Reported: domain.MustParseVersion(tc.reported)}
			got := in.WithCommitted(domain.MustParseVersion(tc.committed))
			if got.Device.CurrentVersion().String() != tc.wantDevice || got.Reported.String() != tc.wantReported {
				t.Errorf("device %s, reported %s; want %s, %s", got.Device.CurrentVersion(), got.Reported, tc.wantDevice, tc.wantReported)
			}
		})
	}
}

// TestStandingVersionsLeaveTheCheckAsItIs: every version StandingVersions
// names leaves the check unchanged under WithCommitted, and a version that
// would move it (a success above the report) is not among them.
func TestStandingVersionsLeaveTheCheckAsItIs(t *testing.T) {
	for _, tc := range []struct{ read, reported, moving string }{
		{"1.1.0", "1.1.0", "1.3.0"},
		{"1.1.0", "1.4.0", "1.5.0"},
		{"1.3.0", "1.1.0", "1.2.0"},
	} {
		in := domain.CheckInput{Device: mustDevice(t, "cam-0001", "cam-x1", tc.read), Reported: domain.MustParseVersion(tc.reported)}
		names := map[string]bool{}
		for _, v := range in.StandingVersions() {
			names[v.String()] = true
			got := in.WithCommitted(v)
			if got.Device.CurrentVersion().String() != tc.read || got.Reported.String() != tc.reported {
				t.Errorf("read %s, reported %s: committed %s moves the check to %s, %s", tc.read, tc.reported, v,
					got.Device.CurrentVersion(), got.Reported)
			}
		}
		if !names[tc.read] || !names[tc.reported] {
			t.Errorf("read %s, reported %s: standing %v, want both", tc.read, tc.reported, in.StandingVersions())
		}
		if names[tc.moving] {
			t.Errorf("read %s, reported %s: %s stands, but it moves the check", tc.read, tc.reported, tc.moving)
		}
	}
}

// TestRevertedRollbackIsContradictedAbove pins event rule 7 for a
// rollback rollout's success (rule R1: a downgrade): the device falls back
// to the higher version it left, so a report above the version the
// rollback installed contradicts it, as a report below contradicts any
// success; a report above a plain rollout's install is the device moving
// on. Without the last task at hand, a check reporting above the version
// read asks for the transaction only when a rollback rollout on offer
// installs that version.
func TestRevertedRollbackIsContradictedAbove(t *testing.T) {
	good := mustFirmware(t, "fw-1", "cam-x1", "1.0.0", "")
	rollback := mustRollout(t, rolloutA, good, domain.RolloutSpec{Percentage: 100, AllowDowngrade: true,
		Selector: domain.SelectorSpec{Versions: ">=2.0.0"}}, t0)
	plain := mustRollout(t, rolloutA, good, domain.RolloutSpec{Percentage: 100}, t0)
	now := t0.Add(time.Hour)
	for _, tc := range []struct {
		name     string
		r        domain.Rollout
		reported string
		reverts  bool
	}{
		{"rollback, report above", rollback, "2.0.0", true},
		{"rollback, report below", rollback, "0.9.0", true},
		{"rollback, report equal", rollback, "1.0.0", false},
		{"plain, report above", plain, "2.0.0", false},
		{"plain, report below", plain, "0.9.0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reported := domain.MustParseVersion(tc.reported)
			if got := domain.Contradicts(good.Version(), reported, tc.r.AllowDowngrade()); got != tc.reverts {
				t.Errorf("Contradicts = %v, want %v", got, tc.reverts)
			}
			won := taskIn(domain.TaskSucceeded, 100)
			if got := won.Revert(good.Version(), reported, good, tc.r, now); got != tc.reverts {
				t.Errorf("Revert = %v, want %v", got, tc.reverts)
			}
			if tc.reverts && (won.Status() != domain.TaskFailed || won.ErrorCode() != domain.CodeInstallReverted) {
				t.Errorf("reverted task: %s %q", won.Status(), won.ErrorCode())
			}
			in := domain.CheckInput{Device: mustDevice(t, "cam-0001", "cam-x1", "1.0.0"), Reported: reported,
				Last:   &domain.ActiveTask{Task: taskIn(domain.TaskSucceeded, 100), Firmware: good, Rollout: tc.r},
				Offers: []domain.Offer{{Firmware: good, Rollout: tc.r}}, Failed: map[string]int{}, Now: now}
			if got := in.MayContradictSuccess(); got != tc.reverts {
				t.Errorf("MayContradictSuccess = %v, want %v", got, tc.reverts)
			}
			plan := domain.PlanCheck(in)
			if got := plan.Ended != nil; got != tc.reverts {
				t.Errorf("PlanCheck ended %+v, want reverted %v", plan.Ended, tc.reverts)
			}
			if tc.reverts && tc.name == "rollback, report above" && (plan.Action != domain.CheckCreate || plan.Attempt != 2) {
				t.Errorf("reverted rollback: %s attempt %d, want the rollback again as attempt 2", plan.Action, plan.Attempt)
			}
			// The lock-free read: no last task.
			in.Last = nil
			if got, want := domain.PlanCheck(in).Recheck, tc.reverts; got != want {
				t.Errorf("lock-free: recheck %v, want %v", got, want)
			}
		})
	}
	// A report above the version read, with no rollback of that version on
	// offer, asks for no transaction: the last success cannot be a
	// rollback's that is still being rolled out.
	in := domain.CheckInput{Device: mustDevice(t, "cam-0001", "cam-x1", "1.0.0"), Reported: domain.MustParseVersion("2.0.0"),
		Offers: []domain.Offer{{Firmware: good, Rollout: plain}}, Failed: map[string]int{}, Now: now}
	if plan := domain.PlanCheck(in); plan.Recheck || plan.Writes() {
		t.Errorf("report above, no rollback on offer: recheck %v writes %v", plan.Recheck, plan.Writes())
	}
}

// TestWithCommittedAfterARollbackSuccess: a check whose transaction finds
// the device's version moved down since its read — a rollback's success it
// never saw — and whose report is above it (the version the rollback
// replaced) is decided with the committed version, as one below a
// success that moved the version up is.
func TestWithCommittedAfterARollbackSuccess(t *testing.T) {
	for _, tc := range []struct {
		name, read, reported, committed string
		wantDevice, wantReported        string
	}{
		{"moved down, report above", "2.0.0", "2.0.0", "1.0.0", "1.0.0", "1.0.0"},
		{"moved down, report below", "2.0.0", "0.9.0", "1.0.0", "1.0.0", "1.0.0"},
		{"moved down, report equal", "2.0.0", "1.0.0", "1.0.0", "2.0.0", "1.0.0"},
		{"unmoved, report above (a reverted rollback to judge)", "1.0.0", "2.0.0", "1.0.0", "1.0.0", "2.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := domain.CheckInput{Device: mustDevice(t, "cam-0001", "cam-x1", tc.read), Reported: domain.MustParseVersion(tc.reported)}
			got := in.WithCommitted(domain.MustParseVersion(tc.committed))
			if got.Device.CurrentVersion().String() != tc.wantDevice || got.Reported.String() != tc.wantReported {
				t.Errorf("device %s, reported %s; want %s, %s", got.Device.CurrentVersion(), got.Reported, tc.wantDevice, tc.wantReported)
			}
			for _, v := range in.StandingVersions() {
				if s := in.WithCommitted(v); s.Device.CurrentVersion().String() != tc.read || s.Reported.String() != tc.reported {
					t.Errorf("standing version %s moves the check", v)
				}
			}
		})
	}
}
