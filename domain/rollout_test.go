package domain_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

func TestNewRollout(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	tests := []struct {
		name        string
		spec        domain.RolloutSpec
		field       string // "" when valid
		maxAttempts int
		threshold   *int
		minSample   int
	}{
		{"defaults", domain.RolloutSpec{Percentage: 10}, "", 3, nil, 20},
		{"zero percent", domain.RolloutSpec{Percentage: 0}, "", 3, nil, 20},
		{"full", domain.RolloutSpec{Percentage: 100}, "", 3, nil, 20},
		{"explicit values", domain.RolloutSpec{Percentage: 50, MaxAttempts: intp(5), FailureThresholdPercent: intp(25), MinSample: intp(7)}, "", 5, intp(25), 7},
		{"one attempt", domain.RolloutSpec{Percentage: 50, MaxAttempts: intp(1)}, "", 1, nil, 20},
		{"threshold 0 refused", domain.RolloutSpec{Percentage: 50, FailureThresholdPercent: intp(0)}, "failure_threshold_percent", 0, nil, 0},
		{"threshold 1", domain.RolloutSpec{Percentage: 50, FailureThresholdPercent: intp(1)}, "", 3, intp(1), 20},
		{"threshold 100", domain.RolloutSpec{Percentage: 50, FailureThresholdPercent: intp(100)}, "", 3, intp(100), 20},
		{"min sample 1", domain.RolloutSpec{Percentage: 50, MinSample: intp(1)}, "", 3, nil, 1},
		{"max attempts 100", domain.RolloutSpec{Percentage: 50, MaxAttempts: intp(100)}, "", 100, nil, 20},
		{"max attempts 101", domain.RolloutSpec{Percentage: 50, MaxAttempts: intp(101)}, "max_attempts", 0, nil, 0},
		{"min sample 1000000", domain.RolloutSpec{Percentage: 50, MinSample: intp(1_000_000)}, "", 3, nil, 1_000_000},
		{"min sample 1000001", domain.RolloutSpec{Percentage: 50, MinSample: intp(1_000_001)}, "min_sample", 0, nil, 0},
		{"percent -1", domain.RolloutSpec{Percentage: -1}, "percentage", 0, nil, 0},
		{"percent 101", domain.RolloutSpec{Percentage: 101}, "percentage", 0, nil, 0},
		{"max attempts 0", domain.RolloutSpec{Percentage: 10, MaxAttempts: intp(0)}, "max_attempts", 0, nil, 0},
		{"max attempts negative", domain.RolloutSpec{Percentage: 10, MaxAttempts: intp(-3)}, "max_attempts", 0, nil, 0},
		{"threshold -1", domain.RolloutSpec{Percentage: 10, FailureThresholdPercent: intp(-1)}, "failure_threshold_percent", 0, nil, 0},
		{"threshold 101", domain.RolloutSpec{Percentage: 10, FailureThresholdPercent: intp(101)}, "failure_threshold_percent", 0, nil, 0},
		{"min sample 0", domain.RolloutSpec{Percentage: 10, MinSample: intp(0)}, "min_sample", 0, nil, 0},
		{"min sample negative", domain.RolloutSpec{Percentage: 10, MinSample: intp(-1)}, "min_sample", 0, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := domain.NewRollout(idOf(rolloutA), fw, tt.spec, t0)
			if tt.field != "" {
				wantValidation(t, err, tt.field)
				return
			}
			if err != nil {
				t.Fatalf("NewRollout: %v", err)
			}
			if r.ID() != idOf(rolloutA) || r.FirmwareID() != idOf("fw-1") || r.Percentage() != tt.spec.Percentage {
				t.Fatalf("id/firmware/percentage = %s/%s/%d", r.ID(), r.FirmwareID(), r.Percentage())
			}
			if r.Status() != domain.RolloutActive || r.PausedReason() != (domain.PausedReason{}) {
				t.Fatalf("status/reason = %s/%q", r.Status(), r.PausedReason())
			}
			if r.MaxAttempts() != tt.maxAttempts || r.MinSample() != tt.minSample {
				t.Fatalf("max_attempts/min_sample = %d/%d, want %d/%d", r.MaxAttempts(), r.MinSample(), tt.maxAttempts, tt.minSample)
			}
			got := r.FailureThresholdPercent()
			if (got == nil) != (tt.threshold == nil) || (got != nil && *got != *tt.threshold) {
				t.Fatalf("threshold = %v, want %v", got, tt.threshold)
			}
			if !r.CreatedAt().Equal(t0) || r.CreatedAt().Location() != time.UTC || !r.UpdatedAt().Equal(t0) {
				t.Fatalf("timestamps %v %v", r.CreatedAt(), r.UpdatedAt())
			}
		})
	}
}

