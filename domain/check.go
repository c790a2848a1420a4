package domain

import (
	"sort"
	"time"
)

// Offer is a firmware together with an active rollout of it: something a
// device of that model might be given.
type Offer struct {
	Firmware Firmware
	Rollout  Rollout
}

// Open reports whether the offer still stands: its firmware is released
// and its rollout, of that firmware, is active. A task is created only for
// an open offer, judged when it is stored.
func (o Offer) Open() bool {
	return !o.Firmware.Revoked() && o.Rollout.Status() == RolloutActive && o.Rollout.FirmwareID() == o.Firmware.ID()
}

// SelectTarget picks the firmware a device should run (check rule 4): among
// released firmware of its model that is an upgrade from current (and not
// from below its min_source_version) — or, for a rollback rollout, below
// current (rollback rule R1) — offered by an active rollout that admits the
// device now (targeting rule T1, stage rule G2, schedule rules S1–S2), and
// not yet failed max_attempts times on this device, and deliverable over
// the protocol the device asks by (Firmware.CheckDeliverable: a hawkBit
// agent needs a sha1, a Mender device an artifact name), the highest
// version wins. failed counts the device's failed tasks by firmware id, across
// rollouts. When several rollouts of the winner admit the device, the
// oldest one is used so the choice is stable. When nothing is found, retry
// is the earliest time a rollout kept out only by its schedule would admit
// the device (zero: none).
func SelectTarget(in CheckInput) (target Offer, found bool, retry time.Time) {
	d, current := in.Device, in.Reported
	for _, o := range in.Offers {
		fw := o.Firmware
		if !o.Open() || fw.Model() != d.Model() || !o.offersFrom(current) {
			continue
		}
		if in.Failed[fw.ID().String()] >= o.Rollout.MaxAttempts() || fw.CheckDeliverable(in.Delivery) != nil {
			continue
		}
		ok, at := o.Rollout.AdmitsAt(d, in.Facts, current, in.Now)
		if !ok {
			if !at.IsZero() && (retry.IsZero() || at.Before(retry)) {
				retry = at
			}
			continue
		}
		if !found || better(o, target) {
			target, found = o, true
		}
	}
	if found {
		retry = time.Time{}
	}
	return target, found, retry
}

func better(a, b Offer) bool {
	if c := a.Firmware.Version().Compare(b.Firmware.Version()); c != 0 {
		return c > 0
	}
	if !a.Rollout.CreatedAt().Equal(b.Rollout.CreatedAt()) {
		return a.Rollout.CreatedAt().Before(b.Rollout.CreatedAt())
	}
	return a.Rollout.ID().String() < b.Rollout.ID().String()
}

// SortOffers orders offers by version, highest first, for stable listings.
func SortOffers(offers []Offer) {
	sort.SliceStable(offers, func(i, j int) bool { return better(offers[i], offers[j]) })
}

// ActiveTask is a device's active task with the firmware it installs and
// the rollout that created it: what check rules 3 and 5 judge it by.
type ActiveTask struct {
	Task     Task
	Firmware Firmware
	Rollout  Rollout
}

// CheckInput is everything a check is decided on: who asks, what it
// reports, its active task (nil if none), what is on offer for its model,
// and its failed tasks counted by firmware id.
type CheckInput struct {
	Device   Device
	Reported Version
	Active   *ActiveTask
	Offers   []Offer
	Failed   map[string]int
	Now      time.Time
	// Facts are the device's tags and attributes (targeting rule T1).
	Facts DeviceFacts
	// Delivery is what the protocol the device asks by can deliver (the
	// zero value, the REST API's: anything).
	Delivery Delivery
	// ReadAt is when the device was read, at or before the state the
	// check was asked on (the zero time: not known). A success after it is
	// one the read did not see.
	ReadAt time.Time
	// Last is the device's most recent task with an outcome (succeeded
	// or failed: a cancelled task says nothing about the device, check
	// rule 4) when it has no active one (nil: none, or not read — see
	// MayContradictSuccess): a success the check may contradict (event
	// rule 7).
	Last *ActiveTask
}

// MayContradictSuccess reports whether the check might contradict the
// device's last success (event rule 7): it has no active task and reports
// a version that contradicts the one its read found — which a success
// sets (Contradicts): below it, or above it when that success may be a
// rollback's (the last task's rollout allows downgrades; with the last
// task not read, a rollback rollout on offer installs the version read).
// Only then is the last task worth reading (CheckInput.Last); the
// lock-free read does not carry it, so such a check is planned again in
// the transaction that reads it (CheckPlan.Recheck).
func (in CheckInput) MayContradictSuccess() bool {
	current := in.Device.CurrentVersion()
	if in.Active != nil && in.Active.Task.status.IsActive() || in.Reported.IsZero() || current.IsZero() {
		return false
	}
	if in.Last != nil {
		return Contradicts(current, in.Reported, in.Last.Rollout.allowDowngrade)
	}
	return Contradicts(current, in.Reported, false) || Contradicts(current, in.Reported, in.rollbackOffers(current))
}

