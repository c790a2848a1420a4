package ports

import (
	"time"

	"github.com/ai-device/ota/domain"
)

// TaskTx is what one transaction over tasks may do (a store's InTaskTx,
// application.TaskTransactor): primitives only, each a read or a write of
// the store, none a judgement. Which of them to call, in what order (the
// lock order), and what to make of what they return is the application's
// (application.ReplaceActive, application.ApplyEvent). Ids arrive typed: a zero one names no row.
// Reads that lock hold their lock until the transaction ends.
type TaskTx interface {
	// ActiveTask reads the device's active task, locked against concurrent
	// changes, with its firmware and rollout as stored; nil if none.
	ActiveTask(deviceID domain.DeviceID) (*domain.ActiveTask, error)
	// LatestFinal reads the device's most recent task, locked, with its
	// firmware and rollout, when that task is final; nil when the device
	// has no task or its most recent one is active.
	LatestFinal(deviceID domain.DeviceID) (*domain.ActiveTask, error)
	// FailedCounts counts the device's failed tasks by firmware id (never nil).
	FailedCounts(deviceID domain.DeviceID) (map[string]int, error)
	// LockTask reads a task locked; domain.ErrNotFound if there is none.
	LockTask(id domain.UUID) (domain.Task, error)
	// Event returns the event recorded for t under eventID, nil if none.
	Event(t domain.Task, eventID string) (*domain.Event, error)
	// LockRollout reads a rollout locked for update (to judge and store it).
	LockRollout(id domain.UUID) (domain.Rollout, error)
	// Offer reads a firmware and a rollout together, unlocked;
	// domain.ErrNotFound when either does not exist.
	Offer(firmwareID, rolloutID domain.UUID) (domain.Offer, error)
	// OfferForShare is Offer with both rows locked against a change (a
	// revoke, a rollout's pause) until the transaction ends; a change in
	// progress is waited for.
	OfferForShare(firmwareID, rolloutID domain.UUID) (domain.Offer, error)
	// UpdateTask stores t's status, progress, attempt, error and their
	// time (identity, references, action id and creation are fixed) and
	// returns the task as stored.
	UpdateTask(t domain.Task) (domain.Task, error)
	// StoreEvent records ev as applied to t (as stored, at its update
	// time); an event id already recorded for t is an error.
	StoreEvent(t domain.Task, ev domain.Event) error
	// InsertUnlessActive inserts t unless its device has an active task
	// whatever the caller's locks do; then that task, the winner, is
	// returned with created false. An unknown device, firmware or rollout,
	// or a rollout of another firmware, is domain.ErrNotFound.
	InsertUnlessActive(t domain.Task) (stored domain.Task, created bool, err error)
	// SetDeviceVersion stores v as the version the device runs, moving
	// its last_seen_at forward to at (never back).
	SetDeviceVersion(deviceID domain.DeviceID, v domain.Version, at time.Time) error
	// StoreRollout stores a rollout read by LockRollout in this
	// transaction (everything but its id, firmware and start time) and
	// returns it as stored.
	StoreRollout(r domain.Rollout) (domain.Rollout, error)
	// RolloutStats is TaskRepository.RolloutStatsSince as this
	// transaction sees the rollout's tasks (its own writes included).
	RolloutStats(rolloutID domain.UUID, since time.Time) (domain.TaskStats, error)
}