func TestNewRolloutDefaultsMatchContract(t *testing.T) {
	if domain.DefaultMaxAttempts != 3 || domain.DefaultMinSample != 20 {
		t.Fatalf("defaults = %d/%d, want 3/20", domain.DefaultMaxAttempts, domain.DefaultMinSample)
	}
}

func TestNewRolloutCopiesThreshold(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	th := 30
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 10, FailureThresholdPercent: &th}, t0)
	th = 99
	if got := *r.FailureThresholdPercent(); got != 30 {
		t.Fatalf("rollout threshold aliased the caller's variable: %d", got)
	}
}

func TestNewRolloutRevokedFirmware(t *testing.T) {
	fw := revoked(mustFirmware(t, "fw-1", "cam-x1", "1.2.0", ""))
	_, err := domain.NewRollout(idOf(rolloutA), fw, domain.RolloutSpec{Percentage: 10}, t0)
	if !errors.Is(err, domain.ErrFirmwareRevoked) {
		t.Fatalf("NewRollout on revoked firmware = %v, want ErrFirmwareRevoked", err)
	}
}

// deviceInBucket returns a device whose bucket in rollout r is b, searching dev-N ids.
func deviceInBucket(t *testing.T, rollout string, b int) string {
	t.Helper()
	for i := 0; i < 100000; i++ {
		dev := fmt.Sprintf("dev-%d", i)
		if referenceBucket(rollout, dev) == b {
			return dev
		}
	}
	t.Fatalf("no device in bucket %d", b)
	return ""
}

// admits asks AdmitsAt about a device with no tags or attributes,
// reporting no version, at t1: only status and bucket can refuse it.
func admits(t *testing.T, r domain.Rollout, deviceID string) bool {
	t.Helper()
	ok, _ := r.AdmitsAt(mustDevice(t, deviceID, "cam-x1", "1.0.0"), domain.DeviceFacts{}, domain.Version{}, t1)
	return ok
}

func TestRolloutAdmits(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	dev := "cam-0001" // bucket 67 in rolloutA (see TestBucketKnownVectors)
	tests := []struct {
		name   string
		pct    int
		status domain.RolloutStatus
		want   bool
	}{
		{"0% admits nobody", 0, domain.RolloutActive, false},
		{"at bucket excluded", 67, domain.RolloutActive, false},
		{"bucket+1 admitted", 68, domain.RolloutActive, true},
		{"100% admits everyone", 100, domain.RolloutActive, true},
		{"paused admits nobody", 100, domain.RolloutPaused, false},
		{"cancelled admits nobody", 100, domain.RolloutCancelled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: tt.pct}, t0)
			if tt.status != domain.RolloutActive {
				if err := r.ChangeStatus(tt.status, fw, t1); err != nil {
					t.Fatal(err)
				}
			}
			if got := admits(t, r, dev); got != tt.want {
				t.Fatalf("AdmitsAt = %v, want %v", got, tt.want)
			}
		})
	}
	// Bucket 0 and 99 extremes.
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 1}, t0)
	if !admits(t, r, deviceInBucket(t, rolloutA, 0)) {
		t.Error("bucket 0 not admitted at 1%")
	}
	if admits(t, r, deviceInBucket(t, rolloutA, 1)) {
		t.Error("bucket 1 admitted at 1%")
	}
	r99 := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 99}, t0)
	if admits(t, r99, deviceInBucket(t, rolloutA, 99)) {
		t.Error("bucket 99 admitted at 99%")
	}
}

