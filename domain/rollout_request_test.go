package domain_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// TestNewRolloutAppliesTheRequestDefaults: what a request leaves out,
// NewRollout fills in — the API and the console pass nil for it.
func TestNewRolloutAppliesTheRequestDefaults(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	tests := []struct {
		name string
		spec domain.RolloutSpec
		want func(domain.RolloutRecord) bool
	}{
		{"max_attempts 3, min_sample 20, no threshold, task timeout 24h", domain.RolloutSpec{Percentage: 10},
			func(r domain.RolloutRecord) bool {
				return r.Percentage == 10 && r.MaxAttempts == 3 &&
					r.MinSample == 20 && r.FailureThresholdPercent == nil && r.TaskTimeout == 24*time.Hour &&
					r.Stages == nil && r.Window == nil && r.StartsAt.IsZero() && !r.AllowDowngrade
			}},
		{"a plan without a percentage starts at its first stage's", domain.RolloutSpec{NoPercentage: true,
			Stages: []domain.StageRequest{{Percentage: new(5)}, {Percentage: new(50)}}},
			func(r domain.RolloutRecord) bool { return r.Percentage == 5 && r.Stage == 0 }},
		{"a plan at percentage 0 starts at its first stage's", domain.RolloutSpec{Percentage: 0,
			Stages: []domain.StageRequest{{Percentage: new(5)}}},
			func(r domain.RolloutRecord) bool { return r.Percentage == 5 }},
		{"a stage's gate defaults: min_finished 1, success 95, no soak", domain.RolloutSpec{NoPercentage: true,
			Stages: []domain.StageRequest{{Percentage: new(5)}, {Percentage: new(100)}}},
			func(r domain.RolloutRecord) bool {
				return slices.Equal(r.Stages, []domain.StageSpec{
					{Percentage: 5, MinFinished: 1, SuccessPercent: 95}, {Percentage: 100, MinFinished: 1, SuccessPercent: 95}})
			}},
		{"a given success 0 is 0, not the default", domain.RolloutSpec{NoPercentage: true,
			Stages: []domain.StageRequest{{Percentage: new(5), MinFinished: new(7), SuccessPercent: new(0), Soak: time.Hour}}},
			func(r domain.RolloutRecord) bool {
				return slices.Equal(r.Stages, []domain.StageSpec{{Percentage: 5, MinFinished: 7, SuccessPercent: 0, Soak: time.Hour}})
			}},
		{"a task timeout of exactly one minute is kept", domain.RolloutSpec{Percentage: 1, TaskTimeout: new(time.Minute)},
			func(r domain.RolloutRecord) bool { return r.TaskTimeout == time.Minute }},
		{"a task timeout of exactly 30 days is kept", domain.RolloutSpec{Percentage: 1, TaskTimeout: new(30 * 24 * time.Hour)},
			func(r domain.RolloutRecord) bool { return r.TaskTimeout == 30*24*time.Hour }},
		{"a window's time zone defaults to UTC", domain.RolloutSpec{Percentage: 1, Window: &domain.WindowSpec{Daily: "02:00-04:00"}},
			func(r domain.RolloutRecord) bool {
				return r.Window != nil && *r.Window == domain.WindowSpec{Daily: "02:00-04:00", TimeZone: "UTC"}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := domain.NewRollout(idOf(rolloutA), fw, tt.spec, t0)
			if err != nil {
				t.Fatal(err)
			}
			if rec := r.Record(); !tt.want(rec) {
				t.Fatalf("record %+v", rec)
			}
		})
	}
}