// rollbackOffers reports whether a rollback rollout on offer (rule R1)
// installs version v on the device's model: only then may the device's
// last success, which left it at v, be a rollback's. A report above every
// stored version would otherwise cost a transaction to find out.
func (in CheckInput) rollbackOffers(v Version) bool {
	for _, o := range in.Offers {
		if o.Rollout.allowDowngrade && o.Firmware.Model() == in.Device.Model() && o.Firmware.Version().Equal(v) {
			return true
		}
	}
	return false
}

// Contradicts reports whether a device that a success installed version
// installed on and that now reports reported says the install did not
// stay (event rule 7): it reports a lower version — or, when the success
// was a rollback rollout's (rollback rule R1, a downgrade: its device
// falls back to the higher version it left), a higher one too. A report
// above a plain rollout's install is the device moving on (another
// image, flashed some other way), not a revert. The zero version (no
// report) is the lowest. The check's lock-free judgement
// (MayContradictSuccess), the revert itself (Task.Revert) and the version
// a check is decided with (WithCommitted) all judge by it.
func Contradicts(installed, reported Version, rollback bool) bool {
	c := reported.Compare(installed)
	return c < 0 || c > 0 && rollback
}

// WithCommitted is in as the transaction of a check that finds no active
// task decides it, given the device's version as committed there. A
// version moved since in.Device was read is the device's word after the
// check's report: a task the read never saw, or the one it saw, ended in a
// success (event rule 6). A report that would contradict that success
// (Contradicts: below it; above it too when it moved down, which only a
// rollback rollout's success does) was sent before the device knew better
// and contradicts nothing (event rule 7): the check is decided with the
// committed version, so it neither reverts that success nor offers its
// image again as a first attempt. Any other report stands, as does an
// unmoved version.
func (in CheckInput) WithCommitted(v Version) CheckInput {
	read := in.Device.currentVersion
	if v.String() != read.String() && Contradicts(v, in.Reported, v.Less(read)) {
		in.Device.currentVersion, in.Reported = v, v
	}
	return in
}

// StandingVersions are committed versions of the device under which in
// stands as it is (WithCommitted changes nothing): the version read, and
// the version reported. A guard that compares versions as text, not as
// semantic versions, checks the committed one against these; any other
// version may or may not move the plan, and such a guard leaves it to the
// transaction to decide.
func (in CheckInput) StandingVersions() []Version {
	return []Version{in.Device.currentVersion, in.Reported}
}

// CheckAction is what a check answers with.
type CheckAction int

// The answers of check rules 5 and 6.
const (
	// CheckNoUpdate: no target and no active task (rule 6).
	CheckNoUpdate CheckAction = iota
	// CheckKeep: hand back the active task unchanged: it has started, or
	// there is no target (or only a lower one) to replace it with.
	CheckKeep
	// CheckReuse: the active task is already for the target.
	CheckReuse
	// CheckCreate: create a task for the target, after ending (Ended) the
	// active task if the plan ends it.
	CheckCreate
)

// String names the action for logs and tests.
func (a CheckAction) String() string {
	switch a {
	case CheckKeep:
		return "keep"
	case CheckReuse:
		return "reuse"
	case CheckCreate:
		return "create"
	}
	return "no_update"
}

// CheckPlan is the decision of one check (PlanCheck).
type CheckPlan struct {
	Action CheckAction
	// Task is the active task handed back (CheckKeep, CheckReuse).
	Task *Task
	// Ended is the active task as this check ends it, to be stored: it
	// succeeded (rule 3), or, still pending, was cancelled because its
	// firmware was revoked, its rollout cancelled, the device is past its
	// version, the device's protocol cannot deliver it, or a higher target
	// supersedes it (rule 5). Nil if the
	// active task (if any) stays as it is.
	Ended *Task
	// Offer and Attempt describe the task to create (CheckCreate).
	Offer   Offer
	Attempt int
	// RetryAt, when not zero, is when a rollout now kept out by its
	// schedule would admit the device (schedule rule S3): the poll hint
	// brings the device back then.
	RetryAt time.Time
	// Recheck: the check may contradict the device's last success, which
	// was not read (CheckInput.MayContradictSuccess): only the
	// transaction that reads it can tell.
	Recheck bool
}

// Writes reports whether carrying the plan out changes stored tasks (or
// may: Recheck): only such plans need a transaction.
func (p CheckPlan) Writes() bool { return p.Ended != nil || p.Action == CheckCreate || p.Recheck }

// Superseded reports whether the plan cancels a pending task to make room
// for the one it creates.
func (p CheckPlan) Superseded() bool {
	return p.Action == CheckCreate && p.Ended != nil && p.Ended.errorCode == CodeSuperseded
}