func TestRolloutSetPercentage(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	tests := []struct {
		name   string
		status domain.RolloutStatus
		to     int
		field  string
		kind   error
	}{
		{"widen", domain.RolloutActive, 80, "", nil},
		{"narrow", domain.RolloutActive, 5, "", nil},
		{"to zero", domain.RolloutActive, 0, "", nil},
		{"to 100", domain.RolloutActive, 100, "", nil},
		{"while paused", domain.RolloutPaused, 60, "", nil},
		{"negative", domain.RolloutActive, -1, "percentage", nil},
		{"over 100", domain.RolloutActive, 101, "percentage", nil},
		{"cancelled", domain.RolloutCancelled, 60, "", domain.ErrInvalidTransition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 20}, t0)
			if tt.status != domain.RolloutActive {
				if err := r.ChangeStatus(tt.status, fw, t0); err != nil {
					t.Fatal(err)
				}
			}
			before := r.Record()
			err := r.SetPercentage(tt.to, t1)
			switch {
			case tt.field != "":
				wantValidation(t, err, tt.field)
			case tt.kind != nil:
				if !errors.Is(err, tt.kind) {
					t.Fatalf("err = %v, want %v", err, tt.kind)
				}
			default:
				if err != nil {
					t.Fatalf("SetPercentage: %v", err)
				}
				if r.Percentage() != tt.to || !r.UpdatedAt().Equal(t1) || r.Status() != tt.status {
					t.Fatalf("after: pct=%d updated=%v status=%s", r.Percentage(), r.UpdatedAt(), r.Status())
				}
				return
			}
			if !r.Record().Equal(before) {
				t.Fatalf("refused change modified the rollout: %+v", r.Record())
			}
		})
	}
}

// rolloutIn builds a rollout in the named state through the public API.
func rolloutIn(t *testing.T, state string, fw domain.Firmware) domain.Rollout {
	t.Helper()
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 50, FailureThresholdPercent: intp(50), MinSample: intp(1)}, t0)
	switch state {
	case "active":
	case "paused-manual":
		if err := r.ChangeStatus(domain.RolloutPaused, fw, t0); err != nil {
			t.Fatal(err)
		}
	case "paused-auto":
		if !r.AutoPause(domain.TaskStats{Failed: 1}, t0) {
			t.Fatal("fixture: AutoPause did not pause")
		}
	case "cancelled":
		if err := r.ChangeStatus(domain.RolloutCancelled, fw, t0); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown state %q", state)
	}
	return r
}

