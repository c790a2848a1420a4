package domain

import (
	"time"
)

// TaskStatus is where an upgrade task stands. The order of the active
// statuses is the order a device moves through them.
type TaskStatus struct {
	s    string
	rank int8 // position on the forward path; failed and cancelled sit off it
}

// Task statuses. pending, downloading, downloaded and installing are active;
// succeeded, failed and cancelled are final.
var (
	TaskPending     = TaskStatus{"pending", 0}
	TaskDownloading = TaskStatus{"downloading", 1}
	TaskDownloaded  = TaskStatus{"downloaded", 2}
	TaskInstalling  = TaskStatus{"installing", 3}
	TaskSucceeded   = TaskStatus{"succeeded", 4}
	TaskFailed      = TaskStatus{"failed", 5}
	TaskCancelled   = TaskStatus{"cancelled", 6}
)

// AllTaskStatuses lists every status in display order.
var AllTaskStatuses = []TaskStatus{TaskPending, TaskDownloading, TaskDownloaded, TaskInstalling, TaskSucceeded, TaskFailed, TaskCancelled}

// ActiveTaskStatuses lists the statuses of which a device may have at most one task.
var ActiveTaskStatuses = []TaskStatus{TaskPending, TaskDownloading, TaskDownloaded, TaskInstalling}

// ParseTaskStatus reads a stored or filtered status.
func ParseTaskStatus(s string) (TaskStatus, error) {
	return named("status", s, AllTaskStatuses...)
}

// String is the wire and storage form.
func (s TaskStatus) String() string { return s.s }

// IsActive reports whether the task still occupies the device's one active slot.
func (s TaskStatus) IsActive() bool { return s.rank <= TaskInstalling.rank && s.s != "" }

// IsFinal reports whether the task is over.
func (s TaskStatus) IsFinal() bool { return !s.IsActive() && s.s != "" }

// Error codes the service itself writes on tasks it ends.
const (
	CodeSuperseded       = "SUPERSEDED"
	CodeFirmwareRevoked  = "FIRMWARE_REVOKED"
	CodeRolloutCancelled = "ROLLOUT_CANCELLED"
	// CodeRolloutPaused withdraws a pending task of a rollout that paused
	// itself (event rule 5, stage rule G3): the image stops spreading.
	CodeRolloutPaused = "ROLLOUT_PAUSED"
	// CodeTimedOut fails a task that went without an event for longer
	// than its rollout's task timeout (stuck-task rule K1).
	CodeTimedOut = "TIMED_OUT"
	// CodeNotDeliverable cancels a pending task whose firmware the
	// protocol its device asks by cannot deliver (Firmware.CheckDeliverable).
	CodeNotDeliverable = "NOT_DELIVERABLE"
	// CodeAlreadyInstalled marks a succeeded task whose device reported
	// that it already ran the firmware (Mender's "already-installed"): it
	// finished without downloading anything. A succeeded event carrying
	// it keeps it on the task; any other code on a success is dropped.
	CodeAlreadyInstalled = "ALREADY_INSTALLED"
	// CodeInstallReverted re-marks failed a success the device then
	// contradicted, reporting a version below the one it installed — or,
	// for a rollback rollout's success, above it (event rule 7).
	CodeInstallReverted = "INSTALL_REVERTED"
)

// Task is one upgrade of one device to one firmware, within one rollout.
type Task struct {
	id           UUID
	actionID     int64
	deviceID     DeviceID
	firmwareID   UUID
	rolloutID    UUID
	status       TaskStatus
	progress     int
	attempt      int
	errorCode    string
	errorMessage string
	createdAt    time.Time
	updatedAt    time.Time
	stage        time.Time // the start of the stage it counts in (JoinStage); zero: none
}

