package domain

import "time"

// RolloutStatus is the operator-visible state of a rollout.
type RolloutStatus struct{ s string }

// Rollout statuses. Only active rollouts admit devices; cancelled is final.
var (
	RolloutActive    = RolloutStatus{"active"}
	RolloutPaused    = RolloutStatus{"paused"}
	RolloutCancelled = RolloutStatus{"cancelled"}
)

// ParseRolloutStatus reads a stored or requested status.
func ParseRolloutStatus(s string) (RolloutStatus, error) {
	switch s {
	case RolloutActive.s:
		return RolloutActive, nil
	case RolloutPaused.s:
		return RolloutPaused, nil
	case RolloutCancelled.s:
		return RolloutCancelled, nil
	}
	return RolloutStatus{}, invalid("status", "must be active, paused or cancelled")
}

// String is the wire and storage form.
func (s RolloutStatus) String() string { return s.s }

// PausedReason says who paused a rollout: an operator, or the failure threshold.
type PausedReason struct{ s string }

// Paused reasons; the zero value means "not paused".
var (
	PausedManual = PausedReason{"manual"}
	PausedAuto   = PausedReason{"auto"}
)

// ParsePausedReason reads a stored reason ("" is none).
func ParsePausedReason(s string) (PausedReason, error) {
	switch s {
	case "":
		return PausedReason{}, nil
	case PausedManual.s:
		return PausedManual, nil
	case PausedAuto.s:
		return PausedAuto, nil
	}
	return PausedReason{}, invalid("paused_reason", "must be manual or auto")
}

// String is the wire and storage form ("" when not paused).
func (r PausedReason) String() string { return r.s }

// Rollout defaults from the product contract.
const (
	DefaultMaxAttempts = 3
	DefaultMinSample   = 20
	maxMaxAttempts     = 100
	maxMinSample       = 1_000_000
)

// RolloutSpec is what an operator asks for when starting a rollout. Nil
// pointers take the defaults.
type RolloutSpec struct {
	Percentage              int
	MaxAttempts             *int
	FailureThresholdPercent *int
	MinSample               *int
}

// Rollout offers one firmware to a percentage of its model's fleet.
type Rollout struct {
	id                      string
	firmwareID              string
	percentage              int
	maxAttempts             int
	failureThresholdPercent *int
	minSample               int
	status                  RolloutStatus
	pausedReason            PausedReason
	createdAt               time.Time
	updatedAt               time.Time
}

// NewRollout starts an active rollout of fw. Revoked firmware cannot be rolled out.
func NewRollout(id string, fw Firmware, spec RolloutSpec, now time.Time) (Rollout, error) {
	if fw.Revoked() {
		return Rollout{}, ErrFirmwareRevoked
	}
	if err := validPercentage("percentage", spec.Percentage); err != nil {
		return Rollout{}, err
	}
	r := Rollout{
		id: id, firmwareID: fw.ID(), percentage: spec.Percentage,
		maxAttempts: DefaultMaxAttempts, minSample: DefaultMinSample,
		status: RolloutActive, createdAt: stamp(now), updatedAt: stamp(now),
	}
	if spec.MaxAttempts != nil {
		if *spec.MaxAttempts < 1 || *spec.MaxAttempts > maxMaxAttempts {
			return Rollout{}, invalid("max_attempts", "must be between 1 and %d", maxMaxAttempts)
		}
		r.maxAttempts = *spec.MaxAttempts
	}
	if spec.FailureThresholdPercent != nil {
		// 0% would pause a healthy rollout as soon as min_sample tasks finish.
		if t := *spec.FailureThresholdPercent; t < 1 || t > 100 {
			return Rollout{}, invalid("failure_threshold_percent", "must be between 1 and 100")
		}
		t := *spec.FailureThresholdPercent
		r.failureThresholdPercent = &t
	}
	if spec.MinSample != nil {
		if *spec.MinSample < 1 || *spec.MinSample > maxMinSample {
			return Rollout{}, invalid("min_sample", "must be between 1 and %d", maxMinSample)
		}
		r.minSample = *spec.MinSample
	}
	return r, nil
}

// RolloutRecord is a stored rollout's fields, for RehydrateRollout.
type RolloutRecord struct {
	ID                      string
	FirmwareID              string
	Percentage              int
	MaxAttempts             int
	FailureThresholdPercent *int
	MinSample               int
	Status                  RolloutStatus
	PausedReason            PausedReason
	CreatedAt               time.Time
	UpdatedAt               time.Time
}

// RehydrateRollout rebuilds a stored rollout; only adapters call it. The
// rollout keeps its own copy of the threshold.
func RehydrateRollout(rec RolloutRecord) Rollout {
	return Rollout{
		id: rec.ID, firmwareID: rec.FirmwareID, percentage: rec.Percentage, maxAttempts: rec.MaxAttempts,
		failureThresholdPercent: copyInt(rec.FailureThresholdPercent), minSample: rec.MinSample, status: rec.Status,
		pausedReason: rec.PausedReason, createdAt: rec.CreatedAt, updatedAt: rec.UpdatedAt,
	}
}

// Record exposes the fields for storage and display. It shares nothing
// with the rollout: changing the record (its threshold) leaves the rollout
// — and any cache holding it — as it was.
func (r Rollout) Record() RolloutRecord {
	return RolloutRecord{
		ID: r.id, FirmwareID: r.firmwareID, Percentage: r.percentage, MaxAttempts: r.maxAttempts,
		FailureThresholdPercent: copyInt(r.failureThresholdPercent), MinSample: r.minSample, Status: r.status,
		PausedReason: r.pausedReason, CreatedAt: r.createdAt, UpdatedAt: r.updatedAt,
	}
}

