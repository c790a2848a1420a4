package domain

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"
)

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
	return named("status", s, RolloutActive, RolloutPaused, RolloutCancelled)
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
	return namedOr("paused_reason", s, PausedReason{}, PausedManual, PausedAuto)
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

// RolloutSpec is what an operator asks for when starting a rollout, as
// the edges read it (the API's body, the console's form): typed values,
// nil where a field was not given. NewRollout alone applies the defaults
// and refusals, so the API and the console answer a request alike.
type RolloutSpec struct {
	// Percentage is the share of the selected fleet admitted.
	Percentage int
	// NoPercentage says the request gave no percentage: a plan starts at
	// its first stage's, and without a plan it is refused as required.
	NoPercentage            bool
	MaxAttempts             *int
	FailureThresholdPercent *int
	MinSample               *int
	// Selector narrows the model's fleet (targeting rule T1).
	Selector SelectorSpec
	// Stages is the plan (stage rules G1–G4); when given, Percentage
	// must be 0 or the first stage's.
	Stages []StageRequest
	// StartsAt: nothing is offered before it (schedule rule S1).
	StartsAt *time.Time
	// Window is a daily maintenance window (schedule rule S2).
	Window *WindowSpec
	// TaskTimeout bounds how long an active task may go without an event
	// (stuck-task rule K1); nil is DefaultTaskTimeout.
	TaskTimeout *time.Duration
	// AllowDowngrade lets the rollout offer a version below the device's
	// (rollback rule R1); it needs a version range in Selector.
	AllowDowngrade bool
	// RequestKey is the request's Idempotency-Key (docs/DOMAIN.md,
	// Rollout); the zero key: none.
	RequestKey RequestKey
}

// KeyFor is the spec's request key bound to the request it came with: the
// firmware and every field of the spec, as given. The zero key stays zero.
func (spec RolloutSpec) KeyFor(firmware UUID) (RequestKey, error) {
	key := spec.RequestKey
	spec.RequestKey = RequestKey{}
	if spec.StartsAt != nil {
		// Judged before it is fingerprinted: a time the JSON of the
		// fingerprint cannot hold is the request's fault, as NewRollout
		// would say.
		if err := ValidateInstant("starts_at", *spec.StartsAt); err != nil {
			return RequestKey{}, err
		}
		at := spec.StartsAt.UTC() // one instant, whatever zone it was written in
		spec.StartsAt = &at
	}
	return key.of(struct {
		Firmware string
		Spec     RolloutSpec
	}{firmware.String(), spec})
}

// WindowSpec is a daily window "HH:MM-HH:MM" in TimeZone (IANA; "" is
// UTC). In a request, a window without Daily is refused: a time zone
// alone opens no window.
type WindowSpec struct {
	Daily    string
	TimeZone string
}

// Task timeout bounds (stuck-task rule K1).
const (
	DefaultTaskTimeout = 24 * time.Hour
	MinTaskTimeout     = time.Minute
	MaxTaskTimeout     = 30 * 24 * time.Hour
)

// Rollout offers one firmware to a percentage of its model's fleet.
type Rollout struct {
	id                      UUID
	firmwareID              UUID
	percentage              int
	maxAttempts             int
	failureThresholdPercent *int
	minSample               int
	status                  RolloutStatus
	pausedReason            PausedReason
	createdAt               time.Time
	updatedAt               time.Time

	selector       Selector
	stages         []StageSpec
	stage          int
	gateMetAt      time.Time
	history        []StageEvent
	startsAt       time.Time
	window         *Window
	taskTimeout    time.Duration
	allowDowngrade bool
	// failedAtResume is how many of its tasks had failed when an operator
	// last resumed it (AcceptFailures): the threshold judges again only
	// once more have.
	failedAtResume int
	// requestKey is the Idempotency-Key it was started with, if any.
	requestKey RequestKey
	// unusable marks a stored rollout whose policy no longer parses (a
	// time zone gone from tzdata): it admits no device rather than more.
	unusable bool
}

