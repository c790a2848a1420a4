package domain

import (
	"errors"
	"time"
)

// CancelNotice is the device's side of a task the service cancelled. A
// device protocol with cancel actions (hawkBit's DDI) tells the device of
// the cancel until the device confirms it, so that an agent which was
// handed the task stops working on it. Tasks cancelled before this notice
// existed count as confirmed.
type CancelNotice struct {
	task        Task
	confirmedAt time.Time
}

// RehydrateCancelNotice rebuilds a stored notice: the task and when the
// device confirmed its cancel (zero if it has not); only adapters call it.
func RehydrateCancelNotice(t Task, confirmedAt time.Time) CancelNotice {
	return CancelNotice{task: t, confirmedAt: stamp(confirmedAt)}
}

// Task is the cancelled task.
func (n CancelNotice) Task() Task { return n.task }

// ConfirmedAt is when the device confirmed the cancel (zero if it has not).
func (n CancelNotice) ConfirmedAt() time.Time { return n.confirmedAt }

// Pending reports whether the device must still be told of the cancel.
func (n CancelNotice) Pending() bool {
	return n.task.Status() == TaskCancelled && n.confirmedAt.IsZero()
}

// Confirm records the device's confirmation. Confirming twice changes
// nothing (devices resend); confirming the cancel of a task that was not
// cancelled is ErrInvalidTransition. It reports whether the notice changed.
func (n *CancelNotice) Confirm(now time.Time) (bool, error) {
	if n.task.Status() != TaskCancelled {
		return false, transition(ErrInvalidTransition, "task is %s, not cancelled: there is no cancel to confirm", n.task.Status())
	}
	if !n.confirmedAt.IsZero() {
		return false, nil
	}
	n.confirmedAt = stamp(now)
	return true, nil
}

// ErrNotDeliverable means a firmware lacks what a device protocol needs to
// deliver it (hawkBit's agents verify the sha1 digest, so a firmware
// published without sha1 cannot be offered over DDI).
var ErrNotDeliverable = errors.New("firmware cannot be delivered over this protocol")

// CheckSHA1Deliverable returns ErrNotDeliverable, with an explanation,
// when the firmware has no sha1 digest: agents that verify it (SWUpdate's
// suricatta) refuse an artifact without one.
func (f Firmware) CheckSHA1Deliverable() error {
	if f.sha1 != "" {
		return nil
	}
	return &TransitionError{Kind: ErrNotDeliverable,
		Detail: "firmware " + f.version.String() + " was published without sha1, which hawkBit agents verify: republish it with sha1 (and md5) to offer it over DDI"}
}
