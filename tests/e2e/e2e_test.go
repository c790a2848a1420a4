package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/tests/testenv"
)

// TestE2E runs the scenarios in parallel, each against its own instances
// and database, then checks every response they recorded against the
// OpenAPI document. The scenarios are subtests of one group so that the
// conformance check runs after all of them have finished.
func TestE2E(t *testing.T) {
	t.Run("scenarios", func(t *testing.T) {
		t.Run("Walkthrough", testWalkthrough)
		t.Run("ConcurrentDuplicateChecks", testConcurrentDuplicateChecks)
		t.Run("RedisOutage", testRedisOutage)
		t.Run("LockHeldElsewhere", testLockHeldElsewhere)
		t.Run("RequestIDsAndErrors", testRequestIDsAndErrors)
		t.Run("GracefulShutdown", testGracefulShutdown)
		t.Run("RateLimits", testRateLimits)
		t.Run("Linearizable", testLinearizable)
	})
	t.Run("OpenAPIConformance", testOpenAPIConformance)
}

// noRateLimit turns the per-device request budget off.
var noRateLimit = map[string]string{"OTA_DEVICE_RATE_LIMIT": "0"}

var activeStatuses = pq.Array([]string{"pending", "downloading", "downloaded", "installing"})

// testWalkthrough follows one device through a whole update on two replicas
// (A and B) sharing Postgres and Redis, alternating between them at every
// step: whatever replica a device reaches, it sees the same task and the
// same state, and every event rule holds across replicas.
func testWalkthrough(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	insts := e.start(t, instanceConfig{}, "A", "B")
	a, b := newClient(t, insts[0]), newClient(t, insts[1])
	admin := e.adminToken
	model, dev := uniq("cam"), uniq("dev")
	begin := time.Now()

	token := a.registerDevice(t, admin, dev, model, "1.0.0")
	fwID := b.publishFirmware(t, admin, model, "2.0.0")
	rolloutID := a.startRollout(t, admin, fwID, 100)

	// The first check creates a pending task for the firmware.
	r := a.do(t, checkCall(dev, token, model, "1.0.0"))
	wantStatus(t, r, http.StatusOK)
	first := decode[checkJSON](t, r)
	if !first.UpdateAvailable || first.Task == nil {
		t.Fatalf("check on A: want an update with a task, got %s", r)
	}
	task := *first.Task
	if task.Status != "pending" || task.Progress != 0 || task.Attempt != 1 ||
		task.Firmware.ID != fwID || task.Firmware.Version != "2.0.0" || task.Firmware.SizeBytes != 4<<20 {
		t.Fatalf("check on A: want a fresh pending task for firmware %s 2.0.0, got %s", fwID, r)
	}
	if first.PollAfterSeconds != 3600 {
		t.Errorf("poll_after_seconds = %d, want 3600 (OTA_POLL_INTERVAL's default, 1h)", first.PollAfterSeconds)
	}

	// The other replica hands out the same task.
	r = b.do(t, checkCall(dev, token, model, "1.0.0"))
	wantStatus(t, r, http.StatusOK)
	if again := decode[checkJSON](t, r); !again.UpdateAvailable || again.Task == nil || *again.Task != task {
		t.Fatalf("check on B: want the same task %+v, got %s", task, r)
	}
	for _, c := range []*client{a, b} {
		r = c.do(t, getTaskCall(dev, token, task.ID))
		wantStatus(t, r, http.StatusOK)
		if got := decode[taskJSON](t, r); got != task {
			t.Fatalf("GET task on %s = %+v, want %+v", c.inst.Name, got, task)
		}
	}

	// apply sends an event that must be applied, and checks the task after it.
	apply := func(c *client, eventID, status string, progress int, wantProgress int) taskJSON {
		t.Helper()
		r := c.do(t, eventCall(dev, token, task.ID, eventID, status, progress))
		wantStatus(t, r, http.StatusOK)
		got := decode[taskJSON](t, r)
		if got.ID != task.ID || got.Status != status || got.Progress != wantProgress || got.Attempt != 1 {
			t.Fatalf("event %s (%s %d) on %s: want %s/%d, got %s", eventID, status, progress, c.inst.Name, status, wantProgress, r)
		}
		return got
	}
	// unchanged asserts that both replicas still see the task as want.
	unchanged := func(want taskJSON, after string) {
		t.Helper()
		for _, c := range []*client{a, b} {
			r := c.do(t, getTaskCall(dev, token, task.ID))
			wantStatus(t, r, http.StatusOK)
			if got := decode[taskJSON](t, r); got != want {
				t.Fatalf("after %s, GET task on %s = %+v, want it unchanged: %+v", after, c.inst.Name, got, want)
			}
		}
	}
	// refused sends an event that must be refused, twice: a refused event
	// was not applied, so its retry is not a replay and is refused again.
	refused := func(c *client, eventID, status string, progress int, code string, state taskJSON) {
		t.Helper()
		for range 2 {
			r := c.do(t, eventCall(dev, token, task.ID, eventID, status, progress))
			wantError(t, r, http.StatusConflict, code)
		}
		unchanged(state, "refused event "+eventID)
	}

	apply(a, "ev-1", "downloading", 10, 10)
	apply(b, "ev-2", "downloading", 50, 50)
	downloaded := apply(a, "ev-3", "downloaded", -1, 0) // a new status starts its progress anew

	// Replays, on the other replica: 200 with the task as it is now, and
	// nothing changes (not even updated_at) - even for an event whose
	// status the task has moved past.
	for _, ev := range []struct {
		id, status string
		progress   int
	}{{"ev-1", "downloading", 10}, {"ev-3", "downloaded", -1}} {
		r = b.do(t, eventCall(dev, token, task.ID, ev.id, ev.status, ev.progress))
		wantStatus(t, r, http.StatusOK)
		if got := decode[taskJSON](t, r); got != downloaded {
			t.Fatalf("replay of %s: want the task unchanged %+v, got %s", ev.id, downloaded, r)
		}
	}
	unchanged(downloaded, "replays")

	// The same event id with another body is a conflict.
	r = a.do(t, eventCall(dev, token, task.ID, "ev-1", "downloading", 11))
	wantError(t, r, http.StatusConflict, "IDEMPOTENCY_CONFLICT")
	unchanged(downloaded, "IDEMPOTENCY_CONFLICT")

	installing := apply(b, "ev-4", "installing", 20, 20)
	refused(a, "ev-5", "downloading", 60, "INVALID_TRANSITION", installing) // backwards
	refused(b, "ev-6", "installing", 10, "INVALID_TRANSITION", installing)  // progress down within a status

	succeeded := apply(a, "ev-7", "succeeded", -1, 100)
	// The same final status under a new event id: 200, nothing changes.
	r = b.do(t, eventCall(dev, token, task.ID, "ev-8", "succeeded", 100))
	wantStatus(t, r, http.StatusOK)
	if got := decode[taskJSON](t, r); got != succeeded {
		t.Fatalf("succeeded again: want the task unchanged %+v, got %s", succeeded, r)
	}
	refused(a, "ev-9", "failed", -1, "TASK_FINISHED", succeeded)
	refused(b, "ev-10", "installing", 90, "TASK_FINISHED", succeeded)

	// updated_at moved forward with every applied event.
	var last time.Time
	for i, tk := range []taskJSON{task, downloaded, installing, succeeded} {
		at, err := time.Parse(time.RFC3339Nano, tk.UpdatedAt)
		if err != nil || at.Before(last) {
			t.Errorf("updated_at #%d = %q (%v), want RFC 3339 and not before %v", i, tk.UpdatedAt, err, last)
		}
		last = at
	}

	// The device rebooted into 2.0.0: nothing more to offer.
	r = b.do(t, checkCall(dev, token, model, "2.0.0"))
	wantStatus(t, r, http.StatusOK)
	if done := decode[checkJSON](t, r); done.UpdateAvailable || done.Task != nil {
		t.Fatalf("check with the new version: want no update, got %s", r)
	}

	// The operator sees the device's last report (docs/DOMAIN.md: it may be
	// written behind, visible within 1 s).
	var view deviceJSON
	deadline := time.Now().Add(1500 * time.Millisecond)
	for {
		r = a.do(t, call{method: http.MethodGet, path: "/api/v1/admin/devices/" + dev, token: admin})
		wantStatus(t, r, http.StatusOK)
		view = decode[deviceJSON](t, r)
		if view.CurrentVersion != nil && *view.CurrentVersion == "2.0.0" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if view.DeviceID != dev || view.Model != model || view.CurrentVersion == nil || *view.CurrentVersion != "2.0.0" {
		t.Fatalf("GET device: want %s (%s) at 2.0.0, got %s", dev, model, r)
	}
	if view.ActiveTask != nil {
		t.Errorf("GET device: the task succeeded, want no active task, got %+v", view.ActiveTask)
	}
	if view.LastSeenAt == nil {
		t.Fatalf("GET device: last_seen_at is null after checks: %s", r)
	}
	seen, err := time.Parse(time.RFC3339Nano, *view.LastSeenAt)
	if err != nil || seen.Before(begin.Add(-time.Second)) || seen.After(time.Now().Add(time.Second)) {
		t.Errorf("GET device: last_seen_at %q (%v), want a time during this test (from %v)", *view.LastSeenAt, err, begin)
	}

	// The rollout counts the success; the task list shows it as operators see it.
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/admin/rollouts/" + rolloutID, token: admin})
	wantStatus(t, r, http.StatusOK)
	if ro := decode[rolloutJSON](t, r); ro.Stats == nil || ro.Stats.Succeeded != 1 ||
		ro.Stats.Pending+ro.Stats.Downloading+ro.Stats.Downloaded+ro.Stats.Installing+ro.Stats.Failed+ro.Stats.Cancelled != 0 {
		t.Errorf("GET rollout: want stats with exactly one succeeded task, got %s", r)
	}
	r = a.do(t, call{method: http.MethodGet, path: "/api/v1/admin/tasks?device_id=" + dev, token: admin})
	wantStatus(t, r, http.StatusOK)
	page := decode[struct {
		Items []adminTaskJSON `json:"items"`
		Next  *string         `json:"next"`
	}](t, r)
	if len(page.Items) != 1 || page.Next != nil {
		t.Fatalf("GET tasks?device_id: want one task and no next page, got %s", r)
	}
	if it := page.Items[0]; it.taskJSON != succeeded || it.ActionID < 1 || it.DeviceID != dev ||
		it.FirmwareID != fwID || it.RolloutID != rolloutID || it.ErrorCode != nil {
		t.Errorf("GET tasks?device_id: want the succeeded task of %s in rollout %s, got %+v", dev, rolloutID, it)
	}

	// And the database holds exactly that.
	var rows []struct {
		ID       string `db:"id"`
		Status   string `db:"status"`
		Progress int    `db:"progress"`
	}
	if err := e.db.SelectContext(ctxTimeout(t), &rows, `SELECT id, status, progress FROM tasks WHERE device_id = $1`, dev); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ID != task.ID || rows[0].Status != "succeeded" || rows[0].Progress != 100 {
		t.Errorf("tasks of %s in the database = %+v, want one succeeded task %s", dev, rows, task.ID)
	}
}

// burst runs n calls at once: every goroutine is started and waiting before
// a barrier releases them together.
func burst(n int, fn func(i int) (*response, error)) ([]*response, []error) {
	rs, errs := make([]*response, n), make([]error, n)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			rs[i], errs[i] = fn(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return rs, errs
}

// otadPoolSize is otad's Postgres pool (postgres.DefaultMaxOpenConns).
const otadPoolSize = 10

// gatedBurst is burst with the checks held at the gate of the tasks table
// until both replicas' whole database pools are blocked there, then let go
// at once. Without the gate the first check usually creates the task
// before the others even look (they queue behind each other on the
// device's row, where each check records the device's report), and the
// duplicates merely read it; with it, a score of checks on both replicas
// find no task and go for the creation together: whatever a replica does
// in-process (it coalesces duplicate creations), the two replicas race for
// the lock.
func gatedBurst(t *testing.T, e *env, n int, fn func(i int) (*response, error)) ([]*response, []error) {
	t.Helper()
	g := closeTasksGate(t, e)
	var (
		rs   []*response
		errs []error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		rs, errs = burst(n, fn)
	}()
	err := g.waitBlocked(t, min(n, 2*otadPoolSize))
	g.open(t)
	<-done // the calls report on t: they must end before the test may
	if err != nil {
		t.Fatal(err)
	}
	return rs, errs
}

// tasksGate holds an ACCESS EXCLUSIVE lock on the tasks table: every
// request that reads or writes tasks waits in Postgres until it opens.
type tasksGate struct {
	e  *env
	tx *sqlx.Tx
}

func closeTasksGate(t *testing.T, e *env) *tasksGate {
	t.Helper()
	ctx := ctxTimeout(t)
	tx, err := e.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	if _, err := tx.ExecContext(ctx, `LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return &tasksGate{e: e, tx: tx}
}

// waitBlocked waits until n of otad's database sessions wait at the gate,
// for at most 10s.
func (g *tasksGate) waitBlocked(t *testing.T, n int) error {
	ctx := ctxTimeout(t)
	waiting := 0
	for deadline := time.Now().Add(10 * time.Second); waiting < n; time.Sleep(10 * time.Millisecond) {
		if err := g.e.db.GetContext(ctx, &waiting, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'relation'
			AND pid <> pg_backend_pid()`); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d requests reached the tasks table within 10s", waiting, n)
		}
	}
	return nil
}