// NewTask creates a pending task for the device to install the offer's
// firmware. attempt counts from 1. The action id is assigned when stored.
func NewTask(id UUID, deviceID DeviceID, offer Offer, attempt int, now time.Time) (Task, error) {
	if id.IsZero() {
		return Task{}, invalid("id", "is required")
	}
	if deviceID.IsZero() {
		return Task{}, invalid("device_id", "is required")
	}
	if attempt < 1 {
		return Task{}, invalid("attempt", "must be at least 1")
	}
	if offer.Firmware.Revoked() {
		return Task{}, ErrFirmwareRevoked
	}
	now = stamp(now)
	return Task{
		id: id, deviceID: deviceID, firmwareID: offer.Firmware.ID(), rolloutID: offer.Rollout.ID(),
		status: TaskPending, attempt: attempt, createdAt: now, updatedAt: now,
	}, nil
}

// TaskRecord is a stored task's fields, for RehydrateTask and storage.
type TaskRecord struct {
	ID           string
	ActionID     int64
	DeviceID     string
	FirmwareID   string
	RolloutID    string
	Status       TaskStatus
	Progress     int
	Attempt      int
	ErrorCode    string
	ErrorMessage string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// Stage is the start of the rollout stage the task counts in (zero:
	// none), fixed at its insert (Task.JoinStage).
	Stage time.Time
}

// RehydrateTask rebuilds a stored task; only adapters call it.
func RehydrateTask(r TaskRecord) Task {
	return Task{
		id: UUID{s: r.ID}, actionID: r.ActionID, deviceID: DeviceID{s: r.DeviceID}, firmwareID: UUID{s: r.FirmwareID}, rolloutID: UUID{s: r.RolloutID},
		status: r.Status, progress: r.Progress, attempt: r.Attempt, errorCode: r.ErrorCode,
		errorMessage: r.ErrorMessage, createdAt: stamp(r.CreatedAt), updatedAt: stamp(r.UpdatedAt), stage: stamp(r.Stage),
	}
}

// Record exposes the task's fields for storage and display.
func (t Task) Record() TaskRecord {
	return TaskRecord{
		ID: t.id.String(), ActionID: t.actionID, DeviceID: t.deviceID.String(), FirmwareID: t.firmwareID.String(), RolloutID: t.rolloutID.String(),
		Status: t.status, Progress: t.progress, Attempt: t.attempt, ErrorCode: t.errorCode,
		ErrorMessage: t.errorMessage, CreatedAt: t.createdAt, UpdatedAt: t.updatedAt, Stage: t.stage,
	}
}

// ID is the task's UUID.
func (t Task) ID() UUID { return t.id }

// ActionID is the task's positive integer id for protocols that number actions.
func (t Task) ActionID() int64 { return t.actionID }

// DeviceID is the device doing the upgrade.
func (t Task) DeviceID() DeviceID { return t.deviceID }

// FirmwareID is the firmware being installed.
func (t Task) FirmwareID() UUID { return t.firmwareID }

// RolloutID is the rollout that created the task.
func (t Task) RolloutID() UUID { return t.rolloutID }

// Status is where the task stands.
func (t Task) Status() TaskStatus { return t.status }

// Progress is 0–100 within the current status.
func (t Task) Progress() int { return t.progress }

// Attempt counts this device's tasks for this firmware, from 1.
func (t Task) Attempt() int { return t.attempt }

// ErrorCode is why the task failed or was cancelled ("" if it was not).
func (t Task) ErrorCode() string { return t.errorCode }

// ErrorMessage is the device's or the service's explanation.
func (t Task) ErrorMessage() string { return t.errorMessage }

// CreatedAt is when the task was created.
func (t Task) CreatedAt() time.Time { return t.createdAt }

// UpdatedAt is when the task last changed.
func (t Task) UpdatedAt() time.Time { return t.updatedAt }

// Cancel ends a pending task on the service's initiative (superseded,
// revoked, rollout cancelled). A started task is never cancelled: the device
// is mid-flash and must be allowed to finish.
func (t *Task) Cancel(code, message string, now time.Time) error {
	if t.status != TaskPending {
		return transition(ErrInvalidTransition, "only a pending task can be cancelled, this one is %s", t.status)
	}
	t.status = TaskCancelled
	t.errorCode = code
	t.errorMessage = message
	t.updatedAt = stamp(now)
	return nil
}

