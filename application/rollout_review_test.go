package application_test

import (
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Stage rule G1: an operator's PATCH of the percentage overrides the
// current stage's until the NEXT stage starts. Resuming a paused staged
// rollout restarts the current stage's sample (G3) but is not the next
// stage: the operator's narrowing must stand, and a PATCH that narrows
// and resumes in one request must answer what it asked for.
func TestResumingAStagedRolloutKeepsTheOperatorsNarrowing(t *testing.T) {
	e, _ := newPolicyEnv(t, policyStart)
	fw := e.firmware("2.0.0")
	r := e.rollout(fw, 0, func(s *domain.RolloutSpec) {
		s.Stages = []domain.StageRequest{{Percentage: new(40)}, {Percentage: new(100)}}
	})
	paused, active := "paused", "active"
	two := 2
	if _, err := e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{Percentage: &two, Status: &paused}); err != nil {
		t.Fatal(err)
	}
	got, err := e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{Status: &active})
	if err != nil {
		t.Fatal(err)
	}
	if got.Percentage() != 2 {
		t.Errorf("narrowed to 2%% while paused, resumed: percentage %d (the stage's 40%% came back)", got.Percentage())
	}

	// In one request: narrow and resume.
	if _, err := e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{Status: &paused}); err != nil {
		t.Fatal(err)
	}
	five := 5
	got, err = e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{Percentage: &five, Status: &active})
	if err != nil {
		t.Fatal(err)
	}
	if got.Percentage() != 5 {
		t.Errorf(`PATCH {"percentage":5,"status":"active"} answered percentage %d`, got.Percentage())
	}
	// A device outside the operator's 5% but inside the stage's 40% is
	// not offered the image.
	var outside string
	for outside == "" {
		d := e.device("1.0.0")
		if b := domain.Bucket(r.ID().String(), d); b >= 5 && b < 40 {
			outside = d
		}
	}
	if res := e.check(outside, "1.0.0"); res.Task != nil {
		t.Errorf("device in bucket %d offered the image after the operator narrowed to 5%%", domain.Bucket(r.ID().String(), outside))
	}
}

// Audit rule A2: a record's after holds the fields an operator reviewing
// the change needs. Two rollout starts of the same firmware, one to the
// whole fleet and one a rollback (allow_downgrade) to devices tagged
// "pilot" on >=2.0.0, staged, with a window, are different changes; their
// records must not read the same.
func TestRolloutStartRecordSaysWhomAndHow(t *testing.T) {
	e, _ := newPolicyEnv(t, policyStart)
	fw := e.firmware("2.0.0")
	plain := e.rollout(fw, 100)
	narrow := e.rollout(fw, 0, func(s *domain.RolloutSpec) {
		s.Selector = domain.SelectorSpec{TagsAll: []string{"pilot"}, Versions: ">=2.0.0"}
		s.AllowDowngrade = true
		s.Stages = []domain.StageRequest{{Percentage: new(100)}}
		s.Window = &domain.WindowSpec{Daily: "02:00-04:00", TimeZone: "Europe/Berlin"}
	})
	entries, err := e.store.ListAudit(e.ctx, ports.AuditFilter{Action: domain.AuditRolloutStart, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	after := map[string]string{}
	for _, en := range entries {
		after[en.Record.Target()] = string(en.Record.After())
	}
	a, b := after[plain.ID().String()], after[narrow.ID().String()]
	if a == "" || b == "" {
		t.Fatalf("records: %v", after)
	}
	// If they say the same, the reviewer cannot tell them apart.
	if a == b {
		t.Errorf("rollout.start records of a whole-fleet rollout and a staged, windowed rollback to tagged devices read the same: %s", a)
	}
	for _, want := range []string{"pilot", "allow_downgrade", "02:00-04:00"} {
		if !strings.Contains(b, want) {
			t.Errorf("the rollback's rollout.start record does not mention %q: %s", want, b)
		}
	}
}

// Event rule 5: a rollout that paused itself is "paused, not cancelled, so
// an operator can look and resume"; the sweep (RolloutSweep) exists to make
// a judgement a stopped replica lost, "late, never lost". An operator who
// looked and resumed has judged the same counts the pause was made on:
// with no device reporting anything since, the next sweep must not pause
// the rollout again (announcing rollout.paused, reason auto, with nothing
// new to judge). Here it does, within OTA_ROLLOUT_SWEEP_INTERVAL of the
// resume.
func TestSweepDoesNotUndoAnOperatorsResumeWithoutNewEvidence(t *testing.T) {
	e, clock := newPolicyEnv(t, policyStart)
	r := e.watchedRollout(4)
	for i, status := range []string{"failed", "succeeded", "failed", "succeeded"} {
		d := e.device("1.0.0")
		res := e.check(d, "1.0.0")
		if res.Task == nil {
			t.Fatalf("device %d got no task", i)
		}
		e.mustEvent(asDeviceID(d), res.Task.Task.ID(), "end", status)
	}
	if v, _ := e.admin.GetRollout(e.ctx, r.ID()); v.Rollout.Status() != domain.RolloutPaused || v.Rollout.PausedReason() != domain.PausedAuto {
		t.Fatalf("want the threshold's pause first: %s %q", v.Rollout.Status(), v.Rollout.PausedReason())
	}
	active := "active"
	if _, err := e.admin.UpdateRollout(e.ctx, testActor, r.ID(), ports.RolloutChange{Status: &active}); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Minute)
	sweep, err := application.NewRolloutSweep(memory.NewRollouts(e.store), memory.NewTasks(e.store), clock, time.Minute, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sweep.Once(e.ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := e.admin.GetRollout(e.ctx, r.ID()); v.Rollout.Status() != domain.RolloutActive {
		t.Errorf("one sweep after the operator's resume, no event since: rollout %s (%q)", v.Rollout.Status(), v.Rollout.PausedReason())
	}
	// The next failure is new evidence: judged on the whole count (3 of 5
	// finished), the threshold pauses the rollout again.
	d := e.device("1.0.0")
	res := e.check(d, "1.0.0")
	if res.Task == nil {
		t.Fatal("no task after the resume")
	}
	e.mustEvent(asDeviceID(d), res.Task.Task.ID(), "end", "failed")
	if v, _ := e.admin.GetRollout(e.ctx, r.ID()); v.Rollout.Status() != domain.RolloutPaused || v.Rollout.PausedReason() != domain.PausedAuto {
		t.Errorf("a failure after the resume: rollout %s (%q), want paused by the threshold again", v.Rollout.Status(), v.Rollout.PausedReason())
	}
}