func TestRolloutChangeStatus(t *testing.T) {
	const (
		released = false
		revoke   = true
	)
	tests := []struct {
		from       string
		to         domain.RolloutStatus
		fwRevoked  bool
		err        error // sentinel, nil when allowed
		wantStatus domain.RolloutStatus
		wantReason domain.PausedReason
	}{
		{"active", domain.RolloutActive, released, nil, domain.RolloutActive, domain.PausedReason{}},
		{"active", domain.RolloutActive, revoke, domain.ErrFirmwareRevoked, domain.RolloutActive, domain.PausedReason{}},
		{"active", domain.RolloutPaused, released, nil, domain.RolloutPaused, domain.PausedManual},
		{"active", domain.RolloutPaused, revoke, nil, domain.RolloutPaused, domain.PausedManual},
		{"active", domain.RolloutCancelled, released, nil, domain.RolloutCancelled, domain.PausedReason{}},
		{"active", domain.RolloutCancelled, revoke, nil, domain.RolloutCancelled, domain.PausedReason{}},

		{"paused-manual", domain.RolloutActive, released, nil, domain.RolloutActive, domain.PausedReason{}},
		{"paused-manual", domain.RolloutActive, revoke, domain.ErrFirmwareRevoked, domain.RolloutPaused, domain.PausedManual},
		{"paused-manual", domain.RolloutPaused, released, nil, domain.RolloutPaused, domain.PausedManual},
		{"paused-manual", domain.RolloutCancelled, released, nil, domain.RolloutCancelled, domain.PausedReason{}},

		{"paused-auto", domain.RolloutActive, released, nil, domain.RolloutActive, domain.PausedReason{}},
		{"paused-auto", domain.RolloutActive, revoke, domain.ErrFirmwareRevoked, domain.RolloutPaused, domain.PausedAuto},
		{"paused-auto", domain.RolloutCancelled, revoke, nil, domain.RolloutCancelled, domain.PausedReason{}},

		{"cancelled", domain.RolloutActive, released, domain.ErrInvalidTransition, domain.RolloutCancelled, domain.PausedReason{}},
		{"cancelled", domain.RolloutActive, revoke, domain.ErrInvalidTransition, domain.RolloutCancelled, domain.PausedReason{}},
		{"cancelled", domain.RolloutPaused, released, domain.ErrInvalidTransition, domain.RolloutCancelled, domain.PausedReason{}},
		// Cancelling again is a retry of the outcome already reached, not a change.
		{"cancelled", domain.RolloutCancelled, released, nil, domain.RolloutCancelled, domain.PausedReason{}},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s_to_%s_revoked=%v", tt.from, tt.to, tt.fwRevoked)
		t.Run(name, func(t *testing.T) {
			fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
			r := rolloutIn(t, tt.from, fw)
			if tt.fwRevoked {
				fw = revoked(fw)
			}
			before := r.Record()
			err := r.ChangeStatus(tt.to, fw, t1)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				if !r.Record().Equal(before) {
					t.Fatalf("refused change modified the rollout: %+v", r.Record())
				}
			} else if err != nil {
				t.Fatalf("ChangeStatus: %v", err)
			}
			if r.Status() != tt.wantStatus || r.PausedReason() != tt.wantReason {
				t.Fatalf("status/reason = %s/%q, want %s/%q", r.Status(), r.PausedReason(), tt.wantStatus, tt.wantReason)
			}
			if tt.err == nil && r.Status() != before.Status && !r.UpdatedAt().Equal(t1) {
				t.Fatalf("updatedAt not moved on change: %v", r.UpdatedAt())
			}
			if got := admits(t, r, "cam-0001") || admits(t, r, "speaker-42"); got && r.Status() != domain.RolloutActive {
				t.Fatalf("a %s rollout admits devices", r.Status())
			}
		})
	}
}

func TestRolloutChangeStatusInvalidTarget(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	r := rolloutIn(t, "active", fw)
	before := r.Record()
	wantValidation(t, r.ChangeStatus(domain.RolloutStatus{}, fw, t1), "status")
	if !r.Record().Equal(before) {
		t.Fatal("invalid status modified the rollout")
	}
}

