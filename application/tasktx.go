package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// TaskTransactor runs a function in one transaction over tasks: the
// stores give primitives (ports.TaskTx), and the orchestration of a check's
// and an event's write — what to lock, in which order, what to re-check
// at commit — is written once, here, for every store. fn reaches the store
// only through tx: a store may hold its whole lock while fn runs (memory).
type TaskTransactor interface {
	InTaskTx(ctx context.Context, fn func(tx ports.TaskTx) error) error
}

// TaskState is what the transaction replacing a device's active task sees:
// the active task (locked; nil if none) with its firmware and rollout, and
// the device's failed tasks counted by firmware id (never nil).
type TaskState struct {
	Active *domain.ActiveTask
	Failed map[string]int
	// Latest reads, in the same transaction, the device's most recent
	// task with an outcome (succeeded or failed; cancelled ones say
	// nothing about the device) when it has no active one (nil
	// otherwise), locked, with its firmware and rollout: a success a check
	// may contradict (event rule 7). It costs a statement, so it is
	// called only when needed (domain.CheckInput.MayContradictSuccess). fn
	// may end it as it may end the active task (set its Task): the change
	// is stored, and judged, as that one's would be.
	Latest func() (*domain.ActiveTask, error)
	// Version reads, in the same transaction, the version the device runs
	// as committed, when it has no active task (nil otherwise): a task
	// created and ended since the check's lock-free read may have changed
	// it (event rule 6), and the check is decided on the device as the
	// transaction sees it, as it is on its tasks.
	Version func() (domain.Version, error)
}

// RolloutEvaluation judges a rollout when one of its tasks ended (event
// rule 5, stage rules G2–G3), counting its tasks created at or after since
// (zero: all of them) as the judging transaction sees them; it reports
// whether it changed the rollout. It may be called on a copy read without
// a lock (JudgeRollout), so it changes only the rollout it is given.
type RolloutEvaluation func(r *domain.Rollout, stats func(since time.Time) (domain.TaskStats, error)) (bool, error)

// errForeignDevice refuses a task inserted through another device's
// ReplaceActive: it would dodge that device's one-active-task check.
var errForeignDevice = errors.New("the new task belongs to another device")

