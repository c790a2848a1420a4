package domain

import "time"

// WaitKind names what holds a rollout back from admitting more devices
// (see Rollout.WaitingFor).
type WaitKind struct{ s string }

// What a rollout may wait for; WaitingFor tries them from cancelled down
// to the stage gate, and answers WaitNothing when none applies.
var (
	// WaitNothing: the rollout admits its share now and has no further
	// stage to reach.
	WaitNothing = WaitKind{"nothing"}
	// WaitCancelled: the rollout is over for good.
	WaitCancelled = WaitKind{"cancelled"}
	// WaitRevoked: its firmware is revoked (check rule 5), so whatever its
	// status says it admits no device and cannot be resumed: pending tasks
	// are cancelled at each device's next check, started ones finish.
	WaitRevoked = WaitKind{"revoked"}
	// WaitOperator: an operator paused it and must resume it.
	WaitOperator = WaitKind{"operator"}
	// WaitAutoPaused: the failure threshold or a missed stage gate paused
	// it (event rule 5, stage rule G3); an operator must resume it.
	WaitAutoPaused = WaitKind{"auto_paused"}
	// WaitUnusable: its stored policy no longer parses (a time zone gone
	// from tzdata); it admits no device.
	WaitUnusable = WaitKind{"unusable"}
	// WaitStart: starts_at is still ahead (schedule rule S1).
	WaitStart = WaitKind{"start"}
	// WaitWindow: outside its daily window, read in the window's own time
	// zone (schedule rule S2); devices reporting a timezone read it in theirs.
	WaitWindow = WaitKind{"window"}
	// WaitNoShare: a plain rollout at 0% admits no device until widened.
	WaitNoShare = WaitKind{"no_share"}
	// WaitGate: the current stage's gate does not hold yet (stage rule G2).
	WaitGate = WaitKind{"gate"}
	// WaitSoak: the gate held; the next stage starts when the soak ends.
	WaitSoak = WaitKind{"soak"}
	// WaitAdvance: the soak is over; checks already admit the next stage's
	// share, which the next finished task records.
	WaitAdvance = WaitKind{"advance"}
)

// String is the wire form.
func (k WaitKind) String() string { return k.s }

// RolloutWait is what a rollout waits for at a given time, with what an
// operator needs to judge it.
type RolloutWait struct {
	Kind WaitKind
	// Until is when the wait ends by itself, when known: starts_at, the
	// window's next opening, the end of the soak. Zero otherwise.
	Until time.Time
	// Reason is why the last stage ended, when a staged rollout paused
	// ("stage gate missed: ..."); "" when nothing was recorded.
	Reason string
	// Stage is the index of the current stage and Gate its gate, for
	// WaitGate, WaitSoak and WaitAdvance.
	Stage int
	Gate  StageSpec
	// Counted says whether Finished and Succeeded hold the current
	// stage's counts (the caller gave them).
	Counted             bool
	Finished, Succeeded int
}

// WaitingFor says what the rollout waits for at now: the first of its
// status cancelled, its firmware fw revoked (a revoked firmware's rollout
// admits no device and cannot be resumed, so no later answer would be
// true), its status paused (by whom), an unusable policy, starts_at ahead
// (S1), its daily window closed in the window's own zone (S2), a 0% share,
// and for a plan the current stage's gate (G2), judged on stage — the
// counts of the current stage's tasks (nil: not counted). Whether the gate
// held is what the last finished task's evaluation recorded (GateMetAt):
// the counts are shown beside it, not judged again here.
// fw is the rollout's firmware as stored now.
func (r Rollout) WaitingFor(now time.Time, fw Firmware, stage *TaskStats) RolloutWait {
	switch {
	case r.status == RolloutCancelled:
		return RolloutWait{Kind: WaitCancelled}
	case fw.Revoked():
		return RolloutWait{Kind: WaitRevoked}
	case r.status == RolloutPaused && r.pausedReason == PausedAuto:
		return RolloutWait{Kind: WaitAutoPaused, Reason: r.pauseReason()}
	case r.status == RolloutPaused:
		return RolloutWait{Kind: WaitOperator, Reason: r.pauseReason()}
	case r.unusable:
		return RolloutWait{Kind: WaitUnusable}
	case !r.startsAt.IsZero() && now.Before(r.startsAt):
		return RolloutWait{Kind: WaitStart, Until: r.startsAt}
	}
	if r.window != nil {
		if open, next := r.window.Open(now, DeviceFacts{}); !open {
			return RolloutWait{Kind: WaitWindow, Until: next}
		}
	}
	if len(r.stages) == 0 {
		if r.percentage == 0 {
			return RolloutWait{Kind: WaitNoShare}
		}
		return RolloutWait{Kind: WaitNothing}
	}
	if r.stage >= len(r.stages)-1 {
		return RolloutWait{Kind: WaitNothing}
	}
	g := r.stages[r.stage]
	w := RolloutWait{Stage: r.stage, Gate: g}
	if stage != nil {
		w.Counted, w.Finished, w.Succeeded = true, stage.Succeeded+stage.Failed, stage.Succeeded
	}
	switch {
	case r.soakOver(now):
		w.Kind = WaitAdvance
	case !r.gateMetAt.IsZero():
		w.Kind, w.Until = WaitSoak, r.gateMetAt.Add(g.Soak)
	default:
		w.Kind = WaitGate
	}
	return w
}

// pauseReason is the reason recorded when the current stage last ended
// paused, if any.
func (r Rollout) pauseReason() string {
	if len(r.history) == 0 {
		return ""
	}
	if last := r.history[len(r.history)-1]; last.Outcome == StagePaused {
		return last.Reason
	}
	return ""
}
