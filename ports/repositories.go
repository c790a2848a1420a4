package ports

import (
	"cmp"
	"context"
	"strings"
	"time"

	"github.com/ai-device/ota/domain"
)

// Clock tells the time; tests substitute a fixed one.
type Clock interface {
	Now() time.Time
}

// IDGenerator makes new row ids (firmware, rollout, task, auth request),
// typed so that what it makes is never checked again. It never returns the
// zero UUID.
type IDGenerator interface {
	NewID() domain.UUID
}

// DeviceRepository stores registered devices. Not-found is domain.ErrNotFound,
// also for the zero DeviceID (an edge hands it on for an id that names no
// device). Ids arrive parsed: a store does not check them again.
type DeviceRepository interface {
	// Create stores a new device, with the operator's record of it (the
	// zero record: none) in the same transaction; domain.ErrDeviceExists if
	// the id is taken.
	Create(ctx context.Context, d domain.Device, rec domain.AuditRecord) error
	// Get loads a device by id.
	Get(ctx context.Context, id domain.DeviceID) (domain.Device, error)
	// Update loads the device locked against concurrent changes, lets fn
	// change it, and stores it with rec (the zero record: none) if fn
	// returns nil.
	Update(ctx context.Context, id domain.DeviceID, fn func(*domain.Device) error, rec domain.AuditRecord) (domain.Device, error)
	// RecordSeen stores the version a device reported and when. stored is
	// the device as the caller read it: a store may skip a check that
	// changes nothing but moves last_seen_at by less than its resolution
	// (domain.Device.SeenNeedsWrite), and a check whose version repeats
	// the one stored read stores last_seen_at only
	// (domain.Device.SeenChangesVersion): a stale read never moves the
	// version back. It may be written behind in batches; what it writes
	// must be visible within a second.
	RecordSeen(ctx context.Context, stored domain.Device, v domain.Version, at time.Time) error
}

// Audit makes an operator's record of a change of a T from the T before
// and after it: a store calls it once the change is made, and stores what
// it returns in the change's transaction.
type Audit[T any] func(before, after T) (domain.AuditRecord, error)

// FirmwareRepository stores published firmware. Not-found is domain.ErrNotFound.
type FirmwareRepository interface {
	// Create stores a new firmware, and the operator's record of it in the
	// same transaction (the zero record: none); domain.ErrFirmwareExists
	// if its (model, version) — build metadata ignored — was published before.
	Create(ctx context.Context, f domain.Firmware, rec domain.AuditRecord) error
	// Get loads a firmware by id.
	Get(ctx context.Context, id domain.UUID) (domain.Firmware, error)
	// List returns a model's firmware (all models when model is ""), newest first.
	List(ctx context.Context, model string) ([]domain.Firmware, error)
	// Update loads the firmware locked, lets fn change it, and stores it
	// with the record audit makes of the change (nil: none), in one
	// transaction.
	Update(ctx context.Context, id domain.UUID, fn func(*domain.Firmware) error, audit Audit[domain.Firmware]) (domain.Firmware, error)
}

// RolloutRepository stores rollouts. Not-found is domain.ErrNotFound.
type RolloutRepository interface {
	// Create stores a new rollout, and the operator's record of it in the
	// same transaction (the zero record: none). A rollout whose
	// Idempotency-Key a stored one has is domain.ErrRequestKeyTaken.
	Create(ctx context.Context, r domain.Rollout, rec domain.AuditRecord) error
	// Get loads a rollout by id.
	Get(ctx context.Context, id domain.UUID) (domain.Rollout, error)
	// ByRequestKey loads the rollout started with an Idempotency-Key
	// (domain.ErrNotFound: none), from the primary: a retry must see the
	// start it repeats.
	ByRequestKey(ctx context.Context, key string) (domain.Rollout, error)
	// Offers returns every active rollout of released firmware of a model,
	// with its firmware: the candidates of check rule 4.
	Offers(ctx context.Context, model string) ([]domain.Offer, error)
}

// DefaultListLimit is the page size of the task, device and audit
// listings, and DefaultRolloutLimit the rollout listing's, in every store,
// when the filter sets no limit.
const (
	DefaultListLimit    = 50
	DefaultRolloutLimit = 100
)

// TaskFilter selects tasks for the admin listing. Zero fields match all.
type TaskFilter struct {
	DeviceID  domain.DeviceID
	RolloutID domain.UUID
	Status    *domain.TaskStatus
	Limit     int
	// After continues a listing after this (created_at, id) position.
	After *TaskCursor
}

// TaskCursor is a position in the (created_at, id) order of tasks.
type TaskCursor struct {
	CreatedAt time.Time
	ID        domain.UUID
}

// Admits reports whether the filter selects t, the cursor included and
// the limit aside: the meaning of each field, for a store that filters in
// Go rather than in SQL.
func (f TaskFilter) Admits(t domain.Task) bool {
	return (f.DeviceID.IsZero() || t.DeviceID() == f.DeviceID) && (f.RolloutID.IsZero() || t.RolloutID() == f.RolloutID) &&
		(f.Status == nil || t.Status() == *f.Status) && (f.After == nil || f.After.Precedes(t))
}

// Precedes reports whether t comes after the cursor, oldest first (ids
// compared as their canonical strings, as Postgres orders uuid values).
func (c TaskCursor) Precedes(t domain.Task) bool {
	return cmp.Or(t.CreatedAt().Compare(c.CreatedAt), strings.Compare(t.ID().String(), c.ID.String())) > 0
}