// Succeed marks an active task done because the device reports running its
// firmware version (check rule 3): it installed the image and rebooted.
func (t *Task) Succeed(now time.Time) error {
	if !t.status.IsActive() {
		return transition(ErrTaskFinished, "task is %s", t.status)
	}
	t.status = TaskSucceeded
	t.progress = 100
	t.updatedAt = stamp(now)
	return nil
}

// Installs reports whether t, changed from before, is a success just
// stored: before was active and t succeeded. A success — a device's final
// event on any protocol (REST, DDI, Mender) or a check's implicit one
// (check rule 3) — is the device's word that it runs t's firmware now, so
// the store that writes it sets the device's version to the firmware's in
// the same transaction (event rule 6): a later read sees both or neither,
// and a device whose next poll carries no version (DDI) or the old one
// (an agent that reports before it reboots, a reverted install) is judged
// against what it installed.
func (t Task) Installs(before Task) bool {
	return before.status.IsActive() && t.status == TaskSucceeded
}

// InstalledLate reports whether ev, refused on t (TASK_FINISHED: t is
// final), is still the device's word that it runs t's firmware: a
// succeeded event on a task the service failed as TIMED_OUT (rule K1).
// The device finished after the service gave up on it. The task stays as
// it is — the attempt was counted, and the device is told to stop — but
// the device's version is recorded as a success's would be (event rule
// 6): it runs the image, and must not be offered it again.
func (t Task) InstalledLate(ev Event) bool {
	return t.status == TaskFailed && t.errorCode == CodeTimedOut && ev.status == TaskSucceeded
}

// SuccessAcknowledgesSkip reports whether a success the device reports on
// t acknowledges being told to wait rather than an install: t is still
// pending — the device reported no progress on it, so it wrote nothing —
// and w, its rollout's maintenance window, is closed for the device at
// now (schedule rule S2: Window.Open, in the device's zone). That is when
// a DDI deploymentBase answers update "skip", and SWUpdate acknowledges a
// skip with closed/success ("Skipped Update.") without installing. Such a
// report changes nothing: the task stays active and is handed out again
// when the window opens (K1: a device told to wait is not idle). Stored
// as a success, it would record as the device's version an image the
// device never installed (event rule 6), which it would never be offered
// again. Without a window (w nil) no device is told to wait.
func (t Task) SuccessAcknowledgesSkip(w *Window, f DeviceFacts, now time.Time) bool {
	if t.status != TaskPending || w == nil {
		return false
	}
	open, _ := w.Open(now, f)
	return !open
}

// Revert re-marks a succeeded task failed (INSTALL_REVERTED) when a check
// contradicts it (event rule 7): the device, read running fw's version —
// the one the success recorded (Installs) — now reports a lower one, or,
// when r (the task's rollout) is a rollback (rule R1: the success was a
// downgrade), a higher one (Contradicts). The image did not stay: a
// bootloader fell back, or the device was flashed back. As a failure, it
// counts as an attempt (event rule 4: the next task for fw is the next
// attempt, bounded by max_attempts) and in its rollout's threshold and
// gates, where it no longer counts as a success. A check whose read
// predates the success (it read another version) is not a contradiction:
// it was sent before the device knew better. It reports whether the task
// changed.
func (t *Task) Revert(read, reported Version, fw Firmware, r Rollout, now time.Time) bool {
	if t.status != TaskSucceeded || t.firmwareID != fw.ID() || reported.IsZero() ||
		!read.Equal(fw.Version()) || !Contradicts(fw.Version(), reported, r.allowDowngrade) {
		return false
	}
	t.status = TaskFailed
	t.errorCode = CodeInstallReverted
	t.errorMessage = "the device reports " + reported.String() + " after installing " + fw.Version().String()
	t.updatedAt = stamp(now)
	return true
}

// succeededAfter reports whether t is a success stored after at (the zero
// time: never).
func (t Task) succeededAfter(at time.Time) bool {
	return t.status == TaskSucceeded && !at.IsZero() && t.updatedAt.After(at)
}

