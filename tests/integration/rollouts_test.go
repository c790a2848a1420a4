package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// Hands-off rollouts (docs/DOMAIN.md) over HTTP: several replicas, each on the serving wiring (the
// catalog cache invalidated by LISTEN/NOTIFY, checks written behind, its own
// Redis lock client), sharing one Postgres database and one injectable
// clock, and a simulated fleet that polls, installs and reports.

// testClock is the replicas' shared clock: it runs like the real one from
// wherever the test last set it.
type testClock struct {
	mu       sync.Mutex
	base, at time.Time
}

func newTestClock(start time.Time) *testClock { return &testClock{base: start, at: time.Now()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base.Add(time.Since(c.at))
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base, c.at = t, time.Now()
}

// cluster is n replicas behind their own HTTP servers.
type cluster struct {
	t     *testing.T
	db    *sqlx.DB
	clock *testClock
	urls  []string
	next  atomic.Int64
}

func newCluster(t *testing.T, n int, start time.Time) *cluster {
	t.Helper()
	db, url := testenv.PostgresDB(t)
	c := &cluster{t: t, db: db, clock: newTestClock(start)}
	prefix := "ota:rollouts:" + uuid.NewString()
	for range n {
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			t.Fatal(err)
		}
		seen, stop, err := postgres.NewWriteBehindDevices(repos.Devices, postgres.WriteBehindConfig{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		cache, stopCache, err := postgres.NewCatalogCache(repos.Firmwares, repos.Rollouts, postgres.CatalogCacheConfig{URL: postgres.DatabaseURL(url)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stopCache)
		deps := application.Deps{
			Devices: seen, Firmwares: cache.Firmwares(), Rollouts: cache.Rollouts(), Tasks: repos.Tasks,
			Locker: redisLocker(t, prefix), Clock: c.clock, IDs: local.NewUUIDs(), Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
			Attributes: postgres.NewAttributeRepository(db), Directory: postgres.NewDeviceDirectory(db),
		}
		devices, admin := testenv.UseCases(t, deps, time.Hour)
		e := rest.NewServer(rest.Config{AdminToken: adminToken}, devices, admin, nil, nil, nil, slog.New(slog.DiscardHandler))
		srv := httptest.NewServer(e)
		t.Cleanup(srv.Close)
		c.urls = append(c.urls, srv.URL)
	}
	return c
}

var rolloutClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}

// call sends a request to the next replica (round robin) and decodes the answer.
func (c *cluster) call(method, path, token string, body any) (int, map[string]any) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			panic(err)
		}
		r = bytes.NewReader(b)
	}
	url := c.urls[int(c.next.Add(1))%len(c.urls)]
	req, err := http.NewRequest(method, url+path, r)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := rolloutClient.Do(req)
	if err != nil {
		c.t.Errorf("%s %s: %v", method, path, err)
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (c *cluster) admin(method, path string, body any, want int) map[string]any {
	c.t.Helper()
	code, out := c.call(method, "/api/v1/admin"+path, adminToken, body)
	if code != want {
		c.t.Fatalf("%s %s: %d %v, want %d", method, path, code, out, want)
	}
	return out
}

func (c *cluster) publish(model, version string) string {
	c.t.Helper()
	return c.admin("POST", "/firmwares", map[string]any{"model": model, "version": version,
		"url": "https://files.example/" + version + ".bin", "size_bytes": 1, "sha256": strings.Repeat("ab", 32)}, 201)["id"].(string)
}

// fleet is n simulated devices of one model, seeded in bulk (their tokens
// are tok-<id>, only the hashes stored), all running 1.0.0.
type fleet struct {
	model   string
	ids     []string
	mu      sync.Mutex
	version map[string]string
	// fails says whether a device's install of a version fails.
	fails func(id, version string) bool
	// attributes, when set, is what a device reports with its checks.
	attributes func(id string) map[string]string
}

func (c *cluster) fleet(n int) *fleet {
	c.t.Helper()
	f := &fleet{model: "fl-" + uuid.NewString()[:8], version: map[string]string{}, fails: func(string, string) bool { return false }}
	if _, err := c.db.Exec(`INSERT INTO devices (device_id, model, current_version, token_hash, created_at)
		SELECT $1 || '-' || lpad(i::text, 6, '0'), $1, '1.0.0', sha256(convert_to('tok-' || $1 || '-' || lpad(i::text, 6, '0'), 'UTF8')), now()
		FROM generate_series(0, $2 - 1) AS i`, f.model, n); err != nil {
		c.t.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("%s-%06d", f.model, i)
		f.ids = append(f.ids, id)
		f.version[id] = "1.0.0"
	}
	return f
}

func (f *fleet) current(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version[id]
}

// roundResult sums up one round of polls.
type roundResult struct {
	tasks, succeeded, failed, noUpdate int64
	pollAfter                          sync.Map // seconds → count
}

// round has every device poll once (16 at a time, across the replicas);
// a device handed a task installs it at once and reports succeeded (its
// version becomes the task's) or failed. report=false leaves tasks open
// after a "downloading" event.
func (c *cluster) round(f *fleet, report bool) *roundResult {
	c.t.Helper()
	res := &roundResult{}
	work := make(chan string)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				c.device(f, id, report, res)
			}
		}()
	}
	for _, id := range f.ids {
		work <- id
	}
	close(work)
	wg.Wait()
	return res
}

