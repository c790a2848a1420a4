package domain_test

import (
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

func TestStageValidation(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	tests := []struct {
		name   string
		spec   domain.RolloutSpec
		field  string
		wantPc int
	}{
		{"percentage from the first stage", domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(1)}, {Percentage: new(10)}}}, "", 1},
		{"percentage agreeing", domain.RolloutSpec{Percentage: 5, Stages: []domain.StageRequest{{Percentage: new(5)}}}, "", 5},
		{"percentage disagreeing", domain.RolloutSpec{Percentage: 7, Stages: []domain.StageRequest{{Percentage: new(5)}}}, "percentage", 0},
		{"not increasing", domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(10)}, {Percentage: new(10)}}}, "stages[1].percentage", 0},
		{"zero stage", domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(0)}}}, "stages[0].percentage", 0},
		{"success over 100", domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(1), SuccessPercent: new(101)}}}, "stages[0].success_percent", 0},
		{"negative min", domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(1), MinFinished: new(-1)}}}, "stages[0].min_finished", 0},
		{"soak too long", domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(1), Soak: 31 * 24 * time.Hour}}}, "stages[0].soak_seconds", 0},
		// Stores keep whole seconds: a fraction would be kept by one and
		// dropped by the other (the console reads Go durations).
		{"soak of a fraction of a second", domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(1), Soak: 1500 * time.Millisecond}}}, "stages[0].soak_seconds", 0},
		{"task timeout of a fraction of a second", domain.RolloutSpec{Percentage: 1, TaskTimeout: new(time.Hour + time.Millisecond)}, "task_timeout_seconds", 0},
		{"soak of the longest allowed", domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(1), Soak: domain.MaxSoak}}}, "", 1},
		{"min finished of the most allowed", domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(1), MinFinished: new(1_000_000)}}}, "", 1},
		{"min finished over the most allowed", domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(1), MinFinished: new(1_000_001)}}}, "stages[0].min_finished", 0},
		{"as many stages as allowed", domain.RolloutSpec{Stages: increasing(domain.MaxStages)}, "", 1},
		{"one stage too many", domain.RolloutSpec{Stages: increasing(domain.MaxStages + 1)}, "stages", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := domain.NewRollout(idOf(rolloutA), fw, tt.spec, t0)
			if tt.field != "" {
				wantValidation(t, err, tt.field)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Percentage() != tt.wantPc || len(r.History()) != 1 || !r.History()[0].StartedAt.Equal(t0) {
				t.Fatalf("percentage %d history %+v", r.Percentage(), r.History())
			}
		})
	}
}

// increasing is a plan of n stages at 1, 2, … n per cent.
func increasing(n int) []domain.StageRequest {
	plan := make([]domain.StageRequest, n)
	for i := range plan {
		plan[i] = domain.StageRequest{Percentage: new(i + 1)}
	}
	return plan
}

func stats(succeeded, failed int) domain.TaskStats {
	return domain.TaskStats{Succeeded: succeeded, Failed: failed}
}

// Stage rules G2–G3 as a table: each row evaluates a fresh 1% → 10% → 50%
// rollout once, on the stage's counts.
func TestRolloutEvaluateStages(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	plan := []domain.StageRequest{
		{Percentage: new(1), MinFinished: new(10), SuccessPercent: new(90)},
		{Percentage: new(10), MinFinished: new(10), SuccessPercent: new(90), Soak: time.Hour},
		{Percentage: new(50), MinFinished: new(10), SuccessPercent: new(90)},
	}
	tests := []struct {
		name       string
		threshold  *int
		stage      domain.TaskStats
		total      domain.TaskStats
		changed    bool
		wantStatus domain.RolloutStatus
		wantPct    int
	}{
		{"too few finished", nil, stats(9, 0), stats(9, 0), false, domain.RolloutActive, 1},
		{"gate holds, no soak: advance", nil, stats(9, 1), stats(9, 1), true, domain.RolloutActive, 10},
		{"gate missed: pause", nil, stats(8, 2), stats(8, 2), true, domain.RolloutPaused, 1},
		{"threshold first", intp(10), stats(10, 0), stats(20, 3), true, domain.RolloutPaused, 1},
		{"pending tasks do not count", nil, domain.TaskStats{Succeeded: 5, Pending: 50}, stats(5, 0), false, domain.RolloutActive, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := domain.RolloutSpec{Stages: plan, FailureThresholdPercent: tt.threshold, MinSample: intp(1)}
			r := mustRollout(t, rolloutA, fw, spec, t0)
			if got := r.Evaluate(tt.total, tt.stage, t1); got != tt.changed {
				t.Fatalf("changed = %v, want %v", got, tt.changed)
			}
			if r.Status() != tt.wantStatus || r.Percentage() != tt.wantPct {
				t.Fatalf("status %s percentage %d, want %s %d", r.Status(), r.Percentage(), tt.wantStatus, tt.wantPct)
			}
			if tt.wantStatus == domain.RolloutPaused && r.PausedReason() != domain.PausedAuto {
				t.Fatalf("paused for %q, want auto", r.PausedReason())
			}
			h := r.History()
			if tt.changed && (h[0].EndedAt.IsZero() || h[0].Reason == "") {
				t.Fatalf("history does not say why: %+v", h)
			}
		})
	}
}

