package faults

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestKilledLockHolder kills an instance with SIGKILL while it holds locks
// inside its critical sections, as a crash or the OOM killer would: nothing
// releases the locks, and its sessions leave uncommitted rows behind.
//
//  1. The test locks the rollout's row (SELECT … FOR UPDATE): a task's
//     insert checks its rollout foreign key with FOR KEY SHARE, so every
//     creation waits there, inside its critical section, after its row is
//     written but before it commits.
//  2. Instance A checks four devices: it takes the four locks and waits.
//  3. A is killed. The test releases the rollout row; A's sessions find
//     their client gone and roll back.
//  4. Instance B checks the same devices at once, with an OTA_LOCK_WAIT
//     longer than the TTL.
//
// What must hold: A's keys expire within OTA_LOCK_TTL of the kill (nobody
// renews them) and B acquires every lock by then - its checks answer 200
// with a new task within the TTL plus slack; A's uncommitted tasks are
// gone; each device ends with exactly one active task, B's; no lock key is
// left; the database is intact; no 500.
func TestKilledLockHolder(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const (
		lockTTL = 2 * time.Second
		devices = 4
		slack   = time.Second
	)
	a := w.start(otadOpts{env: map[string]string{"OTA_LOCK_TTL": lockTTL.String(), "OTA_LOCK_WAIT": "500ms"}}, "A")[0]
	b := w.start(otadOpts{env: map[string]string{"OTA_LOCK_TTL": lockTTL.String(), "OTA_LOCK_WAIT": (lockTTL + 2*time.Second).String()}}, "B")[0]
	ca, cb := w.client(a, 30*time.Second), w.client(b, 30*time.Second)
	rc := redisClient(t, w.redisURL)

	model := uniq("cam")
	fw, rollout := w.publish(cb, model, "3.0.0")
	devs := w.register(cb, model, "2.0.0", devices)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold, err := w.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback() }()
	if _, err := hold.ExecContext(ctx, `SELECT 1 FROM rollouts WHERE id = $1 FOR UPDATE`, rollout); err != nil {
		t.Fatal(err)
	}
	var aWG sync.WaitGroup
	// However the test ends, A's checks end first: the row free, A gone.
	defer func() {
		_ = hold.Rollback()
		_ = a.Kill()
		aWG.Wait()
	}()
	for _, d := range devs {
		aWG.Go(func() { ca.check(d) }) // no answer: A dies first
	}
	if err := w.waitLockWaiters(devices, 10*time.Second); err != nil {
		t.Fatalf("A's creations should wait for the rollout row: %v", err)
	}
	var uncommitted int
	if err := w.db.GetContext(ctx, &uncommitted, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
		WHERE s.datname = current_database() AND l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock'
		AND s.wait_event_type = 'Lock'`); err != nil {
		t.Fatal(err)
	}
	// Each of A's creations holds a transaction id: its task row is written
	// and waits, uncommitted, for the rollout's row. Fewer would mean the
	// kill did not catch them with rows to leave behind.
	if uncommitted != devices {
		t.Fatalf("%d of A's sessions hold uncommitted rows at the kill, want %d (one per creation)", uncommitted, devices)
	}
	// A's keys, by their value (an owner id rueidislock draws per lock):
	// B's keys will have the same names.
	aVals := map[string]string{}
	for _, d := range devs {
		v, err := getKey(rc, lockKey(d.id, fw))
		if err != nil || v == "" {
			t.Fatalf("A should hold the lock of %s: %q, %v", d.id, v, err)
		}
		aVals[lockKey(d.id, fw)] = v
	}

	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	aWG.Wait()
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}

	type got struct {
		r     result
		after time.Duration
	}
	bRes := make([]got, devices)
	var bWG sync.WaitGroup
	for i, d := range devs {
		bWG.Go(func() {
			r := cb.check(d)
			bRes[i] = got{r, r.start.Add(r.elapsed).Sub(killedAt)}
		})
	}
	// Watch A's keys go (expire, or be replaced by B's).
	var keysGone time.Duration
	if !waitFor(lockTTL+slack, func() bool {
		for k, v := range aVals {
			if now, err := getKey(rc, k); err != nil || now == v {
				return false
			}
		}
		keysGone = time.Since(killedAt)
		return true
	}) {
		t.Errorf("A's keys outlived OTA_LOCK_TTL (%v) + %v after the kill", lockTTL, slack)
	}
	bWG.Wait()

	var worst time.Duration
	for i, g := range bRes {
		if taskOf(g.r) == "" {
			t.Errorf("B's check of %s after A died holding its lock: want 200 with a task, got %s", devs[i].id, g.r)
		}
		worst = max(worst, g.after)
	}
	if worst > lockTTL+slack {
		t.Errorf("B got A's locks up to %v after the kill, want within OTA_LOCK_TTL (%v) + %v", worst, lockTTL, slack)
	}

	w.assertOneTaskEach(devs, func(d device) []string {
		for i := range devs {
			if devs[i] == d {
				return []string{taskOf(bRes[i].r)}
			}
		}
		return nil
	})
	w.assertIntact()
	w.tally.assertNoServerErrors(t)
	assertNoServerErrorsRecorded(t, b)
	var left map[string]time.Duration
	if !waitFor(lockTTL, func() bool {
		left, err = lockKeys(rc, devs)
		return err == nil && len(left) == 0
	}) {
		t.Errorf("lock keys left after B released them: %v (%v)", left, err)
	}

	t.Logf("FIGURES sigkill: OTA_LOCK_TTL %v; A killed holding %d locks, %d of its sessions with uncommitted rows; its keys gone %s after the kill; "+
		"B (OTA_LOCK_WAIT %v) acquired every lock and answered 200 within %s of the kill; A's rows rolled back, one active task per device; tally: %s",
		lockTTL, devices, uncommitted, ms(keysGone), lockTTL+2*time.Second, ms(worst), w.tally.summary())
}
