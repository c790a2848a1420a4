package domain_test

import (
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// TestRecount: what a task change adds to its device's count in a scope,
// given the task that counted there before (event rule 5, "Counters").
func TestRecount(t *testing.T) {
	task := func(id string, st domain.TaskStatus, created time.Duration, action int64) domain.Task {
		return domain.RehydrateTask(domain.TaskRecord{ID: id, ActionID: action, DeviceID: "d1", RolloutID: rolloutA,
			Status: st, CreatedAt: t0.Add(created), UpdatedAt: t0.Add(created)})
	}
	stats := func(pairs ...any) domain.TaskStats {
		var s domain.TaskStats
		for i := 0; i < len(pairs); i += 2 {
			s.Add(pairs[i].(domain.TaskStatus), pairs[i+1].(int))
		}
		return s
	}
	failedFirst := task("a", domain.TaskFailed, 0, 1)
	cancelledFirst := task("a", domain.TaskCancelled, 0, 1)
	for _, c := range []struct {
		name    string
		counted *domain.Task
		changed domain.Task
		want    domain.TaskStats
	}{
		{"the device's first task", nil, task("a", domain.TaskPending, 0, 1), stats(domain.TaskPending, 1)},
		{"the counted task moves on", &domain.Task{}, task("a", domain.TaskDownloading, 0, 1), stats(domain.TaskPending, -1, domain.TaskDownloading, 1)},
		{"a retry in flight does not undo a failure", &failedFirst, task("b", domain.TaskPending, time.Minute, 2), stats()},
		{"the retry's success replaces the failure", &failedFirst, task("b", domain.TaskSucceeded, time.Minute, 2), stats(domain.TaskFailed, -1, domain.TaskSucceeded, 1)},
		{"a new task replaces a cancel", &cancelledFirst, task("b", domain.TaskPending, time.Minute, 2), stats(domain.TaskCancelled, -1, domain.TaskPending, 1)},
		{"an older outcome does not replace a later one", ptr(task("b", domain.TaskSucceeded, time.Minute, 2)), task("a", domain.TaskFailed, 0, 1), stats()},
		{"the same instant: the later inserted counts", ptr(task("a", domain.TaskFailed, 0, 1)), task("b", domain.TaskSucceeded, 0, 2), stats(domain.TaskFailed, -1, domain.TaskSucceeded, 1)},
		{"a contradicted success is failed", ptr(task("a", domain.TaskSucceeded, 0, 1)), task("a", domain.TaskFailed, 0, 1), stats(domain.TaskSucceeded, -1, domain.TaskFailed, 1)},
	} {
		counted := c.counted
		if counted != nil && counted.ID().IsZero() {
			counted = ptr(task("a", domain.TaskPending, 0, 1))
		}
		if got := domain.Recount(counted, c.changed); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestStageAt: a task joins the stage the rollout's creation-time reading
// gives (stage rules G1–G2): the current one, or the next once the soak
// is over, dated when it ended; none for a rollout without stages.
func TestStageAt(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	plain := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 10}, t0)
	if at := plain.StageAt(t1); !at.IsZero() {
		t.Errorf("a rollout without stages: stage %v, want none", at)
	}
	r := mustRollout(t, rolloutB, fw, domain.RolloutSpec{Stages: []domain.StageRequest{
		{Percentage: intp(10), MinFinished: intp(1), SuccessPercent: intp(0), Soak: time.Hour}, {Percentage: intp(100)}}}, t0)
	if at := r.StageAt(t1); !at.Equal(t0) {
		t.Errorf("first stage: %v, want its start %v", at, t0)
	}
	r.Evaluate(domain.TaskStats{}, domain.TaskStats{Succeeded: 1}, t1) // the gate holds at t1: soak until t1+1h
	for _, c := range []struct {
		at, want time.Time
	}{
		{t1.Add(59 * time.Minute), t0},
		{t1.Add(time.Hour), t1.Add(time.Hour)},
		{t1.Add(3 * time.Hour), t1.Add(time.Hour)},
	} {
		if got := r.StageAt(c.at); !got.Equal(c.want) {
			t.Errorf("created at %v: stage %v, want %v", c.at, got, c.want)
		}
	}
	next := r
	next.Evaluate(domain.TaskStats{}, domain.TaskStats{Succeeded: 1}, t1.Add(2*time.Hour)) // stores the advance
	if !next.StageSince().Equal(t1.Add(time.Hour)) || !next.StageAt(t1.Add(3*time.Hour)).Equal(t1.Add(time.Hour)) {
		t.Errorf("after the advance: stage since %v, want %v, as predicted", next.StageSince(), t1.Add(time.Hour))
	}
	tk := domain.RehydrateTask(domain.TaskRecord{ID: "x", RolloutID: rolloutB, Status: domain.TaskPending, CreatedAt: t1.Add(2 * time.Hour)})
	tk.JoinStage(r)
	if !tk.Stage().Equal(t1.Add(time.Hour)) {
		t.Errorf("JoinStage: %v", tk.Stage())
	}
	other := domain.RehydrateTask(domain.TaskRecord{ID: "y", RolloutID: rolloutA, Status: domain.TaskPending, CreatedAt: t1})
	other.JoinStage(r)
	if !other.Stage().IsZero() {
		t.Errorf("a task joined another rollout's stage: %v", other.Stage())
	}
}

// Of reads each status's count back as Add counted it, and Plus adds two
// sets status by status: a rollout's totals are its stages' sums.
func TestTaskStatsOfAndPlus(t *testing.T) {
	var a, b domain.TaskStats
	for i, st := range domain.AllTaskStatuses {
		a.Add(st, i+1)
		b.Add(st, 10*(i+1))
	}
	sum := a.Plus(b)
	for i, st := range domain.AllTaskStatuses {
		if got := a.Of(st); got != i+1 {
			t.Errorf("Of(%s) = %d, want %d", st, got, i+1)
		}
		if got := sum.Of(st); got != 11*(i+1) {
			t.Errorf("Plus: Of(%s) = %d, want %d", st, got, 11*(i+1))
		}
	}
	if got := a.Of(domain.TaskStatus{}); got != 0 {
		t.Errorf("Of(no status) = %d, want 0", got)
	}
}