// ReplaceActive runs fn with what one transaction sees of the device's
// tasks (TaskState: the active task locked against concurrent changes).
// fn may change the active task (end it), or the latest one it read, and
// returns the task to insert as the new active one, or nil.
//
// The lock order, the one every task transaction follows so that no two
// wait for each other: the device's task (ActiveTask, LatestFinal,
// LockTask), then rollouts — the one judged FOR UPDATE and the new
// task's offer FOR SHARE, two in id order — and only then any write
// (UpdateTask, then the device's row by SetDeviceVersion, the judged
// rollout, the insert). Every rollout lock comes before the task changes:
// a creation for the same device holds its rollout FOR SHARE from before
// its insert, and that insert waits for any uncommitted change of the
// device's active task, so a task changed first would wait for the
// creation while the creation waits for it. Last come the rollouts'
// counters (AddCounts, one statement for the whole transaction, its rows
// in key order): every change of a task's status and every insert
// changes them (domain.Recount, on the device's counted task read before
// the change), so two transactions meet on a counter row only after all
// their other locks, and never wait for each other in a cycle. The store
// spreads a count over shard rows so that devices seldom queue on one;
// a device's final event judges its rollout after its commit
// (ApplyEvent), so a rollout's final events do not queue on its row.
// A creation with no task to end, for a device with no task in the
// rollout yet, may instead be one statement (UnchangedInserter.InsertIfUnchanged,
// tried by Checks.createUnchanged): it reads the offer FOR SHARE, inserts,
// and adds the new task to the counters, in this order.
//
// When fn ends a task (a final status: a time-out, an implicit success, a
// cancel, a reverted install) and onRollout is not nil, that task's
// rollout is judged by onRollout, locked, counting the tasks as they are
// with the change (its counters as committed plus this transaction's
// changes), before the insert. Only a rollout with something to
// judge (domain.Rollout.Judges: fixed at its start, so the read with the
// task may tell) is locked: the lock would otherwise serialise every
// supersede of a plain rollout's tasks. A success stores the device's
// version with it (event rule 6).
//
// The insert happens only if its firmware is still released and its
// rollout still active as read FOR SHARE — after the judgement, which may
// have paused it — else nothing is stored and the error is
// domain.ErrOfferWithdrawn. The inserted task joins its stage on the
// rollout as read there (domain.Task.JoinStage). When the insert loses to a concurrent one,
// the winner is returned with created false. Otherwise the result is the
// inserted task (created true) or, when fn inserts nothing, the active
// task as fn left it (zero Task if none).
func ReplaceActive(ctx context.Context, tasks TaskTransactor, device domain.DeviceID, fn func(st TaskState) (*domain.Task, error), onRollout RolloutEvaluation) (result domain.Task, created bool, err error) {
	if device.IsZero() {
		return domain.Task{}, false, fmt.Errorf("replacing the active task: the device does not exist: %w", domain.ErrNotFound)
	}
	err = tasks.InTaskTx(ctx, func(tx ports.TaskTx) error {
		result, created = domain.Task{}, false
		c := &counts{tx: tx}
		active, err := tx.ActiveTask(device)
		if err != nil {
			return err
		}
		st := TaskState{Active: active}
		if st.Failed, err = tx.FailedCounts(device); err != nil {
			return err
		}
		// The task fn may end (subject, as read: before): the active one,
		// or, when there is none, the latest if fn reads it.
		subject, before := active, domain.Task{}
		if active != nil {
			before = active.Task
		} else {
			st.Version = func() (domain.Version, error) { return tx.DeviceVersion(device) }
			st.Latest = func() (*domain.ActiveTask, error) {
				if subject != nil {
					return subject, nil
				}
				last, err := tx.LatestFinal(device)
				if err != nil || last == nil {
					return nil, err
				}
				subject, before = last, last.Task
				return subject, nil
			}
		}
		ins, err := fn(st)
		if err != nil {
			return err
		}
		if ins != nil && ins.DeviceID() != device {
			return fmt.Errorf("inserting task %s for device %s: %w", ins.ID(), device, errForeignDevice)
		}
		changed := subject != nil && subject.Task.Record() != before.Record()
		var judge domain.UUID // the ended task's rollout, when it is judged
		if changed && onRollout != nil && !subject.Task.Status().IsActive() && subject.Rollout.Judges() {
			judge = before.RolloutID()
		}
		var (
			o      domain.Offer
			judged domain.Rollout
		)
		share := func() error {
			if o, err = tx.OfferForShare(ins.FirmwareID(), ins.RolloutID()); err != nil {
				return fmt.Errorf("inserting task %s: %w", ins.ID(), err)
			}
			return nil
		}
		shareFirst := ins != nil && !judge.IsZero() && ins.RolloutID().String() < judge.String()
		if shareFirst {
			if err := share(); err != nil {
				return err
			}
		}
		if !judge.IsZero() {
			if judged, err = tx.LockRollout(judge); err != nil {
				return err
			}
		}
		if ins != nil && !shareFirst {
			if err := share(); err != nil {
				return err
			}
		}
		if changed {
			stored, err := c.update(before, subject.Task)
			if err != nil {
				return err
			}
			if stored.Installs(before) {
				if err := tx.SetDeviceVersion(device, subject.Firmware.Version(), stored.UpdatedAt()); err != nil {
					return err
				}
			}
			subject.Task = stored
		}
		if active != nil {
			result = active.Task
		}
		if !judge.IsZero() {
			r, _, err := judgeLocked(tx, c, judged, afterEnd(subject.Task, onRollout))
			if err != nil {
				return err
			}
			if ins != nil && ins.RolloutID() == judge {
				o.Rollout = r // read before the judgement: a pause withdraws the insert
			}
		}
		if ins == nil {
			return c.flush(device)
		}
		if o.Rollout.FirmwareID() != o.Firmware.ID() {
			return fmt.Errorf("inserting task %s: rollout %s is not of firmware %s: %w", ins.ID(), o.Rollout.ID(), o.Firmware.ID(), domain.ErrNotFound)
		}
		if !o.Open() {
			return fmt.Errorf("inserting task %s: %w", ins.ID(), domain.ErrOfferWithdrawn)
		}
		ins.JoinStage(o.Rollout)
		count, err := c.track(*ins)
		if err != nil {
			return err
		}
		if result, created, err = tx.InsertUnlessActive(*ins); err != nil {
			return err
		}
		if created {
			count(result)
		}
		return c.flush(device)
	})
	if err != nil {
		return domain.Task{}, false, err
	}
	return result, created, nil
}