// DeviceTasks is what a check needs to know of a device's tasks: its
// active task (nil if none) and its failed tasks counted by firmware id
// (never nil).
type DeviceTasks struct {
	Active *domain.Task
	Failed map[string]int
	// Facts are the device's tags and stored attributes, read in the same
	// statement: what the rollouts' selectors judge (targeting rule T1).
	Facts domain.DeviceFacts
}

// CheckView is a device with its task state, read together in one round
// trip: the whole of what a poll reads from the store.
type CheckView struct {
	Device domain.Device
	Tasks  DeviceTasks
	// AsOf, when not zero, is an instant before the read by which every
	// commit it shows had been made and after which it may miss some (a
	// streaming replica's read: the newest primary position it had
	// replayed was sampled then). Zero: the read itself.
	AsOf time.Time
}

// SawStoreAt is when a read of v begun at begun saw the store: begun, or
// AsOf when the read came from a copy that lags (an earlier time).
func (v CheckView) SawStoreAt(begun time.Time) time.Time {
	if !v.AsOf.IsZero() && v.AsOf.Before(begun) {
		return v.AsOf
	}
	return begun
}

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
	// LatestFinal reads the device's most recent task with an outcome
	// (succeeded or failed), locked, with its firmware and rollout: a
	// cancelled task (superseded, revoked, rollout cancelled or paused,
	// not deliverable) says nothing about the device (check rule 4) and is
	// passed over. Nil when the device has none, or has an active task
	// (one inserted since the transaction's ActiveTask).
	LatestFinal(deviceID domain.DeviceID) (*domain.ActiveTask, error)
	// FailedCounts counts the device's failed tasks by firmware id (never nil).
	FailedCounts(deviceID domain.DeviceID) (map[string]int, error)
	// DeviceVersion reads the version the device runs as committed (not
	// locked): a success stored since a check's lock-free read set it
	// (event rule 6); domain.ErrNotFound for an unknown device.
	DeviceVersion(deviceID domain.DeviceID) (domain.Version, error)
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
	// UpdateTask stores t, a task read in this transaction and changed
	// through its methods (which change status, progress, attempt, error
	// and their time, never identity, references, action id or
	// creation), and returns the task as stored.
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
	// transaction and changed through its methods (never its id, firmware
	// or start time), and returns it as stored.
	StoreRollout(r domain.Rollout) (domain.Rollout, error)
	// RolloutStats reads the rollout's counters (zero since: the whole
	// rollout's, else the stage's started at since) as committed: the
	// changes this transaction will add (AddCounts) are not in them.
	RolloutStats(rolloutID domain.UUID, since time.Time) (domain.TaskStats, error)
	// CountedTasks reads the device's task that counts for it in the
	// rollout and, unless stage is zero, the one that counts in the
	// rollout's stage started at stage (domain.CountsOver among its tasks
	// there): both at once, as every change of a staged rollout's task
	// needs both. Nil where none (inStage always, for the zero stage).
	CountedTasks(rolloutID domain.UUID, deviceID domain.DeviceID, stage time.Time) (inRollout, inStage *domain.Task, err error)
	// AddCounts adds the changes, all caused by one device's tasks, to the
	// rollouts' counters, creating the missing ones at zero.
	AddCounts(deviceID domain.DeviceID, changes []domain.CountChange) error
	// RecordAudit writes an operator's record of the change this
	// transaction makes (the zero record: none), and the events it
	// announces.
	RecordAudit(rec domain.AuditRecord) error
	// Announce writes an event of the change this transaction makes to
	// the outbox.
	Announce(a domain.Announcement) error
}

// GuardedTaskWrite is a device event's whole write, for a store that
// stores it in one statement over the task as read
// (application.UnchangedUpdater): the task's change from Before to
// After, the event applied, what the change adds to the counters and,
// when After ends the task, its announcement and, for a success, the
// version its device now runs.
type GuardedTaskWrite struct {
	Before, After domain.Task
	Event         domain.Event
	Counts        []domain.CountChange
	Installed     *domain.Version      // the firmware's version when After installs it (domain.Task.Installs); nil otherwise
	Announce      *domain.Announcement // After's end (domain.TaskAnnouncement); nil when it does not end
}

// GuardedInsert is what a creation's plan read of the store, which a
// store that inserts its task in one statement
// (application.UnchangedInserter) compares: the offer as judged, the
// device's failed tasks of its firmware, and the device's versions under
// which the plan stands (domain.CheckInput.StandingVersions; the zero
// Version: none stored).
type GuardedInsert struct {
	Offer    domain.Offer
	Failed   int
	Versions []domain.Version
}

// RolloutCount is a rollout's count of devices by status, in one scope:
// the whole rollout (zero Stage) or its stage started at Stage.
type RolloutCount struct {
	Rollout domain.UUID
	Stage   time.Time
	Stats   domain.TaskStats
}

// CounterAudit reads a rollout's counters (or every rollout's, for the
// zero id) next to a recount of its tasks, which the counters must equal
// (application.VerifyCounters compares them).
type CounterAudit interface {
	// StoredCounts reads the counters.
	StoredCounts(ctx context.Context, rolloutID domain.UUID) ([]RolloutCount, error)
	// Recount counts the tasks, each device once per scope
	// (domain.CountsOver), by the stage each task joined (domain.Task.Stage).
	Recount(ctx context.Context, rolloutID domain.UUID) ([]RolloutCount, error)
}

// TaskEvent is one stored event of a task, and when it was applied.
type TaskEvent struct {
	Event domain.Event
	At    time.Time
}