func (c *cluster) device(f *fleet, id string, report bool, res *roundResult) {
	tok := "tok-" + id
	body := map[string]any{"model": f.model, "current_version": f.current(id)}
	if f.attributes != nil {
		body["attributes"] = f.attributes(id)
	}
	code, out := c.call("POST", "/api/v1/devices/"+id+"/ota/check", tok, body)
	if code != 200 {
		c.t.Errorf("check %s: %d %v", id, code, out)
		return
	}
	pa := int64(out["poll_after_seconds"].(float64))
	n, _ := res.pollAfter.LoadOrStore(pa, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	task, _ := out["task"].(map[string]any)
	if task == nil {
		atomic.AddInt64(&res.noUpdate, 1)
		return
	}
	atomic.AddInt64(&res.tasks, 1)
	taskID := task["id"].(string)
	version := task["firmware"].(map[string]any)["version"].(string)
	events := "/api/v1/devices/" + id + "/ota/tasks/" + taskID + "/events"
	if code, out := c.call("POST", events, tok, map[string]any{"event_id": "dl-" + taskID, "status": "downloading"}); code != 200 {
		c.t.Errorf("downloading %s: %d %v", id, code, out)
		return
	}
	if !report {
		return
	}
	if f.fails(id, version) {
		atomic.AddInt64(&res.failed, 1)
		c.call("POST", events, tok, map[string]any{"event_id": "end-" + taskID, "status": "failed", "error_code": "E_FLASH"})
		return
	}
	if code, out := c.call("POST", events, tok, map[string]any{"event_id": "end-" + taskID, "status": "succeeded"}); code != 200 {
		c.t.Errorf("succeeded %s: %d %v", id, code, out)
		return
	}
	atomic.AddInt64(&res.succeeded, 1)
	f.mu.Lock()
	f.version[id] = version
	f.mu.Unlock()
}

func (f *fleet) on(version string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, v := range f.version {
		if v == version {
			n++
		}
	}
	return n
}

// fleetSize is 1,000 devices, or OTA_ROLLOUT_FLEET (the full-size run is
// 10,000: OTA_ROLLOUT_FLEET=10000; on a shared 2-core machine each round
// of 10,000 polls and their events takes tens of seconds, too long for
// every make test).
func fleetSize(t *testing.T) int {
	if s := os.Getenv("OTA_ROLLOUT_FLEET"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 200 {
			t.Fatalf("OTA_ROLLOUT_FLEET=%q: want a number ≥ 200", s)
		}
		return n
	}
	return 1000
}

// plan is 1% → 10% → 50% → 100%, each gate asking for about half of the
// stage's newly admitted devices to have finished, 95% of them succeeded.
// startStaged starts fw's rollout with plan(n) and returns it, with the
// devices of its first stage: those whose bucket under the rollout's id is
// below 1, about n/100. A first stage that cannot judge its gate as the
// test means it to is the luck of one rollout id, not the product under
// test, so such a rollout is cancelled and another started:
//   - fewer devices than its min_finished (about 3% of ids for 1,000
//     devices): the gate never opens (rule G2), the test waits in vain;
//   - 2% of the fleet or more (about 0.3%): more than the failing
//     firmware's test lets a first stage touch;
//   - and whatever ok refuses.
func (c *cluster) startStaged(f *fleet, fw string, n int, ok func(first []string, minFinished int) bool) string {
	c.t.Helper()
	p := plan(n)
	for range 100 {
		rid := c.admin("POST", "/rollouts", map[string]any{"firmware_id": fw, "stages": p}, 201)["id"].(string)
		var first []string
		for _, id := range f.ids {
			if domain.Bucket(rid, id) < p[0]["percentage"].(int) {
				first = append(first, id)
			}
		}
		minFinished := p[0]["min_finished"].(int)
		if len(first) >= minFinished && len(first)*100 < 2*n && (ok == nil || ok(first, minFinished)) {
			return rid
		}
		c.admin("PATCH", "/rollouts/"+rid, map[string]any{"status": "cancelled"}, 200)
	}
	c.t.Fatal("no rollout id in 100 gave a first stage the test can judge")
	return ""
}

func plan(n int) []map[string]any {
	return []map[string]any{
		{"percentage": 1, "min_finished": max(n/200, 5), "success_percent": 95},
		{"percentage": 10, "min_finished": n / 25, "success_percent": 95},
		{"percentage": 50, "min_finished": n / 6, "success_percent": 95},
		{"percentage": 100},
	}
}

// A staged rollout reaches 100% of the fleet with no operator call after
// it started, then a rollback rollout returns every device to 1.0.0.
func TestStagedRolloutReachesTheWholeFleetThenRollsBack(t *testing.T) {
	n := fleetSize(t)
	c := newCluster(t, 3, time.Now())
	f := c.fleet(n)
	old := c.publish(f.model, "1.0.0")
	fw := c.publish(f.model, "2.0.0")
	rid := c.startStaged(f, fw, n, nil)
	start := time.Now()
	rounds := 0
	for ; rounds < 10 && f.on("2.0.0") < n; rounds++ {
		res := c.round(f, true)
		time.Sleep(100 * time.Millisecond) // the replicas' caches hear of stage advances
		t.Logf("round %d: %d tasks, %d succeeded; %d of %d devices on 2.0.0", rounds+1, res.tasks, res.succeeded, f.on("2.0.0"), n)
	}
	got := c.admin("GET", "/rollouts/"+rid, nil, 200)
	t.Logf("%d devices, 3 replicas: the fleet reached 2.0.0 in %d rounds, %s; history %v", n, rounds, time.Since(start).Round(time.Millisecond), got["stage_history"])
	if f.on("2.0.0") != n {
		t.Fatalf("only %d of %d devices on 2.0.0 after %d rounds", f.on("2.0.0"), n, rounds)
	}
	if got["stage"].(float64) != 3 || got["percentage"].(float64) != 100 || got["status"] != "active" {
		t.Fatalf("rollout: stage %v percentage %v status %v", got["stage"], got["percentage"], got["status"])
	}
	if h := got["stage_history"].([]any); len(h) != 4 || h[0].(map[string]any)["outcome"] != "advanced" {
		t.Fatalf("history %v", h)
	}

	// Rollback: the operator stops 2.0.0 and rolls 1.0.0 back to the
	// devices on 2.0.0.
	c.admin("PATCH", "/rollouts/"+rid, map[string]any{"status": "cancelled"}, 200)
	c.admin("POST", "/rollouts", map[string]any{"firmware_id": old, "percentage": 100, "allow_downgrade": true,
		"selector": map[string]any{"versions": "=2.0.0"}}, 201)
	time.Sleep(100 * time.Millisecond)
	for i := 0; i < 3 && f.on("1.0.0") < n; i++ {
		c.round(f, true)
	}
	if f.on("1.0.0") != n {
		t.Fatalf("rollback: %d of %d devices on 1.0.0", f.on("1.0.0"), n)
	}
	if res := c.round(f, true); res.tasks != 0 {
		t.Fatalf("after the rollback %d devices were offered something again", res.tasks)
	}
}

// The same plan with a firmware that fails on 30% of devices stops at its
// first stage, paused by itself, having touched fewer than 2% of the fleet.
func TestStagedRolloutStopsAFailingFirmware(t *testing.T) {
	n := fleetSize(t)
	c := newCluster(t, 3, time.Now())
	f := c.fleet(n)
	f.fails = func(id, _ string) bool { return domain.Bucket("flaky", id) < 30 }
	fw := c.publish(f.model, "2.0.0")
	// The gate judges the first min_finished tasks to finish: with 30%
	// failing, all of them succeed in about 17% of runs, and the rollout
	// rightly moves on. The test wants the failing firmware's sample to
	// hold a failure whatever the order of finishing: fewer succeeding
	// devices in the first stage than min_finished. (From 20 finished
	// tasks on, as in a fleet of 4,000 or more, all succeeding is a
	// chance below 0.1%: any first stage will do.)
	rid := c.startStaged(f, fw, n, func(first []string, minFinished int) bool {
		if minFinished >= 20 {
			return true
		}
		succeeding := 0
		for _, id := range first {
			if !f.fails(id, "2.0.0") {
				succeeding++
			}
		}
		return succeeding < minFinished
	})
	for range 3 {
		c.round(f, true)
		time.Sleep(100 * time.Millisecond)
	}
	got := c.admin("GET", "/rollouts/"+rid, nil, 200)
	var touched int
	if err := c.db.Get(&touched, `SELECT count(DISTINCT device_id) FROM tasks WHERE rollout_id = $1`, rid); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d devices: %d touched (%.2f%%), rollout %v/%v, history %v", n, touched, 100*float64(touched)/float64(n), got["status"], got["paused_reason"], got["stage_history"])
	if got["status"] != "paused" || got["paused_reason"] != "auto" || got["stage"].(float64) != 0 {
		t.Fatalf("rollout %v %v at stage %v, want paused auto at stage 0", got["status"], got["paused_reason"], got["stage"])
	}
	if touched == 0 || touched*100 >= 2*n {
		t.Fatalf("%d of %d devices touched, want fewer than 2%%", touched, n)
	}
}

// A maintenance window that opens during the run: before it, devices hear
// no update and come back at its start; in it, they are offered; tasks
// left open when it closes are handed back, and do not time out while it
// is closed (rule K1 counts only open window time). Then stuck tasks time
// out in the next window, and a second attempt is made in it.
func TestWindowOpensAndStuckTasksTimeOut(t *testing.T) {
	day := time.Now().UTC().Truncate(24 * time.Hour)
	c := newCluster(t, 2, day.Add(90*time.Minute)) // 01:30 UTC
	f := c.fleet(200)
	fw := c.publish(f.model, "2.0.0")
	rid := c.admin("POST", "/rollouts", map[string]any{"firmware_id": fw, "percentage": 100,
		"window": map[string]any{"daily": "02:00-03:00"}, "task_timeout_seconds": 3600}, 201)["id"].(string)
	time.Sleep(100 * time.Millisecond)
	c.clock.Set(day.Add(90 * time.Minute))
	res := c.round(f, false)
	// The clock runs from 01:30 as the round goes, so a device polling a
	// few seconds in is told a few seconds less than 1800.
	var toStart int64
	res.pollAfter.Range(func(k, v any) bool {
		if s := k.(int64); s > 1800-60 && s <= 1800 {
			toStart += v.(*atomic.Int64).Load()
		}
		return true
	})
	if res.tasks != 0 || toStart != 200 {
		t.Fatalf("before the window: %d tasks, %d devices told to come back at its start", res.tasks, toStart)
	}
	c.clock.Set(day.Add(2 * time.Hour)) // the window opens
	if res := c.round(f, false); res.tasks != 200 {
		t.Fatalf("in the window: %d tasks, want 200", res.tasks)
	}
	c.clock.Set(day.Add(3*time.Hour + 30*time.Minute)) // closed again, 1.5 h after the downloads began
	// 1.5 h without an event, but the window was open for less than the
	// one-hour timeout of it: the tasks are handed back, not timed out.
	var first []string
	if err := c.db.Select(&first, `SELECT id::text FROM tasks WHERE rollout_id = $1 ORDER BY device_id`, rid); err != nil {
		t.Fatal(err)
	}
	if res := c.round(f, false); res.tasks != 200 {
		t.Fatalf("outside the window, before the timeout: %d tasks handed back, want 200", res.tasks)
	}
	got := c.admin("GET", "/rollouts/"+rid, nil, 200)
	if st := got["stats"].(map[string]any); st["failed"].(float64) != 0 || st["downloading"].(float64) != 200 {
		t.Fatalf("stats while the window is closed: %v", st)
	}
	// The next window, half an hour in: past the timeout of open window
	// time, every stuck task fails TIMED_OUT at the device's check, and a
	// second attempt is made at once.
	c.clock.Set(day.Add(26*time.Hour + 30*time.Minute))
	if res := c.round(f, false); res.tasks != 200 {
		t.Fatalf("after the timeout, in the next window: %d tasks", res.tasks)
	}
	got = c.admin("GET", "/rollouts/"+rid, nil, 200)
	// Stats count devices, each by its latest outcome: the 200 are failed
	// until their second attempt ends, which is active meanwhile.
	if st := got["stats"].(map[string]any); st["failed"].(float64) != 200 || st["downloading"].(float64) != 0 {
		t.Fatalf("stats after the timeout: %v", st)
	}
	var retries int
	if err := c.db.Get(&retries, `SELECT count(*) FROM tasks WHERE rollout_id = $1 AND attempt = 2 AND status IN ('pending','downloading')`, rid); err != nil || retries != 200 {
		t.Fatalf("second attempts: %d %v, want 200", retries, err)
	}
	var codes []string
	if err := c.db.Select(&codes, `SELECT DISTINCT error_code FROM tasks WHERE rollout_id = $1 AND status = 'failed'`, rid); err != nil || len(codes) != 1 || codes[0] != domain.CodeTimedOut {
		t.Fatalf("error codes %v %v", codes, err)
	}
	// A late event on a timed-out task is TASK_FINISHED.
	code, out := c.call("POST", "/api/v1/devices/"+f.ids[0]+"/ota/tasks/"+first[0]+"/events", "tok-"+f.ids[0],
		map[string]any{"event_id": "late", "status": "installing"})
	if code != 409 || out["error"].(map[string]any)["code"] != "TASK_FINISHED" {
		t.Fatalf("late event: %d %v", code, out)
	}
	// The second attempts finish in the window.
	if res := c.round(f, true); res.tasks != 200 || res.succeeded != 200 {
		t.Fatalf("next window: %d tasks, %d succeeded", res.tasks, res.succeeded)
	}
}

// Targeting over HTTP: bulk tags, attributes reported with the check, a
// selector with a percentage inside the selected set, and the device
// listing paging through exactly the selected devices.
func TestTargetingOverHTTP(t *testing.T) {
	c := newCluster(t, 2, time.Now())
	f := c.fleet(300)
	eu := map[string]bool{}
	var tagged []string
	for i, id := range f.ids {
		if i%3 == 0 {
			eu[id] = true
			tagged = append(tagged, id)
		}
	}
	out := c.admin("POST", "/devices/tags", map[string]any{"device_ids": tagged, "add": []string{"eu", "pilot"}}, 200)
	if len(out["items"].([]any)) != len(tagged) {
		t.Fatalf("bulk tagging answered %v", out)
	}
	if code, _ := c.call("POST", "/api/v1/admin/devices/tags", adminToken, map[string]any{"device_ids": []string{f.ids[1], "nobody"}, "add": []string{"eu"}}); code != 404 {
		t.Fatalf("bulk with an unknown device: %d", code)
	}
	c.admin("PUT", "/devices/"+f.ids[1]+"/tags", map[string]any{"tags": []string{"lab"}}, 200)
	f.attributes = func(id string) map[string]string {
		if id[len(id)-1]%2 == 0 {
			return map[string]string{"hw": "rev2"}
		}
		return map[string]string{"hw": "rev1"}
	}
	fw := c.publish(f.model, "2.0.0")
	rid := c.admin("POST", "/rollouts", map[string]any{"firmware_id": fw, "percentage": 50,
		"selector": map[string]any{"tags_all": []string{"eu"}, "attributes": map[string]any{"hw": "rev2"}, "versions": "<2.0.0"}}, 201)["id"].(string)
	time.Sleep(100 * time.Millisecond)
	res := c.round(f, false)
	want := 0
	for _, id := range f.ids {
		if eu[id] && id[len(id)-1]%2 == 0 && domain.Bucket(rid, id) < 50 {
			want++
		}
	}
	if int(res.tasks) != want || want == 0 {
		t.Fatalf("%d tasks, want %d (tagged eu, reporting hw=rev2, in the rollout's 50%%)", res.tasks, want)
	}
	var wrong int
	if err := c.db.Get(&wrong, `SELECT count(*) FROM tasks t JOIN devices d USING (device_id)
		WHERE t.rollout_id = $1 AND NOT ('eu' = ANY (d.tags))`, rid); err != nil || wrong != 0 {
		t.Fatalf("%d tasks for untagged devices (%v)", wrong, err)
	}
	// The listing pages through the eu devices that reported hw=rev2.
	var listed []string
	next := ""
	for pages := 0; pages < 100; pages++ {
		path := "/devices?model=" + f.model + "&tag=eu&tag=pilot&attribute=hw%3Drev2&limit=7"
		if next != "" {
			path += "&after=" + next
		}
		page := c.admin("GET", path, nil, 200)
		for _, it := range page["items"].([]any) {
			d := it.(map[string]any)
			if d["attributes"].(map[string]any)["hw"] != "rev2" {
				t.Fatalf("listed %v", d)
			}
			listed = append(listed, d["device_id"].(string))
		}
		n, _ := page["next"].(string)
		if n == "" {
			break
		}
		next = n
	}
	wantListed := 0
	for _, id := range tagged {
		if id[len(id)-1]%2 == 0 {
			wantListed++
		}
	}
	if len(listed) != wantListed {
		t.Fatalf("listed %d devices, want %d", len(listed), wantListed)
	}
	dev := c.admin("GET", "/devices/"+f.ids[1], nil, 200)
	if fmt.Sprint(dev["tags"]) != "[lab]" || dev["attributes"].(map[string]any)["hw"] != "rev1" {
		t.Fatalf("device view %v", dev)
	}
	// A report beyond the limits is refused and stores nothing.
	big := map[string]any{}
	for i := range domain.MaxAttributes + 1 {
		big[fmt.Sprintf("k%d", i)] = "v"
	}
	code, body := c.call("POST", "/api/v1/devices/"+f.ids[1]+"/ota/check", "tok-"+f.ids[1],
		map[string]any{"model": f.model, "current_version": "1.0.0", "attributes": big})
	if code != 400 || body["error"].(map[string]any)["code"] != "VALIDATION_FAILED" {
		t.Fatalf("65 attributes: %d %v", code, body)
	}
	if dev := c.admin("GET", "/devices/"+f.ids[1], nil, 200); len(dev["attributes"].(map[string]any)) != 1 {
		t.Fatalf("a refused report was stored: %v", dev["attributes"])
	}
}
