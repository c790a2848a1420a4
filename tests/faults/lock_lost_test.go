package faults

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"
)

// TestLockLostMidCriticalSection makes an instance's critical section
// outlast its lock while another instance takes the lock.
//
// Three devices each have a pending task for firmware 1.1.0; 1.2.0 is then
// rolled out, so their next check must supersede it: cancel the pending
// task and create one for 1.2.0, under the lock {device}:{1.2.0}.
//  1. The test locks the three pending tasks' rows (SELECT … FOR UPDATE).
//  2. Instance A checks the three devices: each takes its lock in Redis and,
//     inside the critical section, waits in Postgres for its task's row.
//  3. A is frozen with SIGSTOP for longer than OTA_LOCK_TTL: it cannot
//     extend its locks, and the keys expire.
//  4. Instance B checks the three devices: it takes the locks, and its
//     critical sections wait for the same rows.
//  5. A is thawed with SIGCONT while the rows are still held: its critical
//     sections are still inside Postgres, holding locks B now has.
//  6. Once A has answered, the test lets the rows go: B supersedes and
//     creates the 1.2.0 tasks.
//
// The designed outcome, asserted: on thawing, rueidislock finds A's keys
// taken and cancels the lock's context; A's waiting statements are
// cancelled and its transactions rolled back, A counts three lost locks
// (ota_lock_failures_total{reason="lost"}) and answers SERVICE_BUSY (the
// fallback finds no 1.2.0 task to hand out: B's cannot exist yet). Nothing
// of A's is stored; each device ends with its cancelled 1.1.0 task and B's
// one 1.2.0 task; no 500; the database intact. A locker that never tells
// its holder of the loss leaves A's sections waiting on the rows, and A
// does not answer: the test fails.
func TestLockLostMidCriticalSection(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const (
		lockTTL  = time.Second
		lockWait = 500 * time.Millisecond
		devices  = 3
		// How long A may take to learn of the loss after SIGCONT: its
		// overdue extension runs at once, one round trip to Redis, then
		// the statement's cancellation, one to Postgres.
		answerWithin = 5 * time.Second
	)
	insts := w.start(otadOpts{env: map[string]string{
		"OTA_LOCK_TTL": lockTTL.String(), "OTA_LOCK_WAIT": lockWait.String()}}, "A", "B")
	a, b := w.client(insts[0], 30*time.Second), w.client(insts[1], 30*time.Second)
	rc := redisClient(t, w.redisURL)

	model := uniq("cam")
	w.publish(b, model, "1.1.0")
	devs := w.register(b, model, "1.0.0", devices)
	old := make([]string, devices)
	for i, d := range devs {
		old[i] = w.mustTask(b, d)
	}
	// Published through A: A's catalog cache learns of it at once, B's by
	// notification (within 1s, long before B checks).
	fw2, _ := w.publish(a, model, "1.2.0")
	lostBefore, err := insts[0].Metric("ota_lock_failures_total", `reason="lost"`)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold, err := w.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback() }()
	if _, err := hold.ExecContext(ctx, `SELECT 1 FROM tasks WHERE id = ANY($1) FOR UPDATE`, pq.Array(old)); err != nil {
		t.Fatal(err)
	}

	checkAll := func(c *client) ([]result, *sync.WaitGroup, func() int) {
		res := make([]result, devices)
		var (
			wg sync.WaitGroup
			mu sync.Mutex
			n  int
		)
		for i, d := range devs {
			wg.Go(func() {
				r := c.check(d)
				mu.Lock()
				res[i] = r
				n++
				mu.Unlock()
			})
		}
		return res, &wg, func() int { mu.Lock(); defer mu.Unlock(); return n }
	}
	aRes, aWG, aAnswered := checkAll(a)
	var bWG *sync.WaitGroup
	// However the test ends, the checks end first: A running, the rows free.
	defer func() {
		_ = insts[0].Resume()
		_ = hold.Rollback()
		aWG.Wait()
		if bWG != nil {
			bWG.Wait()
		}
	}()
	if err := w.waitLockWaiters(devices, 10*time.Second); err != nil {
		t.Fatalf("A's critical sections should wait for the rows the test holds: %v", err)
	}
	for _, d := range devs {
		if v, err := pttl(rc, lockKey(d.id, fw2)); err != nil || v <= 0 {
			t.Fatalf("A should hold the lock of %s inside its critical section: PTTL %v, %v", d.id, v, err)
		}
	}

	if err := insts[0].Pause(); err != nil {
		t.Fatal(err)
	}
	frozenAt := time.Now()
	// A's keys expire: nobody extends them.
	if !waitFor(lockTTL+2*time.Second, func() bool {
		for _, d := range devs {
			if v, err := pttl(rc, lockKey(d.id, fw2)); err != nil || v != -2 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("A's lock keys still exist %v after it was frozen (TTL %v)", time.Since(frozenAt), lockTTL)
	}
	expiredAfter := time.Since(frozenAt)

	// B takes the locks; its critical sections wait for the same rows.
	bRes, bw, bAnswered := checkAll(b)
	bWG = bw
	if err := w.waitLockWaiters(2*devices, 10*time.Second); err != nil {
		t.Fatalf("B's critical sections should wait for the rows too: %v", err)
	}
	for _, d := range devs {
		if v, err := pttl(rc, lockKey(d.id, fw2)); err != nil || v <= 0 {
			t.Fatalf("B should hold the lock of %s: PTTL %v, %v", d.id, v, err)
		}
	}
	if n := aAnswered(); n != 0 {
		t.Fatalf("A answered %d checks while frozen", n)
	}

	frozenFor := time.Since(frozenAt)
	if err := insts[0].Resume(); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	if !waitFor(answerWithin, func() bool { return aAnswered() == devices }) {
		t.Fatalf("A answered %d of its %d checks within %v of SIGCONT while the rows were still held: "+
			"its critical sections were not told that their locks were lost", aAnswered(), devices, answerWithin)
	}
	answeredIn := time.Since(resumedAt)
	for i, r := range aRes {
		if !r.busy() || !wholeSeconds(r.retryAfter) {
			t.Errorf("A's check of %s, its lock lost mid-section: want 503 SERVICE_BUSY with Retry-After, got %s", devs[i].id, r)
		}
	}
	lostAfter, err := insts[0].Metric("ota_lock_failures_total", `reason="lost"`)
	if err != nil {
		t.Fatal(err)
	}
	if lost := lostAfter - lostBefore; lost != devices {
		t.Errorf("A counted %v lost locks, want %d", lost, devices)
	}
	if n := bAnswered(); n != 0 {
		t.Fatalf("B answered %d checks before the rows were let go", n)
	}
	var fw2Tasks int
	if err := w.db.GetContext(ctx, &fw2Tasks, `SELECT count(*) FROM tasks WHERE firmware_id = $1`, fw2); err != nil {
		t.Fatal(err)
	}
	if fw2Tasks != 0 {
		t.Fatalf("%d tasks for 1.2.0 stored while only A had finished: A committed without its lock", fw2Tasks)
	}

	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}
	bWG.Wait()
	bTasks := make([]string, devices)
	for i, r := range bRes {
		if bTasks[i] = taskOf(r); bTasks[i] == "" {
			t.Fatalf("B's check of %s: want the new task, got %s", devs[i].id, r)
		}
	}

	// In the database: the cancelled old task and B's, nothing of A's.
	tasks := w.tasksOf(devs)
	for i, d := range devs {
		ts := tasks[d.id]
		active := 0
		for _, tk := range ts {
			if isActive(tk.Status) {
				active++
				if tk.ID != bTasks[i] || tk.FirmwareID != fw2 {
					t.Errorf("device %s: active task %s (firmware %s), want B's %s", d.id, tk.ID, tk.FirmwareID, bTasks[i])
				}
			} else if tk.ID != old[i] || tk.Status != "cancelled" {
				t.Errorf("device %s: unexpected finished task %+v", d.id, tk)
			}
		}
		if active != 1 || len(ts) != 2 {
			t.Errorf("device %s: tasks %+v, want its cancelled old task and B's one active task", d.id, ts)
		}
	}
	w.assertIntact()
	w.tally.assertNoServerErrors(t)
	assertNoServerErrorsRecorded(t, insts...)

	t.Logf("FIGURES lock-lost: OTA_LOCK_TTL %v; A frozen (SIGSTOP) inside %d critical sections for %s; its keys expired %s after the freeze; "+
		"B took the locks; after SIGCONT A answered %d × SERVICE_BUSY within %s and counted %v lost locks; then B created the tasks; tally: %s",
		lockTTL, devices, ms(frozenFor), ms(expiredAfter), devices, ms(answeredIn), lostAfter-lostBefore, w.tally.summary())
}
