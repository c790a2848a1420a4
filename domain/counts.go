package domain

import "time"

// A rollout's stats, event rule 5's threshold and stage rule G1's gates
// count devices, each once, by the task CountsOver picks among its tasks
// of the rollout, or of one stage. The stores keep those counts as
// counters, changed in the transaction of every task insert and status
// change by what Recount returns, rather than recounting a rollout's tasks
// whenever one of them ends: a final event's cost no longer grows with
// the rollout.

// StageAt is the start of the stage a task created at t counts in (stage
// rule G1), as this copy of the rollout — the one read FOR SHARE by the
// insert — knows its stages: the current stage's, or, when its soak was
// over by t, the next stage's, dated when the soak ended, as Evaluate
// dates it when it advances (checks admit the next stage's devices from
// then: PercentageAt). Zero for a rollout without stages.
func (r Rollout) StageAt(t time.Time) time.Time {
	if r.soakOver(t) {
		return stamp(r.gateMetAt.Add(r.stages[r.stage].Soak))
	}
	return r.StageSince()
}

// JoinStage fixes the stage t counts in, by its creation time, on its
// rollout r as read by the transaction inserting it (StageAt). A task
// keeps its stage for good, so the counters and a recount agree on it.
func (t *Task) JoinStage(r Rollout) {
	if r.id == t.rolloutID {
		t.stage = r.StageAt(t.createdAt)
	}
}

// Stage is the start of the stage the task counts in (JoinStage); zero
// for a task of a rollout without stages.
func (t Task) Stage() time.Time { return t.stage }

// Recount is what changed, a task just inserted or changed, adds to its
// device's count in one scope (its rollout, or its stage), given counted:
// the device's task that counted there before the change (nil: none). The
// counted task, when it is changed itself, keeps counting: CountsOver
// ranks a task by outcome, creation and action id, and a change never
// takes an outcome away (a success contradicted is failed, event rule 7)
// nor moves the other two. Else changed counts instead when it ranks
// over counted.
func Recount(counted *Task, changed Task) TaskStats {
	var d TaskStats
	switch {
	case counted != nil && counted.id == changed.id:
		d.Add(counted.status, -1)
	case counted != nil && !CountsOver(changed, *counted):
		return d
	case counted != nil:
		d.Add(counted.status, -1)
	}
	d.Add(changed.status, 1)
	return d
}

// CountChange is one scope's change of a rollout's counters: the whole
// rollout (Stage zero) or the stage started at Stage.
type CountChange struct {
	Rollout UUID
	Stage   time.Time
	Delta   TaskStats
}

// Plus is s with o added, status by status.
func (s TaskStats) Plus(o TaskStats) TaskStats {
	for _, st := range AllTaskStatuses {
		s.Add(st, o.Of(st))
	}
	return s
}

// Of is the count of status st.
func (s TaskStats) Of(st TaskStatus) int {
	if c := s.counter(st); c != nil {
		return *c
	}
	return 0
}
