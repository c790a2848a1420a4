package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
)

// A transaction that ends a device's active task and then judges its
// rollout must lock the rollout before it changes the task. Otherwise it
// deadlocks with a creation for the same device (another firmware, so
// another task lock, or a lock that expired) that holds the rollout FOR
// SHARE and whose INSERT … ON CONFLICT waits for the task's pending
// change: the ender waits for the rollout, the inserter for the ender.
// Postgres then kills one of them after deadlock_timeout, which surfaced
// as a 500 on a device's final event in the frozen-holder
// linearizability run. (A device's final event takes no rollout lock in
// its transaction: TestFinalEventJudgesAfterItsCommit.)
func TestEndingATaskLocksItsRolloutBeforeChangingTheTask(t *testing.T) {
	judge := func(r *domain.Rollout, stats func(time.Time) (domain.TaskStats, error)) (bool, error) {
		_, err := stats(time.Time{})
		return false, err
	}
	// A check that ends the device's task (here an implicit success).
	end := func(e *env, tk domain.Task) error {
		_, _, err := application.ReplaceActive(context.Background(), e.tasks, tk.DeviceID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			return nil, active.Succeed(e.now.Add(time.Second))
		}), judge)
		return err
	}
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A rollout with a failure threshold: one its ended tasks judge.
	f := e.firmware(t, "lockorder", "2.0.0")
	threshold := 50
	r, err := domain.NewRollout(domain.UUIDOf(uuid.New()), f, domain.RolloutSpec{Percentage: 100, FailureThresholdPercent: &threshold}, e.now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rollouts.Create(ctx, r, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	o := domain.Offer{Firmware: f, Rollout: r}
	d := e.device(t, "lockorder-"+uuid.NewString()[:8], "lockorder")
	tk := e.createTask(t, d.ID().String(), o)

	// The creation: holds the rollout FOR SHARE, as ReplaceActive
	// does before its insert.
	inserter, err := e.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = inserter.Rollback() }()
	if _, err := inserter.ExecContext(ctx, `SELECT id FROM rollouts WHERE id = $1 FOR SHARE`, o.Rollout.ID().String()); err != nil {
		t.Fatal(err)
	}

	ended := make(chan error, 1)
	go func() { ended <- end(e, tk) }()
	// The ender now waits for the rollout.
	waitForLockWait(t, e, ctx)

	// The insert meets the device's active task: with the task
	// only locked, it does nothing at once; with the task changed
	// and uncommitted, it would wait for the ender.
	if _, err := inserter.ExecContext(ctx, `INSERT INTO tasks (id, device_id, firmware_id, rollout_id, status, progress, attempt, created_at, updated_at)
		VALUES ($1, $2, $3, $4, 'pending', 0, 1, $5, $5)
		ON CONFLICT (device_id) WHERE status IN ('pending', 'downloading', 'downloaded', 'installing') DO NOTHING`,
		uuid.NewString(), d.ID().String(), o.Firmware.ID().String(), o.Rollout.ID().String(), e.now); err != nil {
		t.Fatalf("the creation's insert: %v", err)
	}
	if err := inserter.Commit(); err != nil {
		t.Fatalf("the creation's commit: %v", err)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("ending the task: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("ending the task did not finish")
	}
	got, err := e.tasks.Get(ctx, tk.ID())
	if err != nil || got.Status() != domain.TaskSucceeded {
		t.Fatalf("task %s, %v; want succeeded", got.Status(), err)
	}
}

// TestFinalEventJudgesAfterItsCommit: a device's final event judges its
// rollout after its transaction commits, and locks the rollout's row only
// when the judgement changes the rollout (event rule 5). While another
// transaction holds the row (an operator's change, another judgement), a
// final event that changes nothing finishes without waiting; one that
// pauses the rollout has its task stored already, and waits for the row
// only to store the pause.
func TestFinalEventJudgesAfterItsCommit(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := e.firmware(t, "judged", "2.0.0")
	threshold := 50
	r, err := domain.NewRollout(domain.UUIDOf(uuid.New()), f, domain.RolloutSpec{Percentage: 100, FailureThresholdPercent: &threshold, MinSample: new(2)}, e.now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rollouts.Create(ctx, r, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	o := domain.Offer{Firmware: f, Rollout: r}
	judge := func(r *domain.Rollout, stats func(time.Time) (domain.TaskStats, error)) (bool, error) {
		if !r.Evaluates() {
			return false, nil
		}
		total, err := stats(time.Time{})
		return r.Evaluate(total, domain.TaskStats{}, e.now.Add(time.Minute)), err
	}
	end := func(tk domain.Task, status string) <-chan error {
		done := make(chan error, 1)
		go func() {
			ev, err := domain.NewEvent("end", status, nil, "", "")
			if err == nil {
				_, err = application.ApplyEvent(ctx, e.tasks, tk.ID(), ev, func(t *domain.Task, prior *domain.Event) (bool, error) {
					return t.ApplyEvent(ev, prior, e.now.Add(time.Second))
				}, judge)
			}
			done <- err
		}()
		return done
	}
	first := e.createTask(t, e.device(t, "judged-"+uuid.NewString()[:8], "judged").ID().String(), o)
	second := e.createTask(t, e.device(t, "judged-"+uuid.NewString()[:8], "judged").ID().String(), o)

	holder, err := e.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	// As LockRollout and a rollout's UPDATE lock it: not FOR UPDATE, which
	// would block the counters' foreign-key checks (FOR KEY SHARE) too.
	if _, err := holder.ExecContext(ctx, `SELECT id FROM rollouts WHERE id = $1 FOR NO KEY UPDATE`, r.ID().String()); err != nil {
		t.Fatal(err)
	}

	// One success: one finished task of a sample of two, nothing to change.
	done := end(first, "succeeded")
	for waited := false; ; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the first final event: %v", err)
			}
		case <-time.After(10 * time.Millisecond):
			if err := e.db.GetContext(ctx, &waited, `SELECT count(*) > 0 FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`); err != nil {
				t.Fatal(err)
			}
			if !waited {
				continue
			}
			t.Fatal("a final event that changes nothing waited for its rollout's row")
		}
		break
	}

	// One failure: 1 of 2 failed reaches 50 %; the pause waits for the row.
	done = end(second, "failed")
	waitForLockWait(t, e, ctx)
	if got, err := e.tasks.Get(ctx, second.ID()); err != nil || got.Status() != domain.TaskFailed {
		t.Fatalf("task %s, %v while the judgement waits; want failed, committed before it", got.Status(), err)
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the second final event: %v", err)
	}
	if got, err := e.rollouts.Get(ctx, r.ID()); err != nil || got.Status() != domain.RolloutPaused || got.PausedReason() != domain.PausedAuto {
		t.Fatalf("rollout %s (%q), %v; want paused by its threshold", got.Status(), got.PausedReason(), err)
	}
}

// waitForLockWait waits until a session of the test's database waits for a
// lock.
func waitForLockWait(t *testing.T, e *env, ctx context.Context) {
	t.Helper()
	for {
		var n int
		if err := e.db.GetContext(ctx, &n, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("nobody waited for the rollout's lock")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