func (g *tasksGate) open(t *testing.T) {
	t.Helper()
	if err := g.tx.Rollback(); err != nil {
		t.Fatalf("opening the gate: %v", err)
	}
}

// taskIDs collects the task id of each successful check, reporting any
// other answer.
func taskIDs(t *testing.T, what string, rs []*response, errs []error) []string {
	t.Helper()
	ids := make([]string, len(rs))
	for i, r := range rs {
		if errs[i] != nil {
			t.Errorf("%s #%d: %v", what, i, errs[i])
			continue
		}
		if r.status != http.StatusOK {
			t.Errorf("%s #%d: want 200, got %s", what, i, r)
			continue
		}
		var c checkJSON
		if err := json.Unmarshal(r.body, &c); err != nil || !c.UpdateAvailable || c.Task == nil || c.Task.Status != "pending" {
			t.Errorf("%s #%d: want an update with a pending task, got %s (%v)", what, i, r, err)
			continue
		}
		ids[i] = c.Task.ID
	}
	return ids
}

// testConcurrentDuplicateChecks: duplicate checks racing on two replicas
// converge on one task (check rule 7, backed by rule 2's index).
//
// The point is convergence, so what would legitimately refuse some of the
// duplicates is relaxed: the lock wait is raised to 5s (callers queueing on
// one lock on a 2-core machine may wait longer than the 500ms default and
// get SERVICE_BUSY, which RedisOutage covers), and the per-device rate limit
// is off (100 polls at once are far over a device's budget; RateLimits
// covers it).
func testConcurrentDuplicateChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	insts := e.start(t, instanceConfig{lockWait: "5s", env: noRateLimit}, "A", "B")
	a, b := newClient(t, insts[0]), newClient(t, insts[1])
	admin := e.adminToken
	model := uniq("cam")
	fwID := a.publishFirmware(t, admin, model, "3.1.0")
	a.startRollout(t, admin, fwID, 100)
	ctx := ctxTimeout(t)

	// One device, 100 checks at once, 50 on each replica. The connections
	// are opened beforehand, so that the checks reach the replicas together
	// instead of queueing behind TCP handshakes.
	dev := uniq("dev")
	token := a.registerDevice(t, admin, dev, model, "3.0.0")
	a.warm(t, 100)
	b.warm(t, 100)
	rs, errs := gatedBurst(t, e, 100, func(i int) (*response, error) {
		c := a
		if i%2 == 1 {
			c = b
		}
		return c.try(t, checkCall(dev, token, model, "3.0.0"))
	})
	ids := taskIDs(t, "duplicate check", rs, errs)
	distinct := map[string]int{}
	for _, id := range ids {
		distinct[id]++
	}
	if len(distinct) != 1 || ids[0] == "" {
		t.Fatalf("100 duplicate checks of one device: want one task id, got %v", distinct)
	}
	var counts struct {
		Total  int `db:"total"`
		Active int `db:"active"`
		// the id of the active task
		ID string `db:"id"`
	}
	if err := e.db.GetContext(ctx, &counts, `SELECT count(*) AS total,
			count(*) FILTER (WHERE status = ANY($2)) AS active,
			coalesce(max(id::text) FILTER (WHERE status = ANY($2)), '') AS id
		FROM tasks WHERE device_id = $1`, dev, activeStatuses); err != nil {
		t.Fatal(err)
	}
	if counts.Total != 1 || counts.Active != 1 || counts.ID != ids[0] {
		t.Fatalf("database after 100 duplicate checks: %+v, want exactly one task, active, %s", counts, ids[0])
	}

	logLockUse(t, "100 checks of one device", a, b)

	// Twenty devices at once, ten duplicate checks each, split over both
	// replicas: not luck.
	const devices, dups = 20, 10
	devs, tokens := make([]string, devices), make([]string, devices)
	for i := range devices {
		devs[i] = uniq("dev")
		tokens[i] = []*client{a, b}[i%2].registerDevice(t, admin, devs[i], model, "3.0.0")
	}
	a.warm(t, devices*dups/2)
	b.warm(t, devices*dups/2)
	rs, errs = gatedBurst(t, e, devices*dups, func(i int) (*response, error) {
		d := i % devices
		c := []*client{a, b}[(i/devices)%2]
		return c.try(t, checkCall(devs[d], tokens[d], model, "3.0.0"))
	})
	ids = taskIDs(t, "parallel duplicate check", rs, errs)
	perDevice := make([]map[string]bool, devices)
	for i, id := range ids {
		d := i % devices
		if perDevice[d] == nil {
			perDevice[d] = map[string]bool{}
		}
		perDevice[d][id] = true
	}
	for d, set := range perDevice {
		if len(set) != 1 {
			t.Errorf("device %s: %d checks gave task ids %v, want one", devs[d], dups, keys(set))
		}
	}
	var rows []struct {
		DeviceID string `db:"device_id"`
		Total    int    `db:"total"`
		Active   int    `db:"active"`
		ID       string `db:"id"`
	}
	if err := e.db.SelectContext(ctx, &rows, `SELECT device_id, count(*) AS total,
			count(*) FILTER (WHERE status = ANY($2)) AS active,
			coalesce(max(id::text) FILTER (WHERE status = ANY($2)), '') AS id
		FROM tasks WHERE device_id = ANY($1) GROUP BY device_id`, pq.Array(devs), activeStatuses); err != nil {
		t.Fatal(err)
	}
	if len(rows) != devices {
		t.Errorf("database: %d of the %d devices have tasks, want all", len(rows), devices)
	}
	logLockUse(t, "all 300 checks", a, b)
	for _, row := range rows {
		d := -1
		for i := range devs {
			if devs[i] == row.DeviceID {
				d = i
			}
		}
		if row.Total != 1 || row.Active != 1 || d < 0 || !perDevice[d][row.ID] {
			t.Errorf("database: device %s has %d tasks (%d active, %s), want exactly one, active, the one handed out",
				row.DeviceID, row.Total, row.Active, row.ID)
		}
	}
}