// The soak time: the gate's first holding is recorded; checks see the next
// stage's percentage once the soak is over, before any write; the next
// evaluation stores the advance, dated when the soak ended.
func TestRolloutSoak(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Stages: []domain.StageRequest{
		{Percentage: new(10), MinFinished: new(2), SuccessPercent: new(50), Soak: time.Hour},
		{Percentage: new(100), MinFinished: new(2), SuccessPercent: new(50)},
	}}, t0)
	if !r.Evaluate(stats(2, 0), stats(2, 0), t1) || r.GateMetAt().IsZero() || r.Percentage() != 10 {
		t.Fatalf("gate met: changed, gate %s percentage %d", r.GateMetAt(), r.Percentage())
	}
	if r.Evaluate(stats(3, 0), stats(3, 0), t1.Add(30*time.Minute)) {
		t.Fatal("during the soak nothing changes")
	}
	if r.PercentageAt(t1.Add(59*time.Minute)) != 10 || r.PercentageAt(t1.Add(time.Hour)) != 100 {
		t.Fatalf("PercentageAt: %d before, %d after the soak", r.PercentageAt(t1.Add(59*time.Minute)), r.PercentageAt(t1.Add(time.Hour)))
	}
	if !r.Evaluate(stats(3, 0), stats(3, 0), t1.Add(3*time.Hour)) || r.Stage() != 1 || r.Percentage() != 100 {
		t.Fatalf("after the soak: stage %d percentage %d", r.Stage(), r.Percentage())
	}
	h := r.History()
	if len(h) != 2 || h[0].Outcome != domain.StageAdvanced || !h[1].StartedAt.Equal(t1.Add(time.Hour).UTC()) {
		t.Fatalf("history %+v", h)
	}
	// The last stage never advances, but its gate still pauses.
	if r.Evaluate(stats(3, 0), stats(1, 0), t1.Add(4*time.Hour)) {
		t.Fatal("last stage: nothing to advance to")
	}
	// Its gate may hold and its soak pass: there is still no next stage.
	r.Evaluate(stats(5, 0), stats(3, 0), t1.Add(4*time.Hour))
	if p := r.PercentageAt(t1.Add(100 * time.Hour)); p != 100 || r.Stage() != 1 {
		t.Fatalf("last stage long after its gate: stage %d, percentage %d", r.Stage(), p)
	}
	if !r.Evaluate(stats(3, 2), stats(0, 2), t1.Add(4*time.Hour)) || r.Status() != domain.RolloutPaused {
		t.Fatal("last stage gate missed: want auto pause")
	}
}