// Settle applies the check-time rules that end an active task before a
// target is chosen: the device already runs the task's version (succeeded,
// rule 3), or a pending task's firmware was revoked, its rollout cancelled
// or paused by itself — not by an operator (rule 5). A pending task for a version below what the device reports is
// cancelled as superseded too: handing it out would be a downgrade (unless
// its rollout is a rollback). An active task without an event for longer
// than its rollout's task timeout fails as TIMED_OUT (stuck-task rule K1):
// counted from the task's last change, and only while the rollout offered
// updates to the device (Rollout.inactivity: after starts_at, inside the
// window in the device's zone) — a device waiting as it was told is not
// idle. It reports whether the task changed.
func (t *Task) Settle(reported Version, fw Firmware, r Rollout, facts DeviceFacts, now time.Time) bool {
	if !t.status.IsActive() {
		return false
	}
	if !reported.IsZero() && fw.Version().Equal(reported) {
		return t.Succeed(now) == nil
	}
	if t.status == TaskPending {
		switch {
		case !reported.IsZero() && reported.Compare(fw.Version()) > 0 && !r.allowDowngrade:
			// The device got past this image some other way; installing it
			// now would be a downgrade.
			return t.Cancel(CodeSuperseded, "the device already runs a newer version", now) == nil
		case fw.Revoked():
			return t.Cancel(CodeFirmwareRevoked, "the firmware was revoked", now) == nil
		case r.Status() == RolloutCancelled:
			return t.Cancel(CodeRolloutCancelled, "the rollout was cancelled", now) == nil
		case r.Status() == RolloutPaused && r.PausedReason() == PausedAuto:
			// The threshold or a gate found the image bad: a device that
			// has not begun must not begin. A manual pause is an
			// operator's hold, and keeps the device's place.
			return t.Cancel(CodeRolloutPaused, "the rollout paused itself (failure threshold or stage gate)", now) == nil
		}
	}
	// Last: a pending task the service withdraws is cancelled, which is
	// not an attempt; only a task nobody withdrew can be stuck.
	if r.taskTimeout > 0 && r.inactivity(t.updatedAt, now, facts) > r.taskTimeout {
		t.status = TaskFailed
		t.errorCode = CodeTimedOut
		t.errorMessage = "no event for longer than the rollout's task timeout (" + r.taskTimeout.String() + ")"
		t.updatedAt = stamp(now)
		return true
	}
	return false
}

// ApplyEvent applies a device's progress event (event rules 1–3). prior is
// the event already recorded under the same event id, if any: a faithful
// repeat changes nothing, a different body is an idempotency conflict. It
// reports whether the task changed, in which case the event must be stored
// with it.
func (t *Task) ApplyEvent(ev Event, prior *Event, now time.Time) (bool, error) {
	if ev.status == (TaskStatus{}) {
		return false, invalid("status", "is required")
	}
	if prior != nil {
		if !prior.SameBody(ev) {
			return false, ErrIdempotencyConflict
		}
		return false, nil
	}
	switch {
	case t.status == TaskCancelled:
		return false, transition(ErrTaskFinished, "task was cancelled (%s)", t.errorCode)
	case t.status.IsFinal():
		if ev.status == t.status {
			return false, nil // the same final word again: nothing to do
		}
		return false, transition(ErrTaskFinished, "task already %s", t.status)
	}
	to := ev.status
	progress := ev.progressOr(t.status, t.progress)
	switch {
	case to == TaskFailed:
		t.errorCode, t.errorMessage = ev.errorCode, ev.errorMessage
	case to.rank < t.status.rank:
		return false, transition(ErrInvalidTransition, "cannot go back from %s to %s", t.status, to)
	case to == t.status && progress < t.progress:
		return false, transition(ErrInvalidTransition, "progress cannot go down within %s (%d to %d)", to, t.progress, progress)
	}
	if to == TaskSucceeded {
		progress = 100
		if ev.errorCode == CodeAlreadyInstalled {
			t.errorCode = CodeAlreadyInstalled
		}
	}
	t.status = to
	t.progress = progress
	t.updatedAt = stamp(now)
	return true, nil
}