// logLockUse shows how many checks went through the lock (so raced to
// create the task) rather than reading the task created meanwhile.
func logLockUse(t *testing.T, what string, cs ...*client) {
	t.Helper()
	var created, reused, locks float64
	for _, c := range cs {
		created += c.metricSum(t, "ota_checks_total", `outcome="created"`)
		reused += c.metricSum(t, "ota_checks_total", `outcome="reused"`)
		locks += c.metricSum(t, "ota_lock_wait_seconds_count")
	}
	t.Logf("after %s: checks created=%v reused=%v; %v of them went through the lock", what, created, reused, locks)
}

var wholeSeconds = regexp.MustCompile(`^[1-9][0-9]*$`)

// testRedisOutage cuts an instance off its Redis (through a proxy, since
// otad refuses to start without a reachable Redis) and restores it.
//
// The behaviour checked, per docs/DOMAIN.md check rule 7:
//   - a check that has to create a task needs the lock: SERVICE_BUSY (503,
//     Retry-After in whole seconds), within OTA_LOCK_WAIT plus a little,
//     never a 500, and nothing half-written;
//   - a check whose device already has its task reads it without the lock
//     ("reading an existing active task needs no lock"), so devices that
//     have their task keep getting it through the outage;
//   - /readyz reports the failing Redis (503, status unavailable) while
//     Postgres stays "ok";
//   - when Redis is back, the same process serves checks again: no restart.
func testRedisOutage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ru, err := url.Parse(e.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.StartProxy(t, ru.Host)
	pu := *ru
	pu.Host = proxy.Addr()
	const lockWait = 300 * time.Millisecond
	// No rate limit: the device polls until Redis is back.
	c := newClient(t, e.start(t, instanceConfig{redisURL: pu.String(), lockWait: lockWait.String(), env: noRateLimit}, "C")[0])
	admin := e.adminToken
	model := uniq("cam")
	fwID := c.publishFirmware(t, admin, model, "5.0.0")
	c.startRollout(t, admin, fwID, 100)
	oldDev, freshDev := uniq("dev"), uniq("dev")
	oldTok := c.registerDevice(t, admin, oldDev, model, "4.0.0")
	freshTok := c.registerDevice(t, admin, freshDev, model, "4.0.0")
	ctx := ctxTimeout(t)

	r := c.do(t, checkCall(oldDev, oldTok, model, "4.0.0"))
	wantStatus(t, r, http.StatusOK)
	oldTask := decode[checkJSON](t, r).Task
	if oldTask == nil {
		t.Fatalf("check before the outage: want a task, got %s", r)
	}

	proxy.Cut()

	r = c.do(t, call{method: http.MethodGet, path: "/readyz"})
	wantStatus(t, r, http.StatusServiceUnavailable)
	if ready := decode[readinessJSON](t, r); ready.Status != "unavailable" || ready.Checks["postgres"] != "ok" ||
		ready.Checks["redis"] == "" || ready.Checks["redis"] == "ok" {
		t.Errorf("/readyz with Redis cut: want unavailable, postgres ok, redis with a reason; got %s", r)
	}

	const slack = 2 * time.Second // generous: -race, two cores, parallel tests
	for i := range 3 {
		r = c.do(t, checkCall(freshDev, freshTok, model, "4.0.0"))
		wantError(t, r, http.StatusServiceUnavailable, "SERVICE_BUSY")
		if ra := r.header.Get("Retry-After"); !wholeSeconds.MatchString(ra) {
			t.Errorf("SERVICE_BUSY #%d: Retry-After = %q, want whole seconds", i, ra)
		}
		if r.elapsed >= slack {
			t.Errorf("SERVICE_BUSY #%d took %v, want under %v (OTA_LOCK_WAIT %v)", i, r.elapsed, slack, lockWait)
		}
	}
	var n int
	if err := e.db.GetContext(ctx, &n, `SELECT count(*) FROM tasks WHERE device_id = $1`, freshDev); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database: %d tasks for %s after SERVICE_BUSY answers, want none", n, freshDev)
	}

	// The reuse path reads the task without the lock.
	r = c.do(t, checkCall(oldDev, oldTok, model, "4.0.0"))
	wantStatus(t, r, http.StatusOK)
	if got := decode[checkJSON](t, r).Task; got == nil || got.ID != oldTask.ID {
		t.Errorf("check of a device that has its task, Redis cut: want task %s, got %s", oldTask.ID, r)
	}

	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	var freshTask *taskJSON
	deadline := time.Now().Add(3 * time.Second)
	for freshTask == nil {
		r = c.do(t, checkCall(freshDev, freshTok, model, "4.0.0"))
		switch {
		case r.status == http.StatusOK:
			if freshTask = decode[checkJSON](t, r).Task; freshTask == nil {
				t.Fatalf("check after Redis came back: want a task, got %s", r)
			}
		case r.status == http.StatusServiceUnavailable && r.errorCode() == "SERVICE_BUSY" && time.Now().Before(deadline):
			time.Sleep(50 * time.Millisecond)
		default:
			t.Fatalf("check after Redis came back: want 200 within 3s (SERVICE_BUSY meanwhile), got %s", r)
		}
	}
	r = c.do(t, checkCall(freshDev, freshTok, model, "4.0.0"))
	wantStatus(t, r, http.StatusOK)
	if got := decode[checkJSON](t, r).Task; got == nil || got.ID != freshTask.ID {
		t.Errorf("repeated check after recovery: want task %s, got %s", freshTask.ID, r)
	}
	var ids []string
	if err := e.db.SelectContext(ctx, &ids, `SELECT id::text FROM tasks WHERE device_id = $1 AND status = ANY($2)`, freshDev, activeStatuses); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != freshTask.ID {
		t.Errorf("database after recovery: active tasks of %s = %v, want [%s]", freshDev, ids, freshTask.ID)
	}
	for deadline := time.Now().Add(3 * time.Second); ; {
		r = c.do(t, call{method: http.MethodGet, path: "/readyz"})
		if r.status == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantStatus(t, r, http.StatusOK)
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// testRequestIDsAndErrors: every response carries X-Request-ID (the
// caller's when sane, else a new one), and every error is exactly
// {"error":{"code","message","request_id"}} with request_id equal to the
// header, for each kind of error a client can provoke. (The client checks
// the envelope on every response of every scenario; this one provokes the
// errors.)
func testRequestIDsAndErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newClient(t, e.start(t, instanceConfig{}, "D")[0])
	admin := e.adminToken

	r := c.do(t, call{method: http.MethodGet, path: "/healthz", requestID: "e2e-trace-42"})
	wantStatus(t, r, http.StatusOK)
	if got := r.header.Get("X-Request-ID"); got != "e2e-trace-42" {
		t.Errorf("X-Request-ID = %q, want the caller's", got)
	}
	r = c.do(t, call{method: http.MethodGet, path: "/healthz"})
	if got := r.header.Get("X-Request-ID"); !uuidRE.MatchString(got) {
		t.Errorf("X-Request-ID without one sent = %q, want a new UUID", got)
	}
	long := strings.Repeat("x", 200)
	r = c.do(t, call{method: http.MethodGet, path: "/healthz", requestID: long})
	if got := r.header.Get("X-Request-ID"); got == long || !uuidRE.MatchString(got) {
		t.Errorf("X-Request-ID for a 200-character one = %q, want a new UUID", got)
	}
	for _, path := range []string{"/readyz", "/metrics", "/openapi.yaml"} {
		r = c.do(t, call{method: http.MethodGet, path: path})
		wantStatus(t, r, http.StatusOK)
	}
	if string(r.body) != string(rest.OpenAPISpec()) {
		t.Errorf("/openapi.yaml differs from the document embedded in adapters/rest")
	}

	model := uniq("cam")
	fwID := c.publishFirmware(t, admin, model, "1.1.0")
	c.startRollout(t, admin, fwID, 100)
	devA, devB := uniq("dev"), uniq("dev")
	tokA := c.registerDevice(t, admin, devA, model, "1.0.0")
	tokB := c.registerDevice(t, admin, devB, model, "1.0.0")
	r = c.do(t, checkCall(devA, tokA, model, "1.0.0"))
	wantStatus(t, r, http.StatusOK)
	taskA := decode[checkJSON](t, r).Task
	if taskA == nil {
		t.Fatalf("check: want a task, got %s", r)
	}
	register := func(body any) call {
		return call{method: http.MethodPost, path: "/api/v1/admin/devices", token: admin, body: body}
	}
	huge := `{"device_id":"` + strings.Repeat("a", 70<<10) + `","model":"m"}`
	cases := []struct {
		name   string
		c      call
		status int
		code   string
	}{
		{"no credentials", call{method: http.MethodGet, path: "/api/v1/admin/tasks"}, 401, "UNAUTHORIZED"},
		{"wrong admin token", call{method: http.MethodGet, path: "/api/v1/admin/devices/" + devA, token: "not-the-admin-token"}, 401, "UNAUTHORIZED"},
		{"admin token on a device call", checkCall(devA, admin, model, "1.0.0"), 401, "UNAUTHORIZED"},
		{"device token on an admin call", register(map[string]any{"device_id": uniq("dev"), "model": model}), 0, ""},
		{"another device's path", checkCall(devB, tokA, model, "1.0.0"), 403, "FORBIDDEN"},
		{"another device's task", getTaskCall(devB, tokB, taskA.ID), 404, "NOT_FOUND"},
		{"unknown task", getTaskCall(devA, tokA, "00000000-0000-4000-8000-000000000000"), 404, "NOT_FOUND"},
		{"unknown device", call{method: http.MethodGet, path: "/api/v1/admin/devices/" + uniq("ghost"), token: admin}, 404, "NOT_FOUND"},
		{"unknown route", call{method: http.MethodGet, path: "/api/v1/nothing-here", token: admin}, 404, "NOT_FOUND"},
		{"wrong method", call{method: http.MethodDelete, path: "/api/v1/admin/devices", token: admin}, 405, "METHOD_NOT_ALLOWED"},
		{"malformed JSON", register(`{"device_id":`), 400, "MALFORMED_JSON"},
		{"missing field", register(map[string]any{"model": model}), 400, "VALIDATION_FAILED"},
		{"unknown event status", eventCall(devA, tokA, taskA.ID, "ev-1", "rebooting", -1), 400, "VALIDATION_FAILED"},
		{"not JSON", call{method: http.MethodPost, path: "/api/v1/admin/devices", token: admin, body: "device_id=x", contentType: "application/x-www-form-urlencoded"}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"too large", register(huge), 413, "PAYLOAD_TOO_LARGE"},
		{"device exists", register(map[string]any{"device_id": devA, "model": model}), 409, "DEVICE_EXISTS"},
		{"model mismatch", checkCall(devA, tokA, "other-model", "1.0.0"), 409, "MODEL_MISMATCH"},
		{"rollout of unknown firmware", call{method: http.MethodPost, path: "/api/v1/admin/rollouts", token: admin,
			body: map[string]any{"firmware_id": "00000000-0000-4000-8000-000000000000", "percentage": 10}}, 404, "NOT_FOUND"},
	}
	// A device token is not the admin token.
	cases[3].c.token, cases[3].status, cases[3].code = tokA, 401, "UNAUTHORIZED"
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if i%2 == 0 {
				tc.c.requestID = "e2e-" + randomHex(8)
			}
			r := c.do(t, tc.c) // checks the envelope and request_id = X-Request-ID
			wantError(t, r, tc.status, tc.code)
			if tc.status == http.StatusUnauthorized && r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
		})
	}
	r = c.do(t, call{method: http.MethodPost, path: "/api/v1/admin/firmwares", token: admin, body: map[string]any{
		"model": model, "version": "1.1.0+rebuild", "url": "https://fw.example.com/x.bin", "size_bytes": 1,
		"sha256": strings.Repeat("ab", 32)}})
	wantError(t, r, http.StatusConflict, "FIRMWARE_EXISTS") // build metadata is not part of the identity
	checkUnreadableBodies(t, c, admin, devA, tokA)
}