// An operator's percentage set once the current stage's soak is over
// (stage rules G1–G2): the due advance is stored first, dated when the
// soak ended, and the percentage overrides the stage that began then —
// not the one before it, whose advance would undo it. A paused rollout
// advances nothing (Evaluate judges only active ones).
func TestSetPercentageAfterTheSoakStoresTheAdvance(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	plan := domain.RolloutSpec{Stages: []domain.StageRequest{
		{Percentage: new(10), Soak: time.Hour},
		{Percentage: new(50), Soak: time.Hour},
		{Percentage: new(100)},
	}}
	r := mustRollout(t, rolloutA, fw, plan, t0)
	r.Evaluate(stats(1, 0), stats(1, 0), t1) // the gate holds: the soak starts
	paused := r
	if err := r.SetPercentage(5, t1.Add(30*time.Minute)); err != nil || r.Stage() != 0 || r.Percentage() != 5 {
		t.Fatalf("during the soak: stage %d percentage %d %v", r.Stage(), r.Percentage(), err)
	}
	if err := r.SetPercentage(5, t1.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	h := r.History()
	if r.Stage() != 1 || r.Percentage() != 5 || r.PercentageAt(t1.Add(2*time.Hour)) != 5 || len(h) != 2 ||
		h[0].Outcome != domain.StageAdvanced || !h[1].StartedAt.Equal(t1.Add(time.Hour).UTC()) || h[1].Percentage != 50 {
		t.Fatalf("after the soak: stage %d percentage %d (at %d) history %+v", r.Stage(), r.Percentage(), r.PercentageAt(t1.Add(2*time.Hour)), h)
	}
	// The next stage's judgement starts from the operator's percentage.
	if r.Evaluate(stats(2, 0), stats(1, 0), t1.Add(2*time.Hour)) && r.Percentage() != 5 {
		t.Fatalf("the second stage's gate undid the narrowing: %d", r.Percentage())
	}

	if err := paused.ChangeStatus(domain.RolloutPaused, fw, t1.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := paused.SetPercentage(5, t1.Add(2*time.Hour)); err != nil || paused.Stage() != 0 || paused.Percentage() != 5 {
		t.Fatalf("paused: stage %d percentage %d %v", paused.Stage(), paused.Percentage(), err)
	}
}

// Resuming an auto-paused staged rollout restarts the stage's sample.
func TestRolloutResumeRestartsStage(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(10), MinFinished: new(2), SuccessPercent: new(100)}, {Percentage: new(20)}}}, t0)
	r.Evaluate(stats(1, 1), stats(1, 1), t1)
	if r.Status() != domain.RolloutPaused {
		t.Fatal("want paused")
	}
	if err := r.ChangeStatus(domain.RolloutActive, fw, t1.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if !r.StageSince().Equal(t1.Add(time.Minute).UTC()) || len(r.History()) != 2 {
		t.Fatalf("stage since %s history %+v", r.StageSince(), r.History())
	}
}

// A window and a gate together: the gate advances the stage, the window
// still decides when the newly admitted devices are offered.
func TestWindowAndGate(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	created := time.Date(2025, 6, 10, 1, 0, 0, 0, time.UTC)
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Window: &domain.WindowSpec{Daily: "02:00-04:00"},
		Stages: []domain.StageRequest{{Percentage: new(1), MinFinished: new(1), SuccessPercent: new(100)}, {Percentage: new(100)}}}, created)
	var d domain.Device
	for i := 0; ; i++ {
		d = mustDevice(t, "dev-"+string(rune('a'+i%26))+string(rune('a'+i/26)), "cam-x1", "1.0.0")
		if domain.Bucket(rolloutA, d.ID().String()) >= 1 {
			break
		}
	}
	check := func(now time.Time) domain.CheckPlan {
		return domain.PlanCheck(domain.CheckInput{Device: d, Reported: domain.MustParseVersion("1.0.0"), Offers: []domain.Offer{{Firmware: fw, Rollout: r}}, Now: now})
	}
	if p := check(created.Add(2 * time.Hour)); p.Action != domain.CheckNoUpdate || !p.RetryAt.IsZero() {
		t.Fatalf("stage 1, outside its 1%%: %s retry %s", p.Action, p.RetryAt)
	}
	r.Evaluate(stats(1, 0), stats(1, 0), created.Add(2*time.Hour))
	if r.Percentage() != 100 {
		t.Fatalf("gate held, percentage %d", r.Percentage())
	}
	if p := check(created.Add(3 * time.Hour)); p.Action != domain.CheckNoUpdate || !p.RetryAt.Equal(created.Add(25*time.Hour)) {
		t.Fatalf("stage 2, window closed: %s retry %s", p.Action, p.RetryAt)
	}
	if p := check(created.Add(25 * time.Hour)); p.Action != domain.CheckCreate {
		t.Fatalf("stage 2, window open: %s", p.Action)
	}
}