func TestRolloutAutoPause(t *testing.T) {
	tests := []struct {
		name      string
		threshold *int
		minSample *int
		stats     domain.TaskStats
		want      bool
	}{
		{"no threshold never pauses", nil, intp(1), domain.TaskStats{Failed: 100}, false},
		{"below min sample", intp(50), intp(20), domain.TaskStats{Failed: 10, Succeeded: 9}, false},
		{"exact boundary at min sample", intp(50), intp(20), domain.TaskStats{Failed: 10, Succeeded: 10}, true},
		{"just under threshold", intp(50), intp(20), domain.TaskStats{Failed: 9, Succeeded: 11}, false},
		{"all failed", intp(50), intp(20), domain.TaskStats{Failed: 30}, true},
		{"default min sample 20: 19 failures", intp(50), nil, domain.TaskStats{Failed: 19}, false},
		{"default min sample 20: 20 failures", intp(50), nil, domain.TaskStats{Failed: 20}, true},
		{"10% boundary", intp(10), intp(3), domain.TaskStats{Failed: 1, Succeeded: 9}, true},
		{"just under 10%", intp(10), intp(3), domain.TaskStats{Failed: 1, Succeeded: 10}, false},
		{"33% of 1/3 reached", intp(33), intp(3), domain.TaskStats{Failed: 1, Succeeded: 2}, true},
		{"34% of 1/3 not reached", intp(34), intp(3), domain.TaskStats{Failed: 1, Succeeded: 2}, false},
		{"100% needs all failed", intp(100), intp(5), domain.TaskStats{Failed: 19, Succeeded: 1}, false},
		{"100% all failed", intp(100), intp(5), domain.TaskStats{Failed: 20}, true},
		{"unfinished tasks are not the sample", intp(50), intp(20), domain.TaskStats{
			Failed: 10, Pending: 50, Downloading: 50, Downloaded: 50, Installing: 50, Cancelled: 50}, false},
		{"cancelled tasks do not dilute the rate", intp(50), intp(4), domain.TaskStats{
			Failed: 2, Succeeded: 2, Cancelled: 1000}, true},
		{"no finished tasks", intp(1), intp(1), domain.TaskStats{Pending: 10}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
			r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{
				Percentage: 50, FailureThresholdPercent: tt.threshold, MinSample: tt.minSample}, t0)
			before := r.Record()
			got := r.AutoPause(tt.stats, t1)
			if got != tt.want {
				t.Fatalf("AutoPause(%+v) = %v, want %v", tt.stats, got, tt.want)
			}
			if !tt.want {
				if !r.Record().Equal(before) {
					t.Fatal("AutoPause changed a rollout it did not pause")
				}
				return
			}
			if r.Status() != domain.RolloutPaused || r.PausedReason() != domain.PausedAuto || !r.UpdatedAt().Equal(t1) {
				t.Fatalf("after pause: %s/%q/%v", r.Status(), r.PausedReason(), r.UpdatedAt())
			}
			if admits(t, r, deviceInBucket(t, rolloutA, 0)) {
				t.Fatal("auto-paused rollout still admits devices")
			}
		})
	}
}

func TestRolloutAutoPauseOnlyWhenActive(t *testing.T) {
	stats := domain.TaskStats{Failed: 100}
	for _, state := range []string{"paused-manual", "paused-auto", "cancelled"} {
		t.Run(state, func(t *testing.T) {
			fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
			r := rolloutIn(t, state, fw)
			before := r.Record()
			if r.AutoPause(stats, t1) {
				t.Fatalf("AutoPause paused a %s rollout", state)
			}
			if !r.Record().Equal(before) {
				t.Fatalf("AutoPause changed a %s rollout: %+v", state, r.Record())
			}
		})
	}
}

func TestRolloutResumeAfterAutoPause(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	r := rolloutIn(t, "paused-auto", fw)
	if err := r.ChangeStatus(domain.RolloutActive, fw, t1); err != nil {
		t.Fatal(err)
	}
	if r.Status() != domain.RolloutActive || r.PausedReason().String() != "" {
		t.Fatalf("resume: %s/%q", r.Status(), r.PausedReason())
	}
}