// NewRollout starts an active rollout of fw. Revoked firmware cannot be rolled out.
func NewRollout(id UUID, fw Firmware, spec RolloutSpec, now time.Time) (Rollout, error) {
	if id.IsZero() {
		return Rollout{}, invalid("id", "is required")
	}
	if fw.Revoked() {
		return Rollout{}, ErrFirmwareRevoked
	}
	if spec.NoPercentage && len(spec.Stages) == 0 {
		return Rollout{}, invalid("percentage", "is required")
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
	if err := r.applyPolicy(spec, now); err != nil {
		return Rollout{}, err
	}
	var err error
	if r.requestKey, err = spec.KeyFor(fw.ID()); err != nil {
		return Rollout{}, err
	}
	return r, nil
}

// applyPolicy validates and sets what a hands-off rollout adds to its
// percentage (docs/DOMAIN.md, "Hands-off rollouts").
func (r *Rollout) applyPolicy(spec RolloutSpec, now time.Time) error {
	var err error
	if r.selector, err = NewSelector(spec.Selector); err != nil {
		return err
	}
	if r.stages, err = validStages(spec.Stages); err != nil {
		return err
	}
	if len(r.stages) > 0 {
		if spec.Percentage != 0 && spec.Percentage != r.stages[0].Percentage {
			return invalid("percentage", "must be omitted or equal the first stage's percentage")
		}
		r.percentage = r.stages[0].Percentage
		r.history = []StageEvent{{Stage: 0, Percentage: r.percentage, StartedAt: stamp(now)}}
	} else {
		r.stages = nil
	}
	if spec.StartsAt != nil {
		if err := ValidateInstant("starts_at", *spec.StartsAt); err != nil {
			return err
		}
		r.startsAt = stamp(*spec.StartsAt)
	}
	if spec.Window != nil {
		if spec.Window.Daily == "" {
			return invalid("window.daily", "is required")
		}
		w, err := ParseWindow(spec.Window.Daily, spec.Window.TimeZone)
		if err != nil {
			return err
		}
		r.window = &w
	}
	r.taskTimeout = DefaultTaskTimeout
	if spec.TaskTimeout != nil {
		if t := *spec.TaskTimeout; t < MinTaskTimeout || t > MaxTaskTimeout {
			return invalid("task_timeout_seconds", "must be between %d and %d", int(MinTaskTimeout/time.Second), int(MaxTaskTimeout/time.Second))
		}
		if *spec.TaskTimeout%time.Second != 0 { // stores keep seconds: one would drop the fraction, one keep it
			return invalid("task_timeout_seconds", "must be whole seconds")
		}
		r.taskTimeout = *spec.TaskTimeout
	}
	if spec.AllowDowngrade && r.selector.Versions().IsZero() {
		return invalid("allow_downgrade", "needs selector.versions: a rollback names the versions it undoes")
	}
	r.allowDowngrade = spec.AllowDowngrade
	return nil
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

	Selector       SelectorSpec
	Stages         []StageSpec
	Stage          int
	GateMetAt      time.Time
	History        []StageEvent
	StartsAt       time.Time
	Window         *WindowSpec
	TaskTimeout    time.Duration // 0: DefaultTaskTimeout
	AllowDowngrade bool
	FailedAtResume int
	RequestKey     RequestKey
}

// RehydrateRollout rebuilds a stored rollout; only adapters call it. The
// rollout keeps its own copy of the threshold.
func RehydrateRollout(rec RolloutRecord) Rollout {
	r := Rollout{
		id: UUID{s: rec.ID}, firmwareID: UUID{s: rec.FirmwareID}, percentage: rec.Percentage, maxAttempts: rec.MaxAttempts,
		failureThresholdPercent: copyInt(rec.FailureThresholdPercent), minSample: rec.MinSample, status: rec.Status,
		pausedReason: rec.PausedReason, createdAt: stamp(rec.CreatedAt), updatedAt: stamp(rec.UpdatedAt),
		stages: slices.Clone(rec.Stages), stage: rec.Stage, gateMetAt: stamp(rec.GateMetAt), history: slices.Clone(rec.History),
		startsAt: stamp(rec.StartsAt), taskTimeout: rec.TaskTimeout, allowDowngrade: rec.AllowDowngrade,
		failedAtResume: rec.FailedAtResume, requestKey: rec.RequestKey,
	}
	if len(r.stages) == 0 {
		r.stages = nil
	}
	if r.taskTimeout <= 0 {
		r.taskTimeout = DefaultTaskTimeout
	}
	var err error
	if r.selector, err = NewSelector(rec.Selector); err != nil {
		r.unusable = true
	}
	if rec.Window != nil {
		w, err := ParseWindow(rec.Window.Daily, rec.Window.TimeZone)
		if err != nil {
			r.unusable = true
		}
		r.window = &w
	}
	if r.stage < 0 || len(r.stages) > 0 && r.stage >= len(r.stages) {
		r.unusable = true
	}
	return r
}

// Record exposes the fields for storage and display. It shares nothing
// with the rollout: changing the record (its threshold) leaves the rollout
// — and any cache holding it — as it was.
func (r Rollout) Record() RolloutRecord {
	rec := RolloutRecord{
		ID: r.id.String(), FirmwareID: r.firmwareID.String(), Percentage: r.percentage, MaxAttempts: r.maxAttempts,
		FailureThresholdPercent: copyInt(r.failureThresholdPercent), MinSample: r.minSample, Status: r.status,
		PausedReason: r.pausedReason, CreatedAt: r.createdAt, UpdatedAt: r.updatedAt,
		Selector: r.selector.Spec(), Stages: slices.Clone(r.stages), Stage: r.stage, GateMetAt: r.gateMetAt,
		History: slices.Clone(r.history), StartsAt: r.startsAt, TaskTimeout: r.taskTimeout, AllowDowngrade: r.allowDowngrade,
		FailedAtResume: r.failedAtResume, RequestKey: r.requestKey,
	}
	if r.window != nil {
		rec.Window = &WindowSpec{Daily: r.window.Daily(), TimeZone: r.window.Zone()}
	}
	return rec
}

// Equal reports whether two records hold the same values (optional and
// composite fields compared by value, not by pointer; times by instant).
func (rec RolloutRecord) Equal(o RolloutRecord) bool {
	a, b := rec.FailureThresholdPercent, o.FailureThresholdPercent
	if (a == nil) != (b == nil) || a != nil && *a != *b {
		return false
	}
	if (rec.Window == nil) != (o.Window == nil) || rec.Window != nil && *rec.Window != *o.Window {
		return false
	}
	if !rec.Selector.equal(o.Selector) || !slices.Equal(rec.Stages, o.Stages) || !slices.EqualFunc(rec.History, o.History, StageEvent.equal) {
		return false
	}
	if !rec.CreatedAt.Equal(o.CreatedAt) || !rec.UpdatedAt.Equal(o.UpdatedAt) || !rec.GateMetAt.Equal(o.GateMetAt) || !rec.StartsAt.Equal(o.StartsAt) {
		return false
	}
	rec.FailureThresholdPercent, o.FailureThresholdPercent = nil, nil
	rec.Window, o.Window = nil, nil
	rec.Selector, o.Selector = SelectorSpec{}, SelectorSpec{}
	rec.Stages, o.Stages, rec.History, o.History = nil, nil, nil, nil
	rec.CreatedAt, o.CreatedAt, rec.UpdatedAt, o.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	rec.GateMetAt, o.GateMetAt, rec.StartsAt, o.StartsAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return reflect.DeepEqual(rec, o)
}

func (s SelectorSpec) equal(o SelectorSpec) bool {
	return slices.Equal(s.TagsAll, o.TagsAll) && slices.Equal(s.TagsAny, o.TagsAny) &&
		maps.Equal(s.Attributes, o.Attributes) && s.Versions == o.Versions
}

func (e StageEvent) equal(o StageEvent) bool {
	return e.Stage == o.Stage && e.Percentage == o.Percentage && e.StartedAt.Equal(o.StartedAt) &&
		e.EndedAt.Equal(o.EndedAt) && e.Outcome == o.Outcome && e.Reason == o.Reason
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
func (r Rollout) ID() UUID { return r.id }

// FirmwareID is the firmware being rolled out.
func (r Rollout) FirmwareID() UUID { return r.firmwareID }

// Percentage is the share of the model's fleet admitted.
func (r Rollout) Percentage() int { return r.percentage }

// MaxAttempts is how many failed tasks a device may have for this firmware
// before it is no longer offered.
func (r Rollout) MaxAttempts() int { return r.maxAttempts }

// Status is active, paused or cancelled.
func (r Rollout) Status() RolloutStatus { return r.status }

// PausedReason is manual or auto while paused, zero otherwise.
func (r Rollout) PausedReason() PausedReason { return r.pausedReason }

// SetPercentage widens or narrows the rollout. Tasks already created stay;
// devices admitted at a lower percentage stay admitted at a higher one.
// An operator's percentage overrides the current stage's until the next
// stage starts (stage rule G1). A next stage whose advance is due — the
// soak ended, checks admit its share (PercentageAt), but no final event
// has stored it yet — has started: the advance is stored first, dated
// when the soak ended, and p overrides that stage's percentage. Set on
// the stage before it, p would be undone by the advance it was meant to
// override (the next final event would store max(p, the next stage's)).
func (r *Rollout) SetPercentage(p int, now time.Time) error {
	if r.status == RolloutCancelled {
		return transition(ErrInvalidTransition, "a cancelled rollout cannot be changed")
	}
	if err := validPercentage("percentage", p); err != nil {
		return err
	}
	r.advanceBeforeOperator(now, "set the percentage")
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
	// A stage whose soak is over has begun (G2): a pause or cancel ends
	// that stage, not the one before it.
	r.advanceBeforeOperator(now, "changed the status")
	switch to {
	case RolloutActive:
		if fw.Revoked() {
			return ErrFirmwareRevoked
		}
		if r.status == RolloutPaused && len(r.stages) > 0 {
			// The stage starts over: its gate is judged on a fresh sample.
			r.sampleStage(r.stage, now)
		}
		r.pausedReason = PausedReason{}
	case RolloutPaused:
		if r.status == RolloutPaused {
			return nil
		}
		r.pausedReason = PausedManual
		r.endStage(StagePaused, "paused by an operator", now)
	case RolloutCancelled:
		r.pausedReason = PausedReason{}
		r.endStage(StagePaused, "cancelled by an operator", now)
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
	if c := s.counter(st); c != nil {
		*c += n
	}
}

// counter is the field that counts status st (nil for the zero status), so
// that Add and Of map statuses to fields in one place.
func (s *TaskStats) counter(st TaskStatus) *int {
	switch st {
	case TaskPending:
		return &s.Pending
	case TaskDownloading:
		return &s.Downloading
	case TaskDownloaded:
		return &s.Downloaded
	case TaskInstalling:
		return &s.Installing
	case TaskSucceeded:
		return &s.Succeeded
	case TaskFailed:
		return &s.Failed
	case TaskCancelled:
		return &s.Cancelled
	}
	return nil
}

// CountsOver reports whether task a, rather than b, stands for their
// device in its rollout's counts (the stats, event rule 5's threshold,
// stage rule G1's gates), where a device counts once. A task with an
// outcome (succeeded or failed) wins over one without: a retry in flight
// or a cancel does not undo what the device showed. Between two alike, the
// later wins — by created_at, then by action id, the store's insertion
// order (a device's tasks are inserted one after the other), never by the
// random task id: a retry that worked, a reinstall that failed, a success
// later contradicted replace the earlier outcome. The Postgres adapter
// orders its DISTINCT ON the same way.
func CountsOver(a, b Task) bool {
	if ao, bo := a.status.hasOutcome(), b.status.hasOutcome(); ao != bo {
		return ao
	}
	if c := a.createdAt.Compare(b.createdAt); c != 0 {
		return c > 0
	}
	return a.actionID > b.actionID
}

// hasOutcome reports whether the status says how the device took the image.
func (s TaskStatus) hasOutcome() bool { return s == TaskSucceeded || s == TaskFailed }

// FailureThresholdPercent is the failure rate that pauses the rollout
// (nil: never), as a copy the caller owns.
func (r Rollout) FailureThresholdPercent() *int { return copyInt(r.failureThresholdPercent) }

// MinSample is how many finished tasks are needed before the threshold applies.
func (r Rollout) MinSample() int { return r.minSample }

// CreatedAt is when the rollout started.
func (r Rollout) CreatedAt() time.Time { return r.createdAt }

// UpdatedAt is when it last changed.
func (r Rollout) UpdatedAt() time.Time { return r.updatedAt }

// ResumedFrom reports whether r, changed from before, is a resume of a
// rollout that watches failures: one whose operator has looked at the
// failures so far (AcceptFailures).
func (r Rollout) ResumedFrom(before Rollout) bool {
	return before.status == RolloutPaused && r.WatchesFailures()
}

// AcceptFailures records the failures counted when an operator resumes
// the rollout (s, its counts then): a resume is the operator's judgement
// of them, which the threshold does not overturn on the same evidence —
// a rollout judged again with no task failed since (a sweep, a success)
// stays active; the next failure is judged on the whole count again
// (FailureArrived).
func (r *Rollout) AcceptFailures(s TaskStats) { r.failedAtResume = s.Failed }

// FailureArrived is a judgement made because one of r's tasks has just
// failed: new evidence, judged on the whole count whatever a resume
// accepted. The counts alone cannot tell it: devices count once, by their
// latest outcome, so a retry failing again, or a failure after a retry's
// success, need not raise the count of failed devices.
func (r *Rollout) FailureArrived() { r.failedAtResume = 0 }

// WatchesFailures reports whether the rollout may pause itself (event rule
// 5): it is active and has a failure threshold. Only then are its tasks
// worth counting when one of them finishes.
func (r Rollout) WatchesFailures() bool {
	return r.status == RolloutActive && r.failureThresholdPercent != nil
}

// AutoPause pauses an active rollout whose failure rate among finished
// tasks reached its threshold with at least MinSample finished tasks
// (event rule 5), once a task failed since an operator last resumed it
// (AcceptFailures). It reports whether it paused.
func (r *Rollout) AutoPause(s TaskStats, now time.Time) bool {
	if !r.WatchesFailures() || s.Failed <= r.failedAtResume {
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
	r.endStage(StagePaused, fmt.Sprintf("failure threshold reached: %d of %d finished tasks failed", s.Failed, finished), now)
	return true
}