// ApplyEvent loads the task locked, with the event already recorded under
// ev's id (nil if none), and calls fn. When fn reports a change, the task
// and the event are stored together, with the change's counters, and a
// success (domain.Task.Installs) stores the device's version with them
// (event rule 6). When fn reports no change nothing is stored and the
// task is returned as stored, whatever fn did to its copy.
//
// When onRollout is not nil and the task, as stored, is final, its
// rollout is judged after the commit (JudgeRollout), whether or not the
// caller is still connected, and also for a replay: a device that resends
// its final report after a failed judgement gets the judgement made. When
// only that judgement fails, the error (domain.ErrServiceBusy) comes with
// the task as stored. The event's transaction takes no rollout lock, so a
// rollout's final events do not queue behind each other (event rule 5,
// "Judged after the commit"). A success whose rollout has nothing to
// judge (no failure threshold, no stages) is not judged: it reads the
// rollout in its transaction anyway, for the firmware's version.
func ApplyEvent(ctx context.Context, tasks TaskTransactor, taskID domain.UUID, ev domain.Event, fn func(t *domain.Task, prior *domain.Event) (bool, error), onRollout RolloutEvaluation) (domain.Task, error) {
	if taskID.IsZero() {
		return domain.Task{}, fmt.Errorf("loading task: %w", domain.ErrNotFound)
	}
	var (
		out    domain.Task
		judges bool // whether the rollout is to be judged once the event is stored
	)
	err := tasks.InTaskTx(ctx, func(tx ports.TaskTx) error {
		judges = onRollout != nil
		t, err := tx.LockTask(taskID)
		if err != nil {
			return err
		}
		prior, err := tx.Event(t, ev.ID())
		if err != nil {
			return err
		}
		loaded := t
		changed, err := fn(&t, prior)
		if err != nil {
			return err
		}
		if !changed {
			out = loaded
			return nil
		}
		c := &counts{tx: tx}
		if out, err = c.update(loaded, t); err != nil {
			return err
		}
		if err := tx.StoreEvent(out, ev); err != nil {
			return err
		}
		if out.Installs(loaded) {
			o, err := tx.Offer(out.FirmwareID(), out.RolloutID())
			if err != nil {
				return err
			}
			if err := tx.SetDeviceVersion(out.DeviceID(), o.Firmware.Version(), out.UpdatedAt()); err != nil {
				return err
			}
			// The offer read for the version says too whether the
			// rollout has anything a task's end could change
			// (Rollout.Judges, fixed at its start): if not, its
			// judgement's transaction is spared.
			judges = judges && o.Rollout.Judges()
		}
		return c.flush(out.DeviceID())
	})
	if err != nil {
		return domain.Task{}, err
	}
	if judges && !out.Status().IsActive() {
		return out, judgeEnded(ctx, tasks, out, onRollout)
	}
	return out, nil
}

// judgeEnded judges the rollout of t, a task whose end is stored
// (JudgeRollout), whether or not the caller is still connected: a device
// that hangs up now must not cut its judgement short. A failure is
// domain.ErrServiceBusy, whatever the cause: the end is stored, and its
// resend judges again.
func judgeEnded(ctx context.Context, tasks TaskTransactor, t domain.Task, eval RolloutEvaluation) error {
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), judgeTimeout)
	defer cancel()
	if _, _, err := JudgeRollout(jctx, tasks, t.FirmwareID(), t.RolloutID(), afterEnd(t, eval)); err != nil {
		return fmt.Errorf("judging rollout %s after task %s ended: %w: %w", t.RolloutID(), t.ID(), domain.ErrServiceBusy, err)
	}
	return nil
}