func TestParseRolloutStatusAndReason(t *testing.T) {
	for _, st := range []domain.RolloutStatus{domain.RolloutActive, domain.RolloutPaused, domain.RolloutCancelled} {
		got, err := domain.ParseRolloutStatus(st.String())
		if err != nil || got != st {
			t.Errorf("ParseRolloutStatus(%q) = %v, %v", st, got, err)
		}
	}
	for _, bad := range []string{"", "Active", "stopped"} {
		_, err := domain.ParseRolloutStatus(bad)
		wantValidation(t, err, "status")
	}
	for _, r := range []domain.PausedReason{{}, domain.PausedManual, domain.PausedAuto} {
		got, err := domain.ParsePausedReason(r.String())
		if err != nil || got != r {
			t.Errorf("ParsePausedReason(%q) = %v, %v", r, got, err)
		}
	}
	if domain.PausedManual.String() != "manual" || domain.PausedAuto.String() != "auto" {
		t.Error("paused reason wire forms")
	}
	_, err := domain.ParsePausedReason("operator")
	wantValidation(t, err, "paused_reason")
}

func TestRolloutRecordRoundTrip(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	r := rolloutIn(t, "paused-auto", fw)
	back := domain.RehydrateRollout(r.Record())
	if !back.Record().Equal(r.Record()) {
		t.Fatalf("round trip: %+v vs %+v", back.Record(), r.Record())
	}
}

func TestTaskStatsAdd(t *testing.T) {
	var s domain.TaskStats
	for i, st := range domain.AllTaskStatuses {
		s.Add(st, i+1)
	}
	s.Add(domain.TaskFailed, 10)
	want := domain.TaskStats{Pending: 1, Downloading: 2, Downloaded: 3, Installing: 4, Succeeded: 5, Failed: 16, Cancelled: 7}
	if s != want {
		t.Fatalf("stats = %+v, want %+v", s, want)
	}
	s.Add(domain.TaskStatus{}, 100)
	if s != want {
		t.Fatal("unknown status was counted")
	}
}

func TestRolloutSharesNoThresholdWithItsRecords(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 10, FailureThresholdPercent: intp(12)}, t0)
	*r.Record().FailureThresholdPercent = 99
	*r.FailureThresholdPercent() = 98
	rec := r.Record()
	back := domain.RehydrateRollout(rec)
	*rec.FailureThresholdPercent = 97
	if got := *r.FailureThresholdPercent(); got != 12 {
		t.Fatalf("threshold %d after changing copies, want 12", got)
	}
	if got := *back.FailureThresholdPercent(); got != 12 {
		t.Fatalf("rehydrated threshold %d after changing its record, want 12", got)
	}
}

// TestRehydrateRolloutDefaultsTaskTimeout: a stored rollout without a task
// timeout (0, from before the column) times its tasks out after the
// default, not at once.
func TestRehydrateRolloutDefaultsTaskTimeout(t *testing.T) {
	for _, stored := range []time.Duration{0, -time.Second} {
		if got := domain.RehydrateRollout(domain.RolloutRecord{ID: rolloutA, Percentage: 5, TaskTimeout: stored}).TaskTimeout(); got != domain.DefaultTaskTimeout {
			t.Errorf("stored %v: task timeout %v, want %v", stored, got, domain.DefaultTaskTimeout)
		}
	}
	if got := domain.RehydrateRollout(domain.RolloutRecord{ID: rolloutA, Percentage: 5, TaskTimeout: time.Hour}).TaskTimeout(); got != time.Hour {
		t.Errorf("stored 1h: task timeout %v", got)
	}
}

func TestRolloutRecordEqual(t *testing.T) {
	base := domain.RolloutRecord{ID: rolloutA, Percentage: 5, FailureThresholdPercent: intp(10)}
	same := base
	same.FailureThresholdPercent = intp(10)
	if !base.Equal(same) {
		t.Fatal("equal values at different addresses are not Equal")
	}
	for name, change := range map[string]func(*domain.RolloutRecord){
		"threshold value": func(r *domain.RolloutRecord) { r.FailureThresholdPercent = intp(11) },
		"threshold unset": func(r *domain.RolloutRecord) { r.FailureThresholdPercent = nil },
		"percentage":      func(r *domain.RolloutRecord) { r.Percentage = 6 },
	} {
		other := base
		change(&other)
		if base.Equal(other) || other.Equal(base) {
			t.Errorf("%s: records Equal", name)
		}
	}
}
