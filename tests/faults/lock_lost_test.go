package faults

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"
)

// TestLockLostMidCriticalSection makes an instance's critical section
// outlast its lock, and lets another instance take the lock and create the
// task meanwhile.
//
// Three devices each have a pending task for firmware 1.1.0; 1.2.0 is then
// rolled out, so their next check must supersede it: cancel the pending
// task and create one for 1.2.0, under the lock {device}:{1.2.0}.
//  1. The test locks the three pending tasks' rows (SELECT … FOR UPDATE).
//  2. Instance A checks the three devices: each takes its lock in Redis and,
//     inside the critical section, waits in Postgres for its task's row.
//  3. A is frozen with SIGSTOP for longer than OTA_LOCK_TTL: it cannot
//     extend its locks, and the keys expire.
//  4. The test settles the rows it holds (cancels the pending tasks, as a
//     supersede elsewhere would) and commits: A's waiting statements
//     complete in Postgres while A is still frozen.
//  5. Instance B checks the three devices: it takes the locks and creates
//     the 1.2.0 tasks.
//  6. A is thawed with SIGCONT and finishes its critical sections, holding
//     locks it no longer has.
//
// What must hold: A's transactions commit no second active task (the
// partial unique index has the last word whatever the lock did); A answers
// SERVICE_BUSY or B's task, never 500; each device has exactly its
// cancelled 1.1.0 task and B's 1.2.0 task; the database is intact.
func TestLockLostMidCriticalSection(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const (
		lockTTL  = time.Second
		lockWait = 500 * time.Millisecond
		devices  = 3
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

	aRes := make([]result, devices)
	var (
		aWG      sync.WaitGroup
		aMu      sync.Mutex
		answered int
	)
	for i, d := range devs {
		aWG.Go(func() {
			r := a.check(d)
			aMu.Lock()
			aRes[i] = r
			answered++
			aMu.Unlock()
		})
	}
	// However the test ends, A's checks end first: A running, the rows free.
	defer func() {
		_ = insts[0].Resume()
		_ = hold.Rollback()
		aWG.Wait()
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
	var expiredAfter time.Duration
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
	expiredAfter = time.Since(frozenAt)

	if _, err := hold.ExecContext(ctx, `UPDATE tasks SET status = 'cancelled', error_code = 'SUPERSEDED',
		error_message = 'superseded (fault test)', updated_at = now() WHERE id = ANY($1)`, pq.Array(old)); err != nil {
		t.Fatal(err)
	}
	if err := hold.Commit(); err != nil {
		t.Fatal(err)
	}

	bTasks := make([]string, devices)
	var bWorst time.Duration
	for i, d := range devs {
		r := b.check(d)
		if bTasks[i] = taskOf(r); bTasks[i] == "" {
			t.Fatalf("B's check of %s while A is frozen: want a new task, got %s", d.id, r)
		}
		bWorst = max(bWorst, r.elapsed)
	}
	// A is still frozen; its checks have not answered.
	aMu.Lock()
	early := answered
	aMu.Unlock()
	if early != 0 {
		t.Fatalf("A answered %d checks while frozen", early)
	}

	frozenFor := time.Since(frozenAt)
	if err := insts[0].Resume(); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	aWG.Wait()
	answeredIn := time.Since(resumedAt)

	same, busy := 0, 0
	for i, r := range aRes {
		switch {
		case r.status == http.StatusOK && taskOf(r) == bTasks[i]:
			same++
		case r.busy():
			busy++
		default:
			t.Errorf("A's check of %s, its lock lost mid-section: want SERVICE_BUSY or B's task %s, got %s", devs[i].id, bTasks[i], r)
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
	lost, err := insts[0].Metric("ota_lock_failures_total", `reason="lost"`)
	if err != nil {
		t.Fatal(err)
	}

	t.Logf("FIGURES lock-lost: OTA_LOCK_TTL %v; A frozen (SIGSTOP) inside %d critical sections for %s; its keys expired %s after the freeze; "+
		"B took the locks and created the tasks (slowest check %s); after SIGCONT A answered within %s: %d with B's task, %d SERVICE_BUSY; "+
		"A counted %v lost locks; active tasks per device: 1; tally: %s",
		lockTTL, devices, ms(frozenFor), ms(expiredAfter), ms(bWorst), ms(answeredIn), same, busy, lost, w.tally.summary())
}
