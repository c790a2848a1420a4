package domain

import "sort"

// Offer is a firmware together with an active rollout of it: something a
// device of that model might be given.
type Offer struct {
	Firmware Firmware
	Rollout  Rollout
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
		if fw.Revoked() || fw.Model() != d.Model() || o.Rollout.FirmwareID() != fw.ID() {
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

// Plan is what a check does with the device's active task and its target.
type Plan int

// The plans of check rules 5 and 6.
const (
	// PlanNone: no target and no active task; no update.
	PlanNone Plan = iota
	// PlanKeep: hand back the active task unchanged (it has started, or
	// there is no target to replace it with).
	PlanKeep
	// PlanReuse: the active task is already for the target.
	PlanReuse
	// PlanCreate: create a task for the target, superseding the active
	// task if it is still pending.
	PlanCreate
)

// String names the plan for logs and metrics.
func (p Plan) String() string {
	switch p {
	case PlanKeep:
		return "keep"
	case PlanReuse:
		return "reuse"
	case PlanCreate:
		return "create"
	}
	return "none"
}

// Decide applies check rules 5 and 6. active is the device's active task
// after Settle (nil if none); target is the result of SelectTarget (nil if none).
func Decide(active *Task, target *Offer) Plan {
	switch {
	case active == nil && target == nil:
		return PlanNone
	case active == nil:
		return PlanCreate
	case target != nil && active.firmwareID == target.Firmware.ID():
		return PlanReuse
	case target != nil && active.status == TaskPending:
		return PlanCreate
	}
	return PlanKeep
}

// NextAttempt is the attempt number of a new task for a firmware the device
// has failed `failed` times (event rule 4).
func NextAttempt(failed int) int { return failed + 1 }
