package domain

import (
	"fmt"
	"slices"
	"time"
)

// Selector is the rollout's targeting (zero: the whole model).
func (r Rollout) Selector() Selector { return r.selector }

// Stages is the rollout's plan (nil: a plain percentage rollout).
func (r Rollout) Stages() []StageSpec { return slices.Clone(r.stages) }

// Stage is the index of the current stage in Stages.
func (r Rollout) Stage() int { return r.stage }

// GateMetAt is when the current stage's gate first held (zero: not yet);
// the stage advances a soak time later.
func (r Rollout) GateMetAt() time.Time { return r.gateMetAt }

// History is when each stage started and why it ended, oldest first.
func (r Rollout) History() []StageEvent { return slices.Clone(r.history) }

// StartsAt is when the rollout begins offering (zero: at once).
func (r Rollout) StartsAt() time.Time { return r.startsAt }

// Window is the daily maintenance window, if any.
func (r Rollout) Window() *Window {
	if r.window == nil {
		return nil
	}
	w := *r.window
	return &w
}

// TaskTimeout is how long an active task may go without an event.
func (r Rollout) TaskTimeout() time.Duration { return r.taskTimeout }

// AllowDowngrade reports whether the rollout may offer a lower version.
func (r Rollout) AllowDowngrade() bool { return r.allowDowngrade }

// RequestKey is the Idempotency-Key it was started with (zero: none).
func (r Rollout) RequestKey() RequestKey { return r.requestKey }

// StageSince is when the current stage (re)started: its gate counts the
// tasks created since then. Zero for a rollout without stages.
func (r Rollout) StageSince() time.Time {
	if len(r.history) == 0 || len(r.stages) == 0 {
		return time.Time{}
	}
	return r.history[len(r.history)-1].StartedAt
}

// soakOver reports whether the current stage's gate held for its soak
// time by now, so the next stage is due (stage rule G2).
func (r Rollout) soakOver(now time.Time) bool {
	return len(r.stages) > 0 && r.stage < len(r.stages)-1 && !r.gateMetAt.IsZero() &&
		!now.Before(r.gateMetAt.Add(r.stages[r.stage].Soak))
}

// PercentageAt is the share of the selected fleet admitted at now: the
// stored percentage, or the next stage's once the current stage's soak is
// over (the advance is then stored by the next final event; a check needs
// no write and no scheduler to see it).
func (r Rollout) PercentageAt(now time.Time) int {
	if r.soakOver(now) && r.stages[r.stage+1].Percentage > r.percentage {
		return r.stages[r.stage+1].Percentage
	}
	return r.percentage
}

// AdmitsAt reports whether the rollout offers its firmware at now to a
// device with these facts reporting version reported (targeting rule T1,
// stage rule G2, schedule rules S1–S2). It must be active, select the
// device, have it in its bucket range, have started, and have its window
// open. When only the schedule keeps the device out, retry is when it may
// come back.
func (r Rollout) AdmitsAt(d Device, f DeviceFacts, reported Version, now time.Time) (ok bool, retry time.Time) {
	if r.status != RolloutActive || r.unusable || !r.selector.Matches(f, reported) {
		return false, time.Time{}
	}
	if Bucket(r.id.String(), d.ID().String()) >= r.PercentageAt(now) {
		return false, time.Time{}
	}
	if !r.startsAt.IsZero() && now.Before(r.startsAt) {
		return false, r.startsAt
	}
	if r.window != nil {
		if open, next := r.window.Open(now, f); !open {
			return false, next
		}
	}
	return true, time.Time{}
}

// inactivity is how much of the time from since (a task's last change) to
// now counts toward the rollout's task timeout for a device with these
// facts (stuck-task rule K1): only time after starts_at, inside the
// window as the device reads it. A device told to wait — not offered the
// update before the start, "skip" outside the window (DDI) — is not idle
// while it waits. It stops counting once past the timeout.
func (r Rollout) inactivity(since, now time.Time, f DeviceFacts) time.Duration {
	if since.Before(r.startsAt) {
		since = r.startsAt
	}
	switch {
	case !since.Before(now):
		return 0
	case r.window == nil:
		return now.Sub(since)
	}
	return r.window.openBetween(since, now, f, r.taskTimeout)
}

// offersFrom reports whether the rollout's firmware may be offered to a device
// running current: an upgrade it accepts (check rule 4), or, for a
// rollback rollout, any version below current (rollback rule R1: the
// selector's version range has already said which devices).
func (o Offer) offersFrom(current Version) bool {
	if o.Firmware.AcceptsSource(current) {
		return true
	}
	return o.Rollout.allowDowngrade && !current.IsZero() && current.Compare(o.Firmware.Version()) > 0
}

// Evaluates reports whether a final event must re-evaluate the rollout:
// it is active and has something to judge (Judges). The status changes
// under an operator's hand, so only the rollout as locked by the
// evaluating transaction may decide it.
func (r Rollout) Evaluates() bool {
	return r.status == RolloutActive && r.Judges()
}

// Judges reports whether the rollout has anything a task's end could
// change: a failure threshold or a plan of stages. Both are fixed when the
// rollout starts, so any read of it may decide whether to lock it for an
// evaluation; whether to evaluate (Evaluates) is decided on the lock.
func (r Rollout) Judges() bool {
	return r.failureThresholdPercent != nil || len(r.stages) > 0
}