// TestNewRolloutRefusesABadRequest: each refusal of a rollout request is
// NewRollout's, VALIDATION_FAILED naming its field (docs/ERRORS.md).
func TestNewRolloutRefusesABadRequest(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	plan := func(st ...domain.StageRequest) []domain.StageRequest { return st }
	eleven := make([]domain.StageRequest, 11)
	for i := range eleven {
		eleven[i] = domain.StageRequest{Percentage: new(i + 1)}
	}
	tests := []struct {
		name  string
		spec  domain.RolloutSpec
		field string // and, after ": ", the start of the reason
	}{
		{"no percentage and no plan", domain.RolloutSpec{NoPercentage: true}, "percentage: is required"},
		{"percentage over 100", domain.RolloutSpec{Percentage: 101}, "percentage"},
		{"percentage negative", domain.RolloutSpec{Percentage: -1}, "percentage"},
		{"percentage not the first stage's", domain.RolloutSpec{Percentage: 7, Stages: plan(domain.StageRequest{Percentage: new(5)})}, "percentage"},
		{"max_attempts 0", domain.RolloutSpec{Percentage: 1, MaxAttempts: new(0)}, "max_attempts"},
		{"max_attempts over 100", domain.RolloutSpec{Percentage: 1, MaxAttempts: new(101)}, "max_attempts"},
		{"threshold 0", domain.RolloutSpec{Percentage: 1, FailureThresholdPercent: new(0)}, "failure_threshold_percent"},
		{"threshold over 100", domain.RolloutSpec{Percentage: 1, FailureThresholdPercent: new(101)}, "failure_threshold_percent"},
		{"min_sample 0", domain.RolloutSpec{Percentage: 1, MinSample: new(0)}, "min_sample"},
		{"more than 10 stages", domain.RolloutSpec{NoPercentage: true, Stages: eleven}, "stages"},
		{"a stage without a percentage", domain.RolloutSpec{NoPercentage: true, Stages: plan(domain.StageRequest{Percentage: new(5)}, domain.StageRequest{MinFinished: new(2)})}, "stages[1].percentage: is required"},
		{"a stage's min_finished given as 0", domain.RolloutSpec{NoPercentage: true, Stages: plan(domain.StageRequest{Percentage: new(5), MinFinished: new(0)})}, "stages[0].min_finished"},
		{"a stage's success over 100", domain.RolloutSpec{NoPercentage: true, Stages: plan(domain.StageRequest{Percentage: new(5), SuccessPercent: new(101)})}, "stages[0].success_percent"},
		{"a stage's success negative", domain.RolloutSpec{NoPercentage: true, Stages: plan(domain.StageRequest{Percentage: new(5), SuccessPercent: new(-1)})}, "stages[0].success_percent"},
		{"a negative soak", domain.RolloutSpec{NoPercentage: true, Stages: plan(domain.StageRequest{Percentage: new(5), Soak: -time.Second})}, "stages[0].soak_seconds"},
		{"a window without daily", domain.RolloutSpec{Percentage: 1, Window: &domain.WindowSpec{TimeZone: "Europe/Berlin"}}, "window.daily: is required"},
		{"a malformed window", domain.RolloutSpec{Percentage: 1, Window: &domain.WindowSpec{Daily: "2-4"}}, "window.daily"},
		{"an unknown time zone", domain.RolloutSpec{Percentage: 1, Window: &domain.WindowSpec{Daily: "02:00-04:00", TimeZone: "Mars/Olympus"}}, "window.time_zone"},
		{"a task timeout under a minute", domain.RolloutSpec{Percentage: 1, TaskTimeout: new(30 * time.Second)}, "task_timeout_seconds"},
		{"a task timeout over 30 days", domain.RolloutSpec{Percentage: 1, TaskTimeout: new(31 * 24 * time.Hour)}, "task_timeout_seconds"},
		{"a downgrade without a version range", domain.RolloutSpec{Percentage: 1, AllowDowngrade: true}, "allow_downgrade"},
		{"a malformed version range", domain.RolloutSpec{Percentage: 1, Selector: domain.SelectorSpec{Versions: "~>1"}}, "selector.versions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := domain.NewRollout(idOf(rolloutA), fw, tt.spec, t0)
			field, reason, _ := strings.Cut(tt.field, ": ")
			wantValidation(t, err, field)
			if !strings.HasPrefix(strings.TrimPrefix(err.Error(), field+": "), reason) {
				t.Fatalf("reason %q, want %q", err, reason)
			}
		})
	}
}