// afterEnd is eval judging the rollout of t, a task that just ended: a
// failure is new evidence for the threshold (domain.Rollout.FailureArrived).
func afterEnd(t domain.Task, eval RolloutEvaluation) RolloutEvaluation {
	if t.Status() != domain.TaskFailed {
		return eval
	}
	return func(r *domain.Rollout, stats func(since time.Time) (domain.TaskStats, error)) (bool, error) {
		r.FailureArrived()
		return eval(r, stats)
	}
}

// judgeTimeout bounds a final event's judgement once the event is stored,
// whether or not its caller is still connected: long enough to wait for a
// rollout's row behind an operator's change, short enough that a stuck
// database cannot hold the request for ever (the sweep judges later).
const judgeTimeout = 10 * time.Second

// JudgeRollout lets eval judge a rollout on its counters as committed, and
// stores what eval changed. It first judges a copy read without a lock;
// only when that judgement would change the rollout does it lock the row
// and judge again, on the rollout and counters as they are then, in a
// second transaction. Called after a final event's commit, the read sees
// every change committed before it, so of two final events committed
// concurrently, the later one's judgement sees both: no crossing of a
// threshold or gate is missed for good, while the judgements that change
// nothing — almost all of them — never queue on the rollout's row. It
// returns the rollout as it now is, and whether this judgement changed it.
func JudgeRollout(ctx context.Context, tasks TaskTransactor, firmwareID, rolloutID domain.UUID, eval RolloutEvaluation) (domain.Rollout, bool, error) {
	seen, would, err := judgeUnlocked(ctx, tasks, firmwareID, rolloutID, eval)
	if err != nil || !would {
		return seen, false, err
	}
	var (
		out     domain.Rollout
		changed bool
	)
	err = tasks.InTaskTx(ctx, func(tx ports.TaskTx) error {
		r, err := tx.LockRollout(rolloutID)
		if err != nil {
			return err
		}
		out, changed, err = judgeLocked(tx, &counts{tx: tx}, r, eval)
		return err
	})
	return out, changed, err
}

// JudgeReader is a store's read, in one statement, of what a judgement
// without the rollout's lock reads: the offer, and the rollout's counters
// in every scope (the whole rollout's, each stage's), all as of one
// moment. A store without it is read in a transaction: BEGIN, the offer,
// a scope's counters, another's, COMMIT.
type JudgeReader interface {
	JudgeView(ctx context.Context, firmwareID, rolloutID domain.UUID) (domain.Offer, []ports.RolloutCount, error)
}

// judgeUnlocked lets eval judge a copy of the rollout as committed, read
// without its lock, and returns the rollout as read and whether eval
// would change it.
func judgeUnlocked(ctx context.Context, tasks TaskTransactor, firmwareID, rolloutID domain.UUID, eval RolloutEvaluation) (domain.Rollout, bool, error) {
	if jr, ok := tasks.(JudgeReader); ok {
		o, counts, err := jr.JudgeView(ctx, firmwareID, rolloutID)
		if err != nil {
			return domain.Rollout{}, false, err
		}
		r := o.Rollout
		would, err := eval(&r, func(since time.Time) (domain.TaskStats, error) { return scopeOf(counts, since), nil })
		return o.Rollout, would, err
	}
	var (
		seen  domain.Rollout
		would bool
	)
	err := tasks.InTaskTx(ctx, func(tx ports.TaskTx) error {
		o, err := tx.Offer(firmwareID, rolloutID)
		if err != nil {
			return err
		}
		seen = o.Rollout
		r := seen
		would, err = eval(&r, func(since time.Time) (domain.TaskStats, error) { return tx.RolloutStats(rolloutID, since) })
		return err
	})
	return seen, would, err
}

