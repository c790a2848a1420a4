package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/tests/testenv"
)

// TestReadReplicaBoundsStalenessAndFallsBack runs against a private
// primary and a real streaming replica of it (testenv.StartStreamingPair):
// the check's read goes to the replica while it keeps up, stays there on
// an idle primary, leaves it when replay is paused for longer than the
// bound — a task the primary cancelled is never handed out from the
// replica more than MaxLag after the cancel — comes back when replay
// resumes, and falls back to the primary, without an error, when the
// replica is killed.
func TestReadReplicaBoundsStalenessAndFallsBack(t *testing.T) {
	pair := testenv.StartStreamingPair(t)
	ctx := context.Background()
	primary := pair.Open(t, pair.PrimaryURL)
	replicaAdmin := pair.Open(t, pair.ReplicaURL)
	const maxLag = 500 * time.Millisecond
	reads, closeReads, err := postgres.OpenReadReplica(postgres.ReadReplicaConfig{
		URL: postgres.DatabaseURL(pair.ReplicaURL), MaxLag: maxLag, Probe: 50 * time.Millisecond,
	}, primary, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeReads)
	repos, err := postgres.NewRepositories(primary)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := postgres.NewServingTaskRepository(primary, reads, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: primary, devices: repos.Devices, firmwares: repos.Firmwares, rollouts: repos.Rollouts, tasks: repos.Tasks,
		now: time.Now().UTC().Truncate(time.Microsecond)}
	d := e.device(t, "rr-1", "m")
	task := e.createTask(t, d.ID().String(), e.offer(t, "m", "2.0.0"))
	waitFor(t, "the replica to be usable", 5*time.Second, reads.Usable)

	// Idle primary: the replica stays usable well past the bound.
	time.Sleep(3 * maxLag)
	if lag, ok := reads.Lag(); !ok || lag >= maxLag {
		t.Fatalf("an idle primary made the replica look %v behind (usable %v); it is up to date", lag, ok)
	}
	before := reads.Stats().Reads.Load()
	start := time.Now()
	if v, err := tasks.CheckView(ctx, d.TokenHash()); err != nil || v.Tasks.Active == nil || v.Tasks.Active.ID() != task.ID() {
		t.Fatalf("CheckView from the replica: %+v %v, want active task %s", v.Tasks, err, task.ID())
	} else if v.AsOf.IsZero() || v.AsOf.After(time.Now()) || !v.AsOf.After(start.Add(-maxLag)) {
		// As of when it had replayed the primary: within the bound.
		t.Fatalf("a replica read as of %v, started %v: want within %v before it", v.AsOf, start, maxLag)
	}
	if reads.Stats().Reads.Load() != before+1 {
		t.Fatalf("the check's read did not go to the replica (%d replica reads)", reads.Stats().Reads.Load())
	}

	// Replay paused: the primary cancels the task. A read may show it for
	// less than maxLag after the cancel committed, never later.
	if _, err := replicaAdmin.ExecContext(ctx, `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	if _, err := primary.ExecContext(ctx, `UPDATE tasks SET status = 'cancelled' WHERE id = $1`, task.ID().String()); err != nil {
		t.Fatal(err)
	}
	cancelled := time.Now()
	fromPrimary := reads.Stats().Primary.Load()
	var staleReads, lateReads int
	for time.Since(cancelled) < 3*maxLag {
		start := time.Now()
		v, err := tasks.CheckViewOf(ctx, d.ID())
		if err != nil {
			t.Fatalf("CheckViewOf while replay is paused: %v", err)
		}
		switch {
		case v.Tasks.Active == nil && !v.AsOf.IsZero():
			t.Fatalf("a read from the primary (the replica does not know of the cancel) as of %v, want none", v.AsOf)
		case v.Tasks.Active != nil && (v.AsOf.IsZero() || !v.AsOf.Before(cancelled)):
			// Auth takes it for the read's time: a success it does not
			// show must never pass for one it saw.
			t.Fatalf("a replica read that misses the cancel as of %v, the cancel committed by %v", v.AsOf, cancelled)
		}
		if v.Tasks.Active != nil {
			staleReads++
			if start.Sub(cancelled) >= maxLag {
				t.Fatalf("handed task %s %v after the primary cancelled it (bound %v)", v.Tasks.Active.ID(), start.Sub(cancelled), maxLag)
			}
		}
		if start.Sub(cancelled) >= maxLag {
			lateReads++
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lateReads == 0 || reads.Stats().Primary.Load() == fromPrimary {
		t.Fatalf("no read after the bound went to the primary (%d late reads, %d primary reads)", lateReads, reads.Stats().Primary.Load()-fromPrimary)
	}
	if reads.Usable() {
		t.Fatalf("replay paused after a write, yet the replica is usable")
	}
	t.Logf("replay paused: %d reads within %v of the cancel still showed the task (allowed), none after", staleReads, maxLag)
	// A device registered meanwhile is unknown to the paused replica; it
	// authenticates through the primary.
	fresh := e.device(t, "rr-2", "m")
	if v, err := tasks.CheckView(ctx, fresh.TokenHash()); err != nil || v.Device.ID() != fresh.ID() {
		t.Fatalf("a device registered while replay is paused: %v %v", v.Device.ID(), err)
	}

	// Replay resumed: back on the replica, which now knows of the cancel.
	if _, err := replicaAdmin.ExecContext(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replica to be usable after replay resumed", 5*time.Second, reads.Usable)
	before = reads.Stats().Reads.Load()
	if v, err := tasks.CheckViewOf(ctx, d.ID()); err != nil || v.Tasks.Active != nil {
		t.Fatalf("after resume: %+v %v, want no active task", v.Tasks.Active, err)
	}
	if reads.Stats().Reads.Load() != before+1 {
		t.Fatalf("after resume the read did not go to the replica")
	}

	// A replica that stops answering without refusing (every byte delayed
	// 3s): the read falls back to the primary within about MaxLag.
	proxy := testenv.StartProxy(t, strings.TrimPrefix(strings.Split(pair.ReplicaURL, "/ota?")[0], "postgres://postgres@"))
	slowURL := strings.Replace(pair.ReplicaURL, proxy.Target(), proxy.Addr(), 1)
	slow, closeSlow, err := postgres.OpenReadReplica(postgres.ReadReplicaConfig{
		URL: postgres.DatabaseURL(slowURL), MaxLag: maxLag, Probe: 50 * time.Millisecond,
	}, primary, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSlow()
	slowTasks, err := postgres.NewServingTaskRepository(primary, slow, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A probe on a loaded machine can see the fresh replica lag for a
	// moment, and a read then rightly goes to the primary: what matters
	// is that reads reach the proxied replica once it keeps up.
	waitFor(t, "a read through the proxy to reach the replica", 5*time.Second, func() bool {
		_, err := slowTasks.CheckViewOf(ctx, d.ID())
		return err == nil && slow.Stats().Reads.Load() > 0
	})
	proxy.SetLatency(3 * time.Second)
	start = time.Now()
	if v, err := slowTasks.CheckViewOf(ctx, d.ID()); err != nil || v.Device.ID() != d.ID() {
		t.Fatalf("a read while the replica hangs: %v %v", v.Device.ID(), err)
	}
	// Waiting for the replica would take two proxy delays (6s); the
	// primary answers after about maxLag (the margin is for a loaded CI).
	if took := time.Since(start); took >= 3*time.Second {
		t.Errorf("a read while the replica hangs took %v; the primary should answer after about %v", took, maxLag)
	}
	proxy.SetLatency(0)

	// Replica killed: every read is answered, by the primary.
	pair.KillReplica(t)
	for i := 0; i < 20; i++ {
		if v, err := tasks.CheckView(ctx, d.TokenHash()); err != nil || v.Device.ID() != d.ID() {
			t.Fatalf("read %d after the replica died: %v %v", i, v.Device.ID(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if reads.Usable() {
		t.Errorf("the replica is down, yet usable")
	}
	if reads.Stats().Fallbacks.Load()+reads.Stats().Primary.Load() == 0 {
		t.Errorf("no read was sent to the primary after the replica died")
	}
}

// TestReadReplicaAnswerMustComeWithinTheBound: a read that starts while
// the replica is within MaxLag but is answered after the bound is dropped
// for the primary's answer. Replay is paused just after the primary
// cancels a task; once the replica is 3/4 of MaxLag behind, every byte to
// it is delayed so that a read takes longer than the quarter left: the
// device is not handed the cancelled task (before, a read begun within the
// bound was waited for up to a whole MaxLag more).
func TestReadReplicaAnswerMustComeWithinTheBound(t *testing.T) {
	pair := testenv.StartStreamingPair(t)
	ctx := context.Background()
	primary := pair.Open(t, pair.PrimaryURL)
	replicaAdmin := pair.Open(t, pair.ReplicaURL)
	proxy := testenv.StartProxy(t, strings.TrimPrefix(strings.Split(pair.ReplicaURL, "/ota?")[0], "postgres://postgres@"))
	const maxLag = time.Second
	reads, closeReads, err := postgres.OpenReadReplica(postgres.ReadReplicaConfig{
		URL: postgres.DatabaseURL(strings.Replace(pair.ReplicaURL, proxy.Target(), proxy.Addr(), 1)), MaxLag: maxLag, Probe: 50 * time.Millisecond,
	}, primary, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeReads)
	repos, err := postgres.NewRepositories(primary)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := postgres.NewServingTaskRepository(primary, reads, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: primary, devices: repos.Devices, firmwares: repos.Firmwares, rollouts: repos.Rollouts, tasks: repos.Tasks,
		now: time.Now().UTC().Truncate(time.Microsecond)}
	d := e.device(t, "rb-1", "m")
	task := e.createTask(t, d.ID().String(), e.offer(t, "m", "2.0.0"))
	waitFor(t, "the replica to be usable", 5*time.Second, reads.Usable)
	// The statement prepared and a few connections open (reads that
	// overlap), so the slow read below is one round trip on an open
	// connection.
	proxy.SetLatency(20 * time.Millisecond)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { _, _ = tasks.CheckViewOf(ctx, d.ID()) })
	}
	wg.Wait()
	proxy.SetLatency(0)
	waitFor(t, "the replica to be usable after the warm-up", 5*time.Second, reads.Usable)
	if v, err := tasks.CheckViewOf(ctx, d.ID()); err != nil || v.Tasks.Active == nil || reads.Stats().Reads.Load() == 0 {
		t.Fatalf("a read before the cancel: %+v %v (%d replica reads)", v.Tasks.Active, err, reads.Stats().Reads.Load())
	}

	if _, err := replicaAdmin.ExecContext(ctx, `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	if _, err := primary.ExecContext(ctx, `UPDATE tasks SET status = 'cancelled' WHERE id = $1`, task.ID().String()); err != nil {
		t.Fatal(err)
	}
	cancelled := time.Now()
	waitFor(t, "the replica to be 3/4 of the bound behind", 5*time.Second, func() bool {
		lag, ok := reads.Lag()
		return ok && lag >= maxLag*3/4
	})
	// A read: two delayed chunks, 400ms (800ms if the connection must
	// prepare the statement), more than the quarter of the bound left.
	proxy.SetLatency(200 * time.Millisecond)
	if !reads.Usable() {
		t.Fatal("the replica went out of the bound before the read: the test's read would not start on it")
	}
	start := time.Now()
	v, err := tasks.CheckViewOf(ctx, d.ID())
	answered := time.Since(cancelled)
	if err != nil {
		t.Fatalf("CheckViewOf: %v", err)
	}
	t.Logf("read started %v after the cancel, answered %v after it (%d replica reads, %d fallbacks)",
		start.Sub(cancelled), answered, reads.Stats().Reads.Load(), reads.Stats().Fallbacks.Load())
	if v.Tasks.Active != nil {
		t.Fatalf("handed task %s %v after the primary cancelled it (bound %v): the read started %v after the cancel, within the bound, and was answered past it",
			v.Tasks.Active.ID(), answered, maxLag, start.Sub(cancelled))
	}
	// Not vacuous: the replica still has the task active.
	proxy.SetLatency(0)
	var status string
	if err := replicaAdmin.GetContext(ctx, &status, `SELECT status FROM tasks WHERE id = $1`, task.ID().String()); err != nil || status == "cancelled" {
		t.Fatalf("the paused replica reads the task %q (%v): it was not behind", status, err)
	}
	if reads.Stats().Fallbacks.Load() == 0 {
		t.Errorf("the slow read was not abandoned for the primary")
	}
}

// TestReadReplicaSteadilyBehindIsNotRead: a replica that replays every
// commit recovery_min_apply_delay (2s) late while the primary keeps
// writing is never more than MaxLag (500ms) fresh, so no check read goes
// to it, and a task the primary cancelled is not handed out. (A paused
// replay is the other test's; this one replays, steadily behind.)
func TestReadReplicaSteadilyBehindIsNotRead(t *testing.T) {
	pair := testenv.StartStreamingPair(t)
	ctx := context.Background()
	primary := pair.Open(t, pair.PrimaryURL)
	replicaAdmin := pair.Open(t, pair.ReplicaURL)
	const maxLag, delay = 500 * time.Millisecond, 2 * time.Second
	for _, q := range []string{`ALTER SYSTEM SET recovery_min_apply_delay = '2s'`, `SELECT pg_reload_conf()`} {
		if _, err := replicaAdmin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	reads, closeReads, err := postgres.OpenReadReplica(postgres.ReadReplicaConfig{
		URL: postgres.DatabaseURL(pair.ReplicaURL), MaxLag: maxLag, Probe: 50 * time.Millisecond,
	}, primary, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeReads)
	repos, err := postgres.NewRepositories(primary)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := postgres.NewServingTaskRepository(primary, reads, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: primary, devices: repos.Devices, firmwares: repos.Firmwares, rollouts: repos.Rollouts, tasks: repos.Tasks,
		now: time.Now().UTC().Truncate(time.Microsecond)}
	d := e.device(t, "rs-1", "m")
	task := e.createTask(t, d.ID().String(), e.offer(t, "m", "2.0.0"))
	// Idle, the replica catches up once the delay is over.
	waitFor(t, "the replica to replay the task", 3*delay, func() bool {
		var n int
		return replicaAdmin.GetContext(ctx, &n, `SELECT count(*) FROM tasks WHERE id = $1`, task.ID().String()) == nil && n == 1
	})
	waitFor(t, "the idle replica to be usable", 5*time.Second, reads.Usable)

	// The primary writes every 50ms from now on.
	if _, err := primary.ExecContext(ctx, `CREATE TABLE heartbeat (n bigint)`); err != nil {
		t.Fatal(err)
	}
	writing, stopWriting := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-writing.Done():
				return
			case <-tick.C:
			}
			_, _ = primary.ExecContext(writing, `INSERT INTO heartbeat VALUES ($1)`, n)
		}
	})
	t.Cleanup(func() { stopWriting(); wg.Wait() })
	waitFor(t, "the replica to fall out of the bound", 5*time.Second, func() bool { return !reads.Usable() })

	if _, err := primary.ExecContext(ctx, `UPDATE tasks SET status = 'cancelled' WHERE id = $1`, task.ID().String()); err != nil {
		t.Fatal(err)
	}
	cancelled := time.Now()
	replicaReads := reads.Stats().Reads.Load()
	var checks int
	for time.Since(cancelled) < delay*3/4 {
		v, err := tasks.CheckViewOf(ctx, d.ID())
		if err != nil {
			t.Fatalf("CheckViewOf: %v", err)
		}
		if v.Tasks.Active != nil {
			t.Fatalf("handed task %s %v after the primary cancelled it, from a replica %v behind (bound %v)", v.Tasks.Active.ID(), time.Since(cancelled), delay, maxLag)
		}
		if reads.Usable() {
			lag, _ := reads.Lag()
			t.Fatalf("the replica replays %v behind, yet is usable (measured lag %v, bound %v)", delay, lag, maxLag)
		}
		checks++
		time.Sleep(20 * time.Millisecond)
	}
	if n := reads.Stats().Reads.Load() - replicaReads; n != 0 {
		t.Fatalf("%d of %d check reads went to the replica replaying %v behind", n, checks, delay)
	}
	// Not vacuous: the replica was replaying, behind, not stopped — it
	// still has the task active, then gets the cancel.
	var status string
	if err := replicaAdmin.GetContext(ctx, &status, `SELECT status FROM tasks WHERE id = $1`, task.ID().String()); err != nil || status == "cancelled" {
		t.Fatalf("the delayed replica reads the task %q (%v) within the delay: it was not behind", status, err)
	}
	waitFor(t, "the delayed replica to replay the cancel", 3*delay, func() bool {
		return replicaAdmin.GetContext(ctx, &status, `SELECT status FROM tasks WHERE id = $1`, task.ID().String()) == nil && status == "cancelled"
	})
	if lag, ok := reads.Lag(); ok && lag < maxLag {
		t.Fatalf("the replica replays %v behind the writing primary, measured %v", delay, lag)
	}
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