// PollAfter is the poll hint of a check answered with this plan (schedule
// rule S3): the usual interval, or less when the device would otherwise
// miss the moment a rollout's window opens or it starts (at least a
// second, so that a device never polls in a loop).
func (p CheckPlan) PollAfter(now time.Time, usual time.Duration) time.Duration {
	if p.RetryAt.IsZero() || p.Action == CheckKeep || p.Action == CheckReuse || p.Action == CheckCreate {
		return usual
	}
	return min(max(p.RetryAt.Sub(now), time.Second), usual)
}

// PlanCheck decides a check (check rules 3–6), without side effects: it
// settles the active task (succeeded when the device reports its version;
// a pending one cancelled when its firmware was revoked, its rollout
// cancelled, or the device already runs something newer), chooses the
// target among the offers, then reuses, keeps or replaces the active task.
// A pending task is superseded only by a higher version: a stale view of
// the offers must never replace it with a lower one, and no downgrade is
// offered but by a rollback rollout (rollback rule R1). An active task
// without an event for longer than its rollout's task timeout is failed
// as TIMED_OUT first (stuck-task rule K1), counting as a failed attempt.
//
// The application runs it on a lock-free read, and again on what the
// writing transaction sees whenever the first plan writes.
func PlanCheck(in CheckInput) CheckPlan {
	var plan CheckPlan
	var active *Task
	if in.Active != nil && in.Active.Task.status.IsActive() {
		t := in.Active.Task
		if t.Settle(in.Reported, in.Active.Firmware, in.Active.Rollout, in.Facts, in.Now) {
			plan.Ended = &t
		}
		if t.status == TaskPending && in.Active.Firmware.CheckDeliverable(in.Delivery) != nil {
			// Handed out, it would only be refused by the device's
			// protocol, keeping the device from firmware it can take until
			// the task timed out as a failure against its rollout. Not an
			// attempt: nothing was tried.
			if t.Cancel(CodeNotDeliverable, "the firmware cannot be delivered over the device's protocol", in.Now) == nil {
				plan.Ended = &t
			}
		}
		if t.status.IsActive() {
			active = &t
		}
		if t.status == TaskFailed {
			// Timed out just now: it counts as an attempt like any failure.
			in.Failed = withFailure(in.Failed, t.firmwareID)
		}
	}
	switch {
	case in.Last != nil && in.MayContradictSuccess() && in.Last.Task.succeededAfter(in.ReadAt) &&
		in.Last.Firmware.Version().Equal(in.Device.CurrentVersion()):
		// A success the read did not see, though the version it left is
		// the one read (it moved and came back: a revert, then this
		// success): the device's word after the check's report, which
		// contradicts nothing (event rule 7). Decided as the success left
		// the device.
		in.Reported = in.Device.CurrentVersion()
	case in.Last != nil && in.MayContradictSuccess():
		if t := in.Last.Task; t.Revert(in.Device.CurrentVersion(), in.Reported, in.Last.Firmware, in.Last.Rollout, in.Now) {
			// A contradicted success is a failed attempt, like a time-out.
			plan.Ended = &t
			in.Failed = withFailure(in.Failed, t.firmwareID)
		}
	case in.Last == nil && in.MayContradictSuccess():
		plan.Recheck = true
	}
	target, ok, retry := SelectTarget(in)
	plan.RetryAt = retry
	switch {
	case !ok && active == nil:
		plan.Action = CheckNoUpdate
	case !ok:
		plan.Action, plan.Task = CheckKeep, active
	case active == nil:
		plan.Action, plan.Offer, plan.Attempt = CheckCreate, target, NextAttempt(in.Failed[target.Firmware.ID().String()])
	case active.firmwareID == target.Firmware.ID():
		plan.Action, plan.Task = CheckReuse, active
	case active.status == TaskPending && target.Firmware.Version().Compare(in.Active.Firmware.Version()) > 0:
		ended := *active
		if ended.Cancel(CodeSuperseded, "superseded by firmware "+target.Firmware.Version().String(), in.Now) != nil {
			plan.Action, plan.Task = CheckKeep, active // not reached: a pending task can be cancelled
			break
		}
		plan.Ended = &ended
		plan.Action, plan.Offer, plan.Attempt = CheckCreate, target, NextAttempt(in.Failed[target.Firmware.ID().String()])
	default:
		plan.Action, plan.Task = CheckKeep, active
	}
	return plan
}

// withFailure is failed (a device's failed tasks by firmware id) with one
// more failure of fw: a task this check ends as failed counts at once. The
// caller's map is not changed.
func withFailure(failed map[string]int, fw UUID) map[string]int {
	out := make(map[string]int, len(failed)+1)
	for k, v := range failed {
		out[k] = v
	}
	out[fw.String()]++
	return out
}

// NextAttempt is the attempt number of a new task for a firmware the device
// has failed `failed` times (event rule 4).
func NextAttempt(failed int) int { return failed + 1 }
