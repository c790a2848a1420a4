package domain_test

import (
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// What a rollout waits for, as a table: each row builds a rollout in some
// state and asks at t1 (11:01 UTC), with or without the stage's counts.
func TestRolloutWaitingFor(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	plan := []domain.StageRequest{
		{Percentage: new(1), MinFinished: new(10), SuccessPercent: new(90), Soak: time.Hour},
		{Percentage: new(10), MinFinished: new(10), SuccessPercent: new(90)},
		{Percentage: new(50), MinFinished: new(10), SuccessPercent: new(90)},
	}
	// gates is the plan as NewRollout judges it: the stages' gates.
	gates := []domain.StageSpec{
		{Percentage: 1, MinFinished: 10, SuccessPercent: 90, Soak: time.Hour},
		{Percentage: 10, MinFinished: 10, SuccessPercent: 90},
		{Percentage: 50, MinFinished: 10, SuccessPercent: 90},
	}
	start := func(t *testing.T, spec domain.RolloutSpec) domain.Rollout {
		t.Helper()
		r, err := domain.NewRollout(idOf(rolloutA), fw, spec, t0)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	staged := func(t *testing.T) domain.Rollout { return start(t, domain.RolloutSpec{Stages: plan}) }
	// at rebuilds r with its record changed, as a store would hand it back.
	at := func(r domain.Rollout, change func(*domain.RolloutRecord)) domain.Rollout {
		rec := r.Record()
		change(&rec)
		return domain.RehydrateRollout(rec)
	}
	later := t0.Add(2 * time.Hour)
	tests := []struct {
		name    string
		rollout func(t *testing.T) domain.Rollout
		stage   *domain.TaskStats
		want    domain.RolloutWait
	}{
		{"plain rollout admitting", func(t *testing.T) domain.Rollout { return start(t, domain.RolloutSpec{Percentage: 20}) },
			nil, domain.RolloutWait{Kind: domain.WaitNothing}},
		{"plain rollout at 0%", func(t *testing.T) domain.Rollout { return start(t, domain.RolloutSpec{}) },
			nil, domain.RolloutWait{Kind: domain.WaitNoShare}},
		{"cancelled", func(t *testing.T) domain.Rollout {
			r := staged(t)
			if err := r.ChangeStatus(domain.RolloutCancelled, fw, t0); err != nil {
				t.Fatal(err)
			}
			return r
		}, nil, domain.RolloutWait{Kind: domain.WaitCancelled}},
		{"paused by an operator", func(t *testing.T) domain.Rollout {
			r := staged(t)
			if err := r.ChangeStatus(domain.RolloutPaused, fw, t0); err != nil {
				t.Fatal(err)
			}
			return r
		}, nil, domain.RolloutWait{Kind: domain.WaitOperator, Reason: "paused by an operator"}},
		{"paused by a missed gate", func(t *testing.T) domain.Rollout {
			r := staged(t)
			if !r.Evaluate(stats(5, 5), stats(5, 5), t0) {
				t.Fatal("a missed gate did not pause")
			}
			return r
		}, nil, domain.RolloutWait{Kind: domain.WaitAutoPaused, Reason: "stage gate missed: 5 of 10 finished tasks succeeded, below 90%"}},
		{"paused by the failure threshold", func(t *testing.T) domain.Rollout {
			r := start(t, domain.RolloutSpec{Percentage: 20, FailureThresholdPercent: intp(10), MinSample: intp(1)})
			if !r.AutoPause(stats(0, 1), t0) {
				t.Fatal("not paused")
			}
			return r
		}, nil, domain.RolloutWait{Kind: domain.WaitAutoPaused}},
		{"unusable policy", func(t *testing.T) domain.Rollout {
			return at(staged(t), func(rec *domain.RolloutRecord) { rec.Stage = 7 })
		}, nil, domain.RolloutWait{Kind: domain.WaitUnusable}},
		{"starts later", func(t *testing.T) domain.Rollout {
			return start(t, domain.RolloutSpec{Stages: plan, StartsAt: &later, Window: &domain.WindowSpec{Daily: "02:00-04:00"}})
		}, nil, domain.RolloutWait{Kind: domain.WaitStart, Until: later}},
		{"started, outside its window", func(t *testing.T) domain.Rollout {
			return start(t, domain.RolloutSpec{Percentage: 20, StartsAt: &t0, Window: &domain.WindowSpec{Daily: "02:00-04:00"}})
		}, nil, domain.RolloutWait{Kind: domain.WaitWindow, Until: time.Date(2025, 3, 2, 2, 0, 0, 0, time.UTC)}},
		{"inside its window", func(t *testing.T) domain.Rollout {
			return start(t, domain.RolloutSpec{Percentage: 20, Window: &domain.WindowSpec{Daily: "12:00-13:00", TimeZone: "Europe/Berlin"}})
		}, nil, domain.RolloutWait{Kind: domain.WaitNothing}},
		{"gate not yet held, counted", staged, &domain.TaskStats{Succeeded: 3, Failed: 1, Pending: 4},
			domain.RolloutWait{Kind: domain.WaitGate, Gate: gates[0], Counted: true, Finished: 4, Succeeded: 3}},
		{"gate not yet held, not counted", staged, nil, domain.RolloutWait{Kind: domain.WaitGate, Gate: gates[0]}},
		{"gate held, soaking", func(t *testing.T) domain.Rollout {
			r := staged(t)
			if !r.Evaluate(stats(10, 0), stats(10, 0), t0) {
				t.Fatal("the gate was not recorded")
			}
			return r
		}, nil, domain.RolloutWait{Kind: domain.WaitSoak, Gate: gates[0], Until: t0.Add(time.Hour).UTC()}},
		{"soak over, next stage due", func(t *testing.T) domain.Rollout {
			return at(staged(t), func(rec *domain.RolloutRecord) { rec.GateMetAt = t0.Add(-2 * time.Hour) })
		}, nil, domain.RolloutWait{Kind: domain.WaitAdvance, Gate: gates[0]}},
		{"second stage waits for its gate", func(t *testing.T) domain.Rollout {
			return at(staged(t), func(rec *domain.RolloutRecord) { rec.Stage = 1 })
		}, nil, domain.RolloutWait{Kind: domain.WaitGate, Stage: 1, Gate: gates[1]}},
		{"last stage reached", func(t *testing.T) domain.Rollout {
			return at(staged(t), func(rec *domain.RolloutRecord) { rec.Stage = 2 })
		}, &domain.TaskStats{}, domain.RolloutWait{Kind: domain.WaitNothing}},
		{"unusable: a stored stage past the plan's last", func(t *testing.T) domain.Rollout {
			return at(staged(t), func(rec *domain.RolloutRecord) { rec.Stage = len(plan) })
		}, nil, domain.RolloutWait{Kind: domain.WaitUnusable}},
		{"unusable: a stored window that no longer parses", func(t *testing.T) domain.Rollout {
			r := start(t, domain.RolloutSpec{Percentage: 20, Window: &domain.WindowSpec{Daily: "12:00-13:00", TimeZone: "Europe/Berlin"}})
			return at(r, func(rec *domain.RolloutRecord) { rec.Window.TimeZone = "Nowhere/Else" })
		}, nil, domain.RolloutWait{Kind: domain.WaitUnusable}},
		{"usable as stored: a window that parses", func(t *testing.T) domain.Rollout {
			r := start(t, domain.RolloutSpec{Percentage: 20, Window: &domain.WindowSpec{Daily: "12:00-13:00", TimeZone: "Europe/Berlin"}})
			return at(r, func(*domain.RolloutRecord) {})
		}, nil, domain.RolloutWait{Kind: domain.WaitNothing}},
		{"usable as stored: no stages", func(t *testing.T) domain.Rollout {
			return at(start(t, domain.RolloutSpec{Percentage: 20}), func(*domain.RolloutRecord) {})
		}, nil, domain.RolloutWait{Kind: domain.WaitNothing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.rollout(t).WaitingFor(t1, fw, tt.stage)
			if got.Kind != tt.want.Kind || !got.Until.Equal(tt.want.Until) || got.Reason != tt.want.Reason ||
				got.Stage != tt.want.Stage || got.Gate != tt.want.Gate || got.Counted != tt.want.Counted ||
				got.Finished != tt.want.Finished || got.Succeeded != tt.want.Succeeded {
				t.Errorf("WaitingFor = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A revoked firmware's rollout admits no device whatever its status says,
// and cannot be resumed (check rule 5): it waits for nothing, and says it
// is revoked rather than "admits its share" or "an operator to resume it".
// Only a cancelled rollout says it is cancelled first.
func TestRolloutOfRevokedFirmwareWaitsForNothing(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	for _, tt := range []struct {
		name   string
		status domain.RolloutStatus
		want   domain.WaitKind
	}{
		{"active", domain.RolloutActive, domain.WaitRevoked},
		{"paused by an operator", domain.RolloutPaused, domain.WaitRevoked},
		{"cancelled", domain.RolloutCancelled, domain.WaitCancelled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := domain.NewRollout(idOf(rolloutA), fw, domain.RolloutSpec{Percentage: 20}, t0)
			if err != nil {
				t.Fatal(err)
			}
			if tt.status != domain.RolloutActive {
				if err := r.ChangeStatus(tt.status, fw, t0); err != nil {
					t.Fatal(err)
				}
			}
			if w := r.WaitingFor(t1, revoked(fw), nil); w.Kind != tt.want {
				t.Errorf("WaitingFor with the firmware revoked = %v, want %v", w.Kind, tt.want)
			}
			if w := r.WaitingFor(t1, fw, nil); w.Kind == domain.WaitRevoked {
				t.Errorf("WaitingFor with the firmware released = %v", w.Kind)
			}
		})
	}
}

// A window is read in its own zone for the rollout as a whole: 12:00-13:00
// Berlin is open at 11:01 UTC (12:01 CET) and closed an hour later.
func TestRolloutWaitingForWindowZone(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	r, err := domain.NewRollout(idOf(rolloutA), fw, domain.RolloutSpec{Percentage: 5,
		Window: &domain.WindowSpec{Daily: "12:00-13:00", TimeZone: "Europe/Berlin"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if w := r.WaitingFor(t1, fw, nil); w.Kind != domain.WaitNothing {
		t.Errorf("inside the window: %v", w.Kind)
	}
	w := r.WaitingFor(t1.Add(time.Hour), fw, nil)
	if next := time.Date(2025, 3, 2, 11, 0, 0, 0, time.UTC); w.Kind != domain.WaitWindow || !w.Until.Equal(next) {
		t.Errorf("after the window: %v until %v, want window until %v", w.Kind, w.Until, next)
	}
}