// Evaluate re-judges an active rollout when one of its tasks finished (event
// rule 5, stage rules G2–G3), given the counts of all its tasks and of the
// tasks of its current stage (created since StageSince). In order: the
// failure threshold pauses it (reason auto); a stage whose sample missed
// its success bar pauses it; a stage whose gate holds records when it
// first held and, once the soak time is over, advances. It reports whether
// the rollout changed.
func (r *Rollout) Evaluate(total, stage TaskStats, now time.Time) bool {
	if r.status != RolloutActive {
		return false
	}
	now = r.judgedAt(now)
	if r.AutoPause(total, now) {
		return true
	}
	if len(r.stages) == 0 {
		return false
	}
	g := r.stages[r.stage]
	finished := stage.Succeeded + stage.Failed
	switch {
	case gateFails(g, stage):
		r.status, r.pausedReason, r.updatedAt = RolloutPaused, PausedAuto, stamp(now)
		r.endStage(StagePaused, fmt.Sprintf("stage gate missed: %d of %d finished tasks succeeded, below %d%%",
			stage.Succeeded, finished, g.SuccessPercent), now)
		return true
	case gateHolds(g, stage) && r.stage < len(r.stages)-1:
		changed := false
		if r.gateMetAt.IsZero() {
			r.gateMetAt, r.updatedAt, changed = stamp(now), stamp(now), true
		}
		return r.advanceDue(now, func() string {
			return fmt.Sprintf("gate held: %d of %d finished tasks succeeded (at least %d%% of at least %d), soaked %s",
				stage.Succeeded, finished, g.SuccessPercent, g.MinFinished, g.Soak)
		}) || changed
	}
	return false
}

// advanceDue stores the advance to the next stage once it is due at now:
// the rollout is active and the current stage's soak is over (stage rule
// G2). The next stage began when the soak ended — checks admitted its
// devices from then on (PercentageAt), and tasks created since joined it
// (StageAt) — so the current stage ends, and the next starts, then. why
// is the ended stage's reason, asked only when the advance is made. It
// reports whether it advanced. Every advance is stored here: by a
// judgement (Evaluate), and before an operator's change
// (advanceBeforeOperator).
func (r *Rollout) advanceDue(now time.Time, why func() string) bool {
	if r.status != RolloutActive || !r.soakOver(now) {
		return false
	}
	at := r.gateMetAt.Add(r.stages[r.stage].Soak)
	r.endStage(StageAdvanced, why(), at)
	r.startStage(r.stage+1, at)
	r.updatedAt = stamp(now)
	return true
}

// advanceBeforeOperator stores an advance due at now before an operator's
// change (what they did): the stage that began when the soak ended is the
// one their percentage overrides, or their pause or cancel ends (G1, G2).
func (r *Rollout) advanceBeforeOperator(now time.Time, did string) {
	r.advanceDue(now, func() string {
		return fmt.Sprintf("gate held, soaked %s (stored when an operator %s)", r.stages[r.stage].Soak, did)
	})
}

// judgedAt dates an evaluation made at now by one replica's clock: now, or
// the current stage's start or gate time if another replica, whose clock
// is ahead, recorded a later one. The rollout's own record so never runs
// backwards — no gate met before its stage began, which would end its
// soak early, no stage ending before it started (stage rule G2, clocks).
func (r Rollout) judgedAt(now time.Time) time.Time {
	for _, at := range []time.Time{r.StageSince(), r.gateMetAt} {
		if at.After(now) {
			now = at
		}
	}
	return now
}

// endStage closes the current stage's history entry, if open. The history
// is copied before the change, never written in place: a Rollout is a
// value, and a copy of it (a store's, a caller's) shares the array.
func (r *Rollout) endStage(o StageOutcome, reason string, now time.Time) {
	if len(r.stages) == 0 || len(r.history) == 0 || !r.history[len(r.history)-1].EndedAt.IsZero() {
		return
	}
	r.history = slices.Clone(r.history)
	last := &r.history[len(r.history)-1]
	last.EndedAt, last.Outcome, last.Reason = stamp(now), o, reason
}

// startStage makes stage i current from now, with a fresh gate, at no
// less than its percentage: a next stage widens, never narrows (G1).
func (r *Rollout) startStage(i int, now time.Time) {
	r.percentage = max(r.percentage, r.stages[i].Percentage)
	r.sampleStage(i, now)
}

// sampleStage makes stage i current from now with a fresh gate, at the
// percentage the rollout has: a resume starts the stage's sample anew
// (G3) and keeps an operator's narrowing, which stands until the next
// stage starts (G1).
func (r *Rollout) sampleStage(i int, now time.Time) {
	r.stage = i
	r.gateMetAt = time.Time{}
	r.history = append(r.history, StageEvent{Stage: i, Percentage: r.percentage, StartedAt: stamp(now)})
	if len(r.history) > MaxStageHistory {
		// Pauses and resumes add entries; the oldest go first.
		r.history = slices.Clone(r.history[len(r.history)-MaxStageHistory:])
	}
}

// MaxStageHistory bounds a rollout's stage history (pause and resume
// cycles would otherwise grow it without end).
const MaxStageHistory = 100