// scopeOf is the counts of the scope started at since (the zero time: the
// whole rollout) among counts, every scope of one rollout: none when it is
// not among them. Scopes are kept at microseconds, as every stored time
// is, so since is compared at that precision, as RolloutStats reads it.
func scopeOf(counts []ports.RolloutCount, since time.Time) domain.TaskStats {
	since = since.Truncate(time.Microsecond)
	for _, c := range counts {
		if c.Stage.Equal(since) {
			return c.Stats
		}
	}
	return domain.TaskStats{}
}

// judgeLocked lets eval judge r, locked by tx.LockRollout, reading its
// counters in tx, with the changes c holds, only if eval asks, and stores
// what eval changed; it returns the rollout as it now is, and whether eval
// changed it.
func judgeLocked(tx ports.TaskTx, c *counts, r domain.Rollout, eval RolloutEvaluation) (domain.Rollout, bool, error) {
	ro := r
	changed, err := eval(&ro, func(since time.Time) (domain.TaskStats, error) {
		st, err := tx.RolloutStats(r.ID(), since)
		return c.with(st, r.ID(), since), err
	})
	if err != nil || !changed {
		return r, false, err
	}
	stored, err := storeRollout(tx, r, ro)
	return stored, err == nil, err
}

// UpdateTask loads the task locked, lets fn change it and stores it with
// its counters: a change of a task's status outside a device's event (a
// protocol's stop before install, StopBeforeInstall). A task fn leaves as
// it was is not written.
func UpdateTask(ctx context.Context, tasks TaskTransactor, id domain.UUID, fn func(*domain.Task) error) (domain.Task, error) {
	if id.IsZero() {
		return domain.Task{}, fmt.Errorf("loading task: %w", domain.ErrNotFound)
	}
	var out domain.Task
	err := tasks.InTaskTx(ctx, func(tx ports.TaskTx) error {
		t, err := tx.LockTask(id)
		if err != nil {
			return err
		}
		loaded := t
		if err := fn(&t); err != nil {
			return err
		}
		if out = loaded; t.Record() == loaded.Record() {
			return nil
		}
		c := &counts{tx: tx}
		if out, err = c.update(loaded, t); err != nil {
			return err
		}
		return c.flush(out.DeviceID())
	})
	if err != nil {
		return domain.Task{}, err
	}
	return out, nil
}

// counts gathers what one transaction's task changes add to their
// rollouts' counters (domain.Recount), to write them last, in one call:
// after every lock the transaction takes (ReplaceActive's lock order), and
// in one statement that takes the counter rows in one order, so that two
// transactions never wait for each other's counter rows. A judgement
// within the transaction reads the counters with these changes (with).
type counts struct {
	tx      ports.TaskTx
	changes []domain.CountChange
}

// track reads, before t is changed (or inserted), the device's task that
// counts in t's rollout and in t's stage, and returns the function that
// records what the change to what t became adds.
func (c *counts) track(t domain.Task) (func(changed domain.Task), error) {
	scopes := countScopes(t)
	inRollout, inStage, err := c.tx.CountedTasks(t.RolloutID(), t.DeviceID(), t.Stage())
	if err != nil {
		return nil, err
	}
	counted := []*domain.Task{inRollout, inStage}[:len(scopes)]
	return func(changed domain.Task) {
		for i, stage := range scopes {
			if d := domain.Recount(counted[i], changed); d != (domain.TaskStats{}) {
				c.changes = append(c.changes, domain.CountChange{Rollout: t.RolloutID(), Stage: stage, Delta: d})
			}
		}
	}, nil
}

// update stores t, loaded as before in this transaction and changed
// since, and records what the change adds to the counters.
func (c *counts) update(before, t domain.Task) (domain.Task, error) {
	count, err := c.track(before)
	if err != nil {
		return domain.Task{}, err
	}
	stored, err := c.tx.UpdateTask(t)
	if err != nil {
		return domain.Task{}, err
	}
	count(stored)
	// Its end, if this is its end, is announced in the same transaction.
	if a, ok, err := domain.TaskAnnouncement(before, stored); err != nil || !ok {
		return stored, err
	} else if err := c.tx.Announce(a); err != nil {
		return domain.Task{}, err
	}
	return stored, nil
}

