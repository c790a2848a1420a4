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
// from below its min_source_version), offered by an active rollout that
// admits the device, and not yet failed max_attempts times on this device,
// the highest version wins. failed counts the device's failed tasks by
// firmware id, across rollouts. When several rollouts of the winner admit
// the device, the oldest one is used so the choice is stable.
func SelectTarget(d Device, current Version, offers []Offer, failed map[string]int) (Offer, bool) {
	var best Offer
	found := false
	for _, o := range offers {
		fw := o.Firmware
		if !o.Open() || fw.Model() != d.Model() {
			continue
		}
		if !fw.AcceptsSource(current) || !o.Rollout.Admits(d.ID()) {
			continue
		}
		if failed[fw.ID()] >= o.Rollout.MaxAttempts() {
			continue
		}
		if !found || better(o, best) {
			best, found = o, true
		}
	}
	return best, found
}

func better(a, b Offer) bool {
	if c := a.Firmware.Version().Compare(b.Firmware.Version()); c != 0 {
		return c > 0
	}
	if !a.Rollout.CreatedAt().Equal(b.Rollout.CreatedAt()) {
		return a.Rollout.CreatedAt().Before(b.Rollout.CreatedAt())
	}
	return a.Rollout.ID() < b.Rollout.ID()
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
	// version, or a higher target supersedes it (rule 5). Nil if the
	// active task (if any) stays as it is.
	Ended *Task
	// Offer and Attempt describe the task to create (CheckCreate).
	Offer   Offer
	Attempt int
}

// Writes reports whether carrying the plan out changes stored tasks: only
// such plans need the lock and a transaction.
func (p CheckPlan) Writes() bool { return p.Ended != nil || p.Action == CheckCreate }

// Superseded reports whether the plan cancels a pending task to make room
// for the one it creates.
func (p CheckPlan) Superseded() bool {
	return p.Action == CheckCreate && p.Ended != nil && p.Ended.errorCode == CodeSuperseded
}

// PlanCheck decides a check (check rules 3–6), without side effects: it
// settles the active task (succeeded when the device reports its version;
// a pending one cancelled when its firmware was revoked, its rollout
// cancelled, or the device already runs something newer), chooses the
// target among the offers, then reuses, keeps or replaces the active task.
// A pending task is superseded only by a higher version: a stale view of
// the offers must never replace it with a lower one, and no downgrade is
// ever offered (SelectTarget offers only versions above the reported one).
//
// The application runs it on a lock-free read, and again on what the
// writing transaction sees whenever the first plan writes.
func PlanCheck(in CheckInput) CheckPlan {
	var plan CheckPlan
	var active *Task
	if in.Active != nil && in.Active.Task.status.IsActive() {
		t := in.Active.Task
		if t.Settle(in.Reported, in.Active.Firmware, in.Active.Rollout, in.Now) {
			plan.Ended = &t
		}
		if t.status.IsActive() {
			active = &t
		}
	}
	target, ok := SelectTarget(in.Device, in.Reported, in.Offers, in.Failed)
	switch {
	case !ok && active == nil:
		plan.Action = CheckNoUpdate
	case !ok:
		plan.Action, plan.Task = CheckKeep, active
	case active == nil:
		plan.Action, plan.Offer, plan.Attempt = CheckCreate, target, NextAttempt(in.Failed[target.Firmware.ID()])
	case active.firmwareID == target.Firmware.ID():
		plan.Action, plan.Task = CheckReuse, active
	case active.status == TaskPending && target.Firmware.Version().Compare(in.Active.Firmware.Version()) > 0:
		ended := *active
		if ended.Cancel(CodeSuperseded, "superseded by firmware "+target.Firmware.Version().String(), in.Now) != nil {
			plan.Action, plan.Task = CheckKeep, active // not reached: a pending task can be cancelled
			break
		}
		plan.Ended = &ended
		plan.Action, plan.Offer, plan.Attempt = CheckCreate, target, NextAttempt(in.Failed[target.Firmware.ID()])
	default:
		plan.Action, plan.Task = CheckKeep, active
	}
	return plan
}

// NextAttempt is the attempt number of a new task for a firmware the device
// has failed `failed` times (event rule 4).
func NextAttempt(failed int) int { return failed + 1 }