// testGracefulShutdown sends SIGTERM while checks are in flight inside the
// server, and shows that they are drained: each completes with a full,
// correct answer (the work done after the signal), the listener closes at
// once, and the process exits 0.
//
// To hold the checks in flight deterministically, the test takes an ACCESS
// EXCLUSIVE lock on the tasks table: every check then blocks in Postgres
// when it reads the device's active task, which pg_stat_activity shows.
func testGracefulShutdown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inst := e.start(t, instanceConfig{}, "E")[0]
	c := newClient(t, inst)
	admin := e.adminToken
	model := uniq("cam")
	fwID := c.publishFirmware(t, admin, model, "7.0.0")
	c.startRollout(t, admin, fwID, 100)
	const n = 8 // below otad's pool of 10 connections, so each holds one
	devs, tokens := make([]string, n), make([]string, n)
	for i := range n {
		devs[i] = uniq("dev")
		tokens[i] = c.registerDevice(t, admin, devs[i], model, "6.0.0")
	}
	ctx := ctxTimeout(t)
	gate := closeTasksGate(t, e)

	type result struct {
		r   *response
		err error
	}
	results := make(chan result, n)
	var calls sync.WaitGroup
	for i := range n {
		calls.Go(func() {
			r, err := c.try(t, checkCall(devs[i], tokens[i], model, "6.0.0"))
			results <- result{r, err}
		})
	}
	// The calls report on t: however this test ends, they must end first.
	defer func() {
		_ = gate.tx.Rollback()
		calls.Wait()
	}()
	if err := gate.waitBlocked(t, n); err != nil {
		t.Fatal(err)
	}

	stopAt := time.Now()
	if err := inst.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Shutdown closes the listener first: new connections are refused...
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		conn, err := net.DialTimeout("tcp", inst.Addr, 200*time.Millisecond)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("otad still accepts connections 5s after SIGTERM")
		}
	}
	// ...while the process waits for the requests it has accepted.
	if inst.Exited() {
		t.Fatalf("otad exited with %d requests in flight: %v", n, inst.ExitErr())
	}
	gate.open(t)

	got := map[string]bool{}
	for range n {
		res := <-results
		if res.err != nil {
			t.Errorf("in-flight check during shutdown: %v", res.err)
			continue
		}
		var cr checkJSON
		if err := json.Unmarshal(res.r.body, &cr); res.r.status != http.StatusOK || err != nil || cr.Task == nil || cr.Task.Status != "pending" {
			t.Errorf("in-flight check during shutdown: want 200 with a pending task, got %s", res.r)
			continue
		}
		got[cr.Task.ID] = true
	}
	if err := inst.Wait(stopDeadline); err != nil {
		t.Fatalf("otad after SIGTERM: want exit code 0, got %v", err)
	}
	t.Logf("otad exited 0 %v after SIGTERM", time.Since(stopAt).Round(time.Millisecond))
	log := inst.Log()
	if i, j := strings.Index(log, "shutting down"), strings.Index(log, `"msg":"stopped"`); i < 0 || j < i {
		t.Errorf("otad's log does not show a drain then a clean stop")
	}
	var tasks int
	if err := e.db.GetContext(ctx, &tasks, `SELECT count(DISTINCT id) FROM tasks WHERE device_id = ANY($1) AND id::text = ANY($2)`,
		pq.Array(devs), pq.Array(keys(got))); err != nil {
		t.Fatal(err)
	}
	if len(got) != n || tasks != n {
		t.Errorf("after the drain: %d distinct tasks answered, %d of them in the database, want %d", len(got), tasks, n)
	}
}