// storeRollout stores a rollout read locked as before and changed since,
// and announces what the change was (paused, resumed, a stage, ...) in
// the same transaction: an operator's change and a judgement alike.
func storeRollout(tx ports.TaskTx, before, r domain.Rollout) (domain.Rollout, error) {
	stored, err := tx.StoreRollout(r)
	if err != nil {
		return domain.Rollout{}, err
	}
	events, err := domain.RolloutAnnouncements(before, stored, stored.UpdatedAt())
	if err != nil {
		return domain.Rollout{}, err
	}
	for _, a := range events {
		if err := tx.Announce(a); err != nil {
			return domain.Rollout{}, err
		}
	}
	return stored, nil
}

// countScopes are the scopes t counts in: its rollout (the zero stage),
// and its stage when the rollout has stages.
func countScopes(t domain.Task) []time.Time {
	if t.Stage().IsZero() {
		return []time.Time{{}}
	}
	return []time.Time{{}, t.Stage()}
}

// firstCounts is what t adds to its rollout's counters when its device
// has no task in the rollout yet (domain.Recount over none), in every
// scope: a creation's short path (Checks.createUnchanged) inserts only
// then, and adds these in the same statement.
func firstCounts(t domain.Task) []domain.CountChange { return recounted(nil, t) }

// soleCounts is what changing a task from before to after adds to its
// rollout's counters when it is its device's only task in the rollout:
// it then counts for itself in every scope, as counts.update would find
// on the locked task; a progress event's short path
// (Events.applyUnchanged) stores only then.
func soleCounts(before, after domain.Task) []domain.CountChange { return recounted(&before, after) }

// recounted is what t adds, in every scope it counts in, over counted,
// the task that counted for its device there before (nil: none).
func recounted(counted *domain.Task, t domain.Task) []domain.CountChange {
	var out []domain.CountChange
	for _, stage := range countScopes(t) {
		if d := domain.Recount(counted, t); d != (domain.TaskStats{}) {
			out = append(out, domain.CountChange{Rollout: t.RolloutID(), Stage: stage, Delta: d})
		}
	}
	return out
}

// with is st, a scope's counters as stored, with the changes c holds
// (stage starts are kept to the microsecond, as the stores keep them).
func (c *counts) with(st domain.TaskStats, rollout domain.UUID, since time.Time) domain.TaskStats {
	since = since.Truncate(time.Microsecond)
	for _, ch := range c.changes {
		if ch.Rollout == rollout && ch.Stage.Equal(since) {
			st = st.Plus(ch.Delta)
		}
	}
	return st
}

// flush writes the changes, if any.
func (c *counts) flush(device domain.DeviceID) error {
	if len(c.changes) == 0 {
		return nil
	}
	return c.tx.AddCounts(device, c.changes)
}

// UpdateRollout loads a rollout locked, with its firmware locked against a
// revoke (so a rule fn judges on it, "resumed only while released", holds
// at commit), lets fn change the rollout through its methods, and stores
// it, in one transaction: the operators' changes, in the lock order
// ReplaceActive documents (rollouts before firmware shares, both before
// any write).
func UpdateRollout(ctx context.Context, tasks TaskTransactor, id domain.UUID, fn func(*domain.Rollout, domain.Firmware) error,
	audit ports.Audit[domain.Rollout]) (domain.Rollout, error) {
	var out domain.Rollout
	err := tasks.InTaskTx(ctx, func(tx ports.TaskTx) error {
		r, err := tx.LockRollout(id)
		if err != nil {
			return err
		}
		o, err := tx.OfferForShare(r.FirmwareID(), id)
		if err != nil {
			return err
		}
		before := r
		if err := fn(&r, o.Firmware); err != nil {
			return err
		}
		if r.ResumedFrom(before) {
			s, err := tx.RolloutStats(id, time.Time{})
			if err != nil {
				return err
			}
			r.AcceptFailures(s)
		}
		if out, err = storeRollout(tx, before, r); err != nil || audit == nil {
			return err
		}
		rec, err := audit(before, out)
		if err != nil {
			return err
		}
		return tx.RecordAudit(rec)
	})
	return out, err
}
