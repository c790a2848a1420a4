package faults

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRedisRestart stops the Redis an instance locks with (a private
// redis-server, SIGTERM: it saves its snapshot and exits) for three seconds
// under steady check load, then starts it again on the same port, without
// touching otad.
//
// What must hold:
//   - during the outage, a check that must create its task needs the lock
//     and answers SERVICE_BUSY (503, Retry-After) within OTA_LOCK_WAIT plus
//     slack; a check whose device already has its task is served on the
//     reuse path, which needs no lock: 200 with the same task;
//   - a check parked inside its critical section when Redis dies (the test
//     holds a row lock its insert waits for) loses its lock: rueidislock
//     cancels the lock's context, the statement is cancelled and the
//     transaction rolled back, otad counts a lost lock
//     (ota_lock_failures_total{reason="lost"}) and answers SERVICE_BUSY,
//     while the row is still held; nothing is stored for it. (A locker that
//     never told its holder would leave the check waiting for the row, and
//     then store its task: the test fails.)
//   - /readyz reports Redis down during the outage and ok after;
//   - after the restart the same process serves creations again within
//     2s, by itself;
//   - lock keys the snapshot brought back expire within their TTL, and no
//     lock key is left once the load stops;
//   - no 500; each device ends with exactly one active task, the one it
//     was handed; the database is intact.
func TestRedisRestart(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rs := startRedisServer(t)
	const (
		lockWait = 300 * time.Millisecond
		lockTTL  = 5 * time.Second // the product's default
		outage   = 3 * time.Second
		slack    = time.Second // -race on the test side, two cores, parallel tests
	)
	inst := w.start(otadOpts{redisURL: rs.url(), env: map[string]string{
		"OTA_LOCK_WAIT": lockWait.String(), "OTA_LOCK_TTL": lockTTL.String()}}, "R")[0]
	c := w.client(inst, 15*time.Second)
	rc := redisClient(t, rs.url())

	model := uniq("cam")
	w.publish(c, model, "2.0.0")
	holders := w.register(c, model, "1.0.0", 6) // have their task before the outage
	fresh := w.register(c, model, "1.0.0", 6)   // ask first during the outage
	held := map[string]string{}
	for _, d := range holders {
		held[d.id] = w.mustTask(c, d)
	}

	// A device parked inside its critical section: its insert waits for the
	// rollout row the test holds, under the lock.
	parkedModel := uniq("cam")
	parkedFW, parkedRollout := w.publish(c, parkedModel, "2.0.0")
	parked := w.register(c, parkedModel, "1.0.0", 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold, err := w.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback() }()
	if _, err := hold.ExecContext(ctx, `SELECT 1 FROM rollouts WHERE id = $1 FOR UPDATE`, parkedRollout); err != nil {
		t.Fatal(err)
	}
	parkedRes := make(chan result, 1)
	go func() { parkedRes <- c.check(parked) }()
	if err := w.waitLockWaiters(1, 10*time.Second); err != nil {
		t.Fatalf("parking a check inside its critical section: %v", err)
	}
	if v, err := pttl(rc, lockKey(parked.id, parkedFW)); err != nil || v <= 0 {
		t.Fatalf("the parked check should hold its lock: PTTL %v, %v", v, err)
	}

	lostBefore, err := inst.Metric("ota_lock_failures_total", `reason="lost"`)
	if err != nil {
		t.Fatal(err)
	}
	ready := watchReadiness(c, 100*time.Millisecond)
	load := startPolling(c, holders, 50*time.Millisecond)
	time.Sleep(time.Second)

	// The lock keys Redis holds as it stops (the parked check's), by value.
	all := append([]device{parked}, append(holders, fresh...)...)
	atStop, err := lockKeys(rc, all)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	for k := range atStop {
		if values[k], err = getKey(rc, k); err != nil {
			t.Fatal(err)
		}
	}
	stopAt := time.Now()
	took, err := rs.stop()
	if err != nil {
		t.Fatal(err)
	}
	downAt := time.Now()
	if !rs.snapshotExists() {
		t.Errorf("redis-server left no snapshot at SIGTERM: the restart would not bring keys back")
	}
	freshLoad := startPolling(c, fresh, 50*time.Millisecond)
	time.Sleep(outage)
	// The parked check must have answered by now, its row still held.
	var pr result
	select {
	case pr = <-parkedRes:
	default:
		t.Fatalf("the parked check, its lock lost with Redis %v ago, is still waiting in its critical section", time.Since(downAt))
	}
	if err := rs.start(); err != nil {
		t.Fatalf("restarting redis-server on the same port: %v", err)
	}
	upAt := time.Now()

	// Keys the snapshot brought back (same key, same owner value) keep
	// their absolute expiry: valid for at most the TTL when Redis stopped,
	// minus the outage.
	maxLeft := lockTTL - upAt.Sub(stopAt) + 100*time.Millisecond
	restored := map[string]time.Duration{}
	for k, v := range values {
		now, err := getKey(rc, k)
		if err != nil {
			t.Fatal(err)
		}
		if now != v {
			continue // expired meanwhile, or a new holder's
		}
		left, err := pttl(rc, k)
		if err != nil {
			t.Fatal(err)
		}
		restored[k] = left
		if left <= 0 || left > maxLeft {
			t.Errorf("lock key %s came back with PTTL %v, want within (0, %v]: the TTL minus the outage", k, left, maxLeft)
		}
	}

	// The load goes on until every fresh device has its task, at most 5s.
	recovered := waitFor(5*time.Second, func() bool {
		for _, d := range fresh {
			if phaseOf(freshLoad.of(d.id), upAt, time.Now().Add(time.Hour)).ok == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond)
	load.halt()
	freshLoad.halt()
	readiness := ready.halt()
	if !recovered {
		t.Errorf("fresh devices still without their task 5s after Redis came back")
	}
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}

	// During the outage.
	var holdersOut, freshOut phase
	for _, d := range holders {
		holdersOut = addPhase(holdersOut, phaseOf(load.of(d.id), downAt, upAt))
		for _, r := range load.of(d.id) {
			if id := taskOf(r); id != "" && id != held[d.id] {
				t.Errorf("device %s was handed task %s, it has %s", d.id, id, held[d.id])
			}
		}
	}
	for _, d := range fresh {
		freshOut = addPhase(freshOut, phaseOf(freshLoad.of(d.id), downAt, upAt))
	}
	if holdersOut.n == 0 || holdersOut.ok != holdersOut.n {
		t.Errorf("devices that have their task, Redis down: %v; want every one served on the reuse path (200)", holdersOut)
	}
	if freshOut.n == 0 || freshOut.busy != freshOut.n {
		t.Errorf("devices that need their task created, Redis down: %v; want every one SERVICE_BUSY", freshOut)
	}
	if freshOut.maxBusy > lockWait+slack {
		t.Errorf("slowest SERVICE_BUSY during the outage took %v, want at most OTA_LOCK_WAIT (%v) + %v", freshOut.maxBusy, lockWait, slack)
	}

	// Recovery.
	var worst time.Duration
	for _, d := range fresh {
		p := phaseOf(freshLoad.of(d.id), upAt, time.Now().Add(time.Hour))
		if !p.firstOK.IsZero() {
			worst = max(worst, p.firstOK.Sub(upAt))
		}
	}
	if worst > 2*time.Second {
		t.Errorf("creations served again %v after Redis came back, want within 2s", worst)
	}
	down, up := readinessAround(readiness, "redis", downAt, upAt)
	readyAfter := time.Duration(-1)
	if down == nil {
		t.Errorf("/readyz never reported Redis unavailable during the outage")
	}
	if up == nil {
		t.Errorf("/readyz never answered 200 after Redis came back")
	} else {
		readyAfter = up.start.Add(up.elapsed).Sub(upAt)
		if readyAfter > 2*time.Second {
			t.Errorf("/readyz ok %v after Redis came back, want within 2s", readyAfter)
		}
	}

	// The parked check: SERVICE_BUSY, a lost lock counted, nothing stored.
	if !pr.busy() || !wholeSeconds(pr.retryAfter) {
		t.Errorf("parked check (its lock lost with Redis): want 503 SERVICE_BUSY with Retry-After, got %s", pr)
	}
	if parkedTasks := w.tasksOf([]device{parked})[parked.id]; len(parkedTasks) != 0 {
		t.Errorf("parked check lost its lock, yet the device has tasks %+v", parkedTasks)
	}
	lostAfter, err := inst.Metric("ota_lock_failures_total", `reason="lost"`)
	if err != nil {
		t.Fatal(err)
	}
	if lostAfter-lostBefore != 1 {
		t.Errorf("otad counted %v lost locks, want 1 (the parked check's)", lostAfter-lostBefore)
	}
	// Its lock key may have come back with the snapshot: until it expires
	// (within the TTL it had), the device is told SERVICE_BUSY.
	var parkedTask string
	parkedWait := time.Now()
	if !waitFor(maxLeft+time.Second, func() bool {
		r := c.check(parked)
		parkedTask = taskOf(r)
		return parkedTask != "" || !r.busy()
	}) || parkedTask == "" {
		t.Fatalf("the parked device got no task within %v of the restart", maxLeft+time.Second)
	}
	parkedAfter := time.Since(parkedWait)

	// Nothing duplicated, nothing lost, no half-written row, no 500.
	w.assertOneTaskEach(holders, func(d device) []string { return []string{held[d.id]} })
	w.assertOneTaskEach(fresh, func(d device) []string { return handedOut(freshLoad.of(d.id)) })
	w.assertOneTaskEach([]device{parked}, func(device) []string { return []string{parkedTask} })
	w.assertIntact()
	w.tally.assertNoServerErrors(t)
	assertNoServerErrorsRecorded(t, inst)
	if inst.Exited() || strings.Count(inst.Log(), `"msg":"serving"`) != 1 {
		t.Errorf("otad should have served throughout in one process, without a restart")
	}

	// No lock key outlives its TTL: once the load stopped, none is left.
	var left map[string]time.Duration
	if !waitFor(lockTTL+500*time.Millisecond, func() bool {
		left, err = lockKeys(rc, all)
		return err == nil && len(left) == 0
	}) {
		t.Errorf("lock keys still there %v after the load stopped: %v (%v)", lockTTL+500*time.Millisecond, left, err)
	}

	t.Logf("FIGURES redis-restart: SIGTERM to exit %s; outage %s; during it: has-task %v; needs-lock %v; "+
		"lock keys at the stop %d, restored %d (PTTL %v); parked critical section: answered %d %s %s after SIGTERM (lost locks %v), got its task %s later; "+
		"creations served again %s after restart; /readyz: down seen=%v, ok %s after restart; tally: %s",
		ms(took), ms(upAt.Sub(downAt)), holdersOut, freshOut, len(values), len(restored), restored, pr.status, pr.code,
		ms(pr.start.Add(pr.elapsed).Sub(stopAt)), lostAfter-lostBefore, ms(parkedAfter), ms(worst), down != nil, ms(readyAfter), w.tally.summary())
}

// addPhase sums two phases' counts and maxima.
func addPhase(a, b phase) phase {
	a.n += b.n
	a.ok += b.ok
	a.busy += b.busy
	a.other += b.other
	a.maxBusy = max(a.maxBusy, b.maxBusy)
	a.maxOK = max(a.maxOK, b.maxOK)
	if a.firstOK.IsZero() || (!b.firstOK.IsZero() && b.firstOK.Before(a.firstOK)) {
		a.firstOK = b.firstOK
	}
	return a
}

// handedOut lists the task ids of the 200 answers among rs.
func handedOut(rs []result) []string {
	var ids []string
	for _, r := range rs {
		if id := taskOf(r); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}