func TestRolloutPolicyRecordRoundTrip(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	hour := time.Hour
	start := t0.Add(time.Hour)
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Selector: domain.SelectorSpec{TagsAll: []string{"eu"}, Versions: ">=1.0.0"},
		Stages: []domain.StageRequest{{Percentage: new(5)}, {Percentage: new(50)}}, StartsAt: &start, Window: &domain.WindowSpec{Daily: "01:00-02:00", TimeZone: "Asia/Tokyo"},
		TaskTimeout: &hour, AllowDowngrade: true}, t0)
	back := domain.RehydrateRollout(r.Record())
	if !back.Record().Equal(r.Record()) {
		t.Fatalf("round trip:\n%+v\n%+v", back.Record(), r.Record())
	}
	other := r.Record()
	other.Selector.TagsAll = []string{"us"}
	if other.Equal(r.Record()) {
		t.Fatal("Equal ignores the selector")
	}
	broken := r.Record()
	broken.Window = &domain.WindowSpec{Daily: "01:00-02:00", TimeZone: "Gone/Away"}
	b := domain.RehydrateRollout(broken)
	d := mustDevice(t, "cam-0001", "cam-x1", "1.0.0")
	if ok, _ := b.AdmitsAt(d, domain.DeviceFacts{Tags: []string{"eu"}}, domain.MustParseVersion("1.0.0"), t0.Add(30*time.Hour)); ok {
		t.Fatal("a rollout whose stored policy no longer parses must admit no one")
	}
}

// Pause and resume cycles keep the stage history bounded.
func TestStageHistoryIsBounded(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(10)}, {Percentage: new(20)}}}, t0)
	for i := range domain.MaxStageHistory + 20 {
		at := t0.Add(time.Duration(i) * time.Minute)
		if err := r.ChangeStatus(domain.RolloutPaused, fw, at); err != nil {
			t.Fatal(err)
		}
		if err := r.ChangeStatus(domain.RolloutActive, fw, at.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	h := r.History()
	if len(h) != domain.MaxStageHistory || h[len(h)-1].Outcome != (domain.StageOutcome{}) || h[0].Outcome != domain.StagePaused {
		t.Fatalf("history of %d entries, last %+v", len(h), h[len(h)-1])
	}
}

// A Rollout is a value: changing one never changes a copy of it, whose
// stage history may share its array (a store keeps the copies it is given).
func TestRolloutCopiesShareNoHistory(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(10)}, {Percentage: new(20)}}}, t0)
	kept := r
	if err := r.ChangeStatus(domain.RolloutPaused, fw, t1); err != nil { // ends the open stage entry
		t.Fatal(err)
	}
	paused := r
	if err := r.ChangeStatus(domain.RolloutActive, fw, t1.Add(time.Minute)); err != nil { // appends one
		t.Fatal(err)
	}
	if h := kept.History(); len(h) != 1 || !h[0].EndedAt.IsZero() {
		t.Errorf("the copy taken before the pause changed: %+v", h)
	}
	if err := paused.ChangeStatus(domain.RolloutCancelled, fw, t1.Add(2*time.Minute)); err != nil { // appends nothing, ends nothing open
		t.Fatal(err)
	}
	if h := r.History(); len(h) != 2 || !h[1].EndedAt.IsZero() || !h[1].StartedAt.Equal(t1.Add(time.Minute)) {
		t.Errorf("the resumed rollout's history changed with another copy: %+v", h)
	}
}

// A stage's stored outcome reads back as itself; "" is a running stage.
func TestParseStageOutcome(t *testing.T) {
	for s, want := range map[string]domain.StageOutcome{"": {}, "advanced": domain.StageAdvanced, "paused": domain.StagePaused} {
		if got, err := domain.ParseStageOutcome(s); err != nil || got != want || got.String() != s {
			t.Errorf("ParseStageOutcome(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	_, err := domain.ParseStageOutcome("skipped")
	wantField(t, "outcome skipped", err, "outcome")
}