// testRateLimits: a device over its request budget gets RATE_LIMITED (429,
// Retry-After in whole seconds) on checks and progress events, but a final
// status is never refused for rate reasons (docs/DOMAIN.md event rule 3): it is
// what lets the device stop. The budget is set small through the service's
// OTA_DEVICE_RATE_LIMIT / OTA_DEVICE_RATE_BURST (per replica).
func testRateLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newClient(t, e.start(t, instanceConfig{env: map[string]string{
		"OTA_DEVICE_RATE_LIMIT": "0.2", "OTA_DEVICE_RATE_BURST": "3"}}, "F")[0])
	admin := e.adminToken
	model, dev := uniq("cam"), uniq("dev")
	fwID := c.publishFirmware(t, admin, model, "9.0.0")
	c.startRollout(t, admin, fwID, 100)
	token := c.registerDevice(t, admin, dev, model, "8.0.0")

	// Three units of budget: a check and two progress events.
	r := c.do(t, checkCall(dev, token, model, "8.0.0"))
	wantStatus(t, r, http.StatusOK)
	task := decode[checkJSON](t, r).Task
	if task == nil {
		t.Fatalf("check: want a task, got %s", r)
	}
	wantStatus(t, c.do(t, eventCall(dev, token, task.ID, "ev-1", "downloading", 50)), http.StatusOK)
	wantStatus(t, c.do(t, eventCall(dev, token, task.ID, "ev-2", "installing", 10)), http.StatusOK)

	for _, cl := range []call{checkCall(dev, token, model, "8.0.0"), eventCall(dev, token, task.ID, "ev-3", "installing", 60)} {
		r = c.do(t, cl)
		wantError(t, r, http.StatusTooManyRequests, "RATE_LIMITED")
		if ra := r.header.Get("Retry-After"); !wholeSeconds.MatchString(ra) {
			t.Errorf("RATE_LIMITED: Retry-After = %q, want whole seconds", ra)
		}
	}
	// Over budget, the final word still goes through, and so do its rules.
	r = c.do(t, eventCall(dev, token, task.ID, "ev-4", "succeeded", -1))
	wantStatus(t, r, http.StatusOK)
	if got := decode[taskJSON](t, r); got.Status != "succeeded" || got.Progress != 100 {
		t.Fatalf("final event over budget: want succeeded/100, got %s", r)
	}
	wantStatus(t, c.do(t, eventCall(dev, token, task.ID, "ev-5", "succeeded", -1)), http.StatusOK)
	wantError(t, c.do(t, eventCall(dev, token, task.ID, "ev-6", "failed", -1)), http.StatusConflict, "TASK_FINISHED")
}