// Equal reports whether two records hold the same values (the threshold
// compared by value, not by pointer).
func (rec RolloutRecord) Equal(o RolloutRecord) bool {
	a, b := rec.FailureThresholdPercent, o.FailureThresholdPercent
	if (a == nil) != (b == nil) || a != nil && *a != *b {
		return false
	}
	rec.FailureThresholdPercent, o.FailureThresholdPercent = nil, nil
	return rec == o
}

// copyInt copies an optional value, so that no two owners share it.
func copyInt(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func validPercentage(field string, p int) error {
	if p < 0 || p > 100 {
		return invalid(field, "must be between 0 and 100")
	}
	return nil
}

// ID is the rollout's UUID.
func (r Rollout) ID() string { return r.id }

// FirmwareID is the firmware being rolled out.
func (r Rollout) FirmwareID() string { return r.firmwareID }

// Percentage is the share of the model's fleet admitted.
func (r Rollout) Percentage() int { return r.percentage }

// MaxAttempts is how many failed tasks a device may have for this firmware
// before it is no longer offered.
func (r Rollout) MaxAttempts() int { return r.maxAttempts }

// Status is active, paused or cancelled.
func (r Rollout) Status() RolloutStatus { return r.status }

// PausedReason is manual or auto while paused, zero otherwise.
func (r Rollout) PausedReason() PausedReason { return r.pausedReason }

// Admits reports whether this rollout offers its firmware to the device now.
func (r Rollout) Admits(deviceID string) bool {
	return r.status == RolloutActive && Bucket(r.id, deviceID) < r.percentage
}

// SetPercentage widens or narrows the rollout. Tasks already created stay;
// devices admitted at a lower percentage stay admitted at a higher one.
func (r *Rollout) SetPercentage(p int, now time.Time) error {
	if r.status == RolloutCancelled {
		return transition(ErrInvalidTransition, "a cancelled rollout cannot be changed")
	}
	if err := validPercentage("percentage", p); err != nil {
		return err
	}
	r.percentage = p
	r.updatedAt = stamp(now)
	return nil
}

// ChangeStatus applies an operator's status change. Resuming needs the
// firmware, since a revoked firmware must never become available again.
func (r *Rollout) ChangeStatus(to RolloutStatus, fw Firmware, now time.Time) error {
	if r.status == RolloutCancelled {
		if to == RolloutCancelled {
			return nil
		}
		return transition(ErrInvalidTransition, "a cancelled rollout cannot be changed")
	}
	switch to {
	case RolloutActive:
		if fw.Revoked() {
			return ErrFirmwareRevoked
		}
		r.pausedReason = PausedReason{}
	case RolloutPaused:
		if r.status == RolloutPaused {
			return nil
		}
		r.pausedReason = PausedManual
	case RolloutCancelled:
		r.pausedReason = PausedReason{}
	default:
		return invalid("status", "must be active, paused or cancelled")
	}
	r.status = to
	r.updatedAt = stamp(now)
	return nil
}

// TaskStats counts a rollout's tasks by status.
type TaskStats struct {
	Pending, Downloading, Downloaded, Installing int
	Succeeded, Failed, Cancelled                 int
}

// Add counts n tasks of status s.
func (s *TaskStats) Add(st TaskStatus, n int) {
	switch st {
	case TaskPending:
		s.Pending += n
	case TaskDownloading:
		s.Downloading += n
	case TaskDownloaded:
		s.Downloaded += n
	case TaskInstalling:
		s.Installing += n
	case TaskSucceeded:
		s.Succeeded += n
	case TaskFailed:
		s.Failed += n
	case TaskCancelled:
		s.Cancelled += n
	}
}

// FailureThresholdPercent is the failure rate that pauses the rollout
// (nil: never), as a copy the caller owns.
func (r Rollout) FailureThresholdPercent() *int { return copyInt(r.failureThresholdPercent) }

// MinSample is how many finished tasks are needed before the threshold applies.
func (r Rollout) MinSample() int { return r.minSample }

// CreatedAt is when the rollout started.
func (r Rollout) CreatedAt() time.Time { return r.createdAt }

// UpdatedAt is when it last changed.
func (r Rollout) UpdatedAt() time.Time { return r.updatedAt }

// WatchesFailures reports whether the rollout may pause itself (event rule
// 5): it is active and has a failure threshold. Only then are its tasks
// worth counting when one of them finishes.
func (r Rollout) WatchesFailures() bool {
	return r.status == RolloutActive && r.failureThresholdPercent != nil
}

// AutoPause pauses an active rollout whose failure rate among finished
// tasks reached its threshold with at least MinSample finished tasks
// (event rule 5). It reports whether it paused.
func (r *Rollout) AutoPause(s TaskStats, now time.Time) bool {
	if !r.WatchesFailures() {
		return false
	}
	finished := s.Succeeded + s.Failed
	if finished == 0 || finished < r.minSample {
		return false
	}
	if s.Failed*100 < *r.failureThresholdPercent*finished {
		return false
	}
	r.status = RolloutPaused
	r.pausedReason = PausedAuto
	r.updatedAt = stamp(now)
	return true
}
