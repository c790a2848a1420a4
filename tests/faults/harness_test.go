package faults

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redis/rueidis"

	"github.com/ai-device/ota/tests/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithOtad(m))
}

// world is one test's setting: its own database, a Redis, an admin token.
type world struct {
	t        *testing.T
	db       *sqlx.DB
	dbURL    string
	redisURL string
	admin    string
	tally    *tally

	gateMu sync.Mutex
	gate   *sqlx.Tx // the tasks table's lock, while closed (closeGate)
}

func newWorld(t *testing.T) *world {
	t.Helper()
	db, dbURL := testenv.PostgresDB(t)
	w := &world{t: t, db: db, dbURL: dbURL, redisURL: testenv.RedisURL(t), admin: "adm-" + randomHex(16), tally: newTally()}
	return w
}

// otadOpts are one instance's deviations from the world's defaults.
type otadOpts struct {
	dbURL    string // default: the world's database, direct
	redisURL string // default: the world's Redis, direct
	env      map[string]string
}

// start runs otad instances. The per-device rate limit is off: the load
// here is many polls of few devices, far above a device's budget, and the
// rate limit is not what is being tested.
func (w *world) start(o otadOpts, names ...string) []*testenv.Otad {
	w.t.Helper()
	if o.dbURL == "" {
		o.dbURL = w.dbURL
	}
	if o.redisURL == "" {
		o.redisURL = w.redisURL
	}
	env := map[string]string{"OTA_DEVICE_RATE_LIMIT": "0", "OTA_LOG_LEVEL": "info"}
	for k, v := range o.env {
		env[k] = v
	}
	return testenv.StartOtads(w.t, testenv.OtadConfig{DatabaseURL: o.dbURL, RedisURL: o.redisURL, AdminToken: w.admin, Env: env}, names...)
}

// viaProxy rewrites a database or Redis URL to go through p. A database URL
// also gets application_name=otad-faults, so the test can tell otad's
// sessions from its own in pg_stat_activity.
func viaProxy(t *testing.T, raw string, p *testenv.Proxy) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr()
	if strings.HasPrefix(u.Scheme, "postgres") {
		q := u.Query()
		q.Set("application_name", otadAppName)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

const otadAppName = "otad-faults"

// hostOf is the host:port of a URL.
func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// ---- HTTP ----

// result is one exchange as the load and the assertions see it.
type result struct {
	kind       string // what was asked: check, event, readyz, admin
	start      time.Time
	elapsed    time.Duration
	status     int // 0: no HTTP answer (err)
	code       string
	retryAfter string
	body       []byte
	err        error
}

func (r result) String() string {
	if r.err != nil {
		return fmt.Sprintf("%s: %v after %v", r.kind, r.err, r.elapsed.Round(time.Millisecond))
	}
	b := string(r.body)
	if len(b) > 300 {
		b = b[:300] + "…"
	}
	return fmt.Sprintf("%s: %d %s after %v", r.kind, r.status, b, r.elapsed.Round(time.Millisecond))
}

func (r result) busy() bool {
	return r.status == http.StatusServiceUnavailable && r.code == "SERVICE_BUSY"
}

// client talks to one instance and counts every answer in the world's
// tally.
type client struct {
	name  string // the instance's
	base  string // http://host:port
	hc    *http.Client
	tally *tally
}

// client returns a client of o whose calls give up after timeout.
func (w *world) client(o *testenv.Otad, timeout time.Duration) *client {
	return w.clientOf(o.Name, o.URL, timeout)
}

// clientOf is client for a server that is not an otad process.
func (w *world) clientOf(name, base string, timeout time.Duration) *client {
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	w.t.Cleanup(tr.CloseIdleConnections)
	return &client{name: name, base: base, hc: &http.Client{Transport: tr, Timeout: timeout}, tally: w.tally}
}

func (c *client) call(kind, method, path, token string, body any) result {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			panic(err)
		}
		rd = bytes.NewReader(b)
	}
	r := result{kind: kind, start: time.Now()}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		panic(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	if err == nil {
		r.body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		r.status = resp.StatusCode
		r.retryAfter = resp.Header.Get("Retry-After")
	}
	r.elapsed = time.Since(r.start)
	r.err = err
	if r.status >= 400 {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(r.body, &e)
		r.code = e.Error.Code
	}
	c.tally.add(c.name, r)
	return r
}

// device is a registered device and what it reports.
type device struct {
	id, token, model, version string
}

func (c *client) check(d device) result {
	return c.call("check", http.MethodPost, "/api/v1/devices/"+d.id+"/ota/check", d.token,
		map[string]any{"model": d.model, "current_version": d.version})
}

func (c *client) event(d device, taskID, eventID, status string, progress int) result {
	return c.call("event", http.MethodPost, "/api/v1/devices/"+d.id+"/ota/tasks/"+taskID+"/events", d.token,
		map[string]any{"event_id": eventID, "status": status, "progress": progress})
}

func (c *client) readyz() result {
	return c.call("readyz", http.MethodGet, "/readyz", "", nil)
}

// checkJSON is a check's answer.
type checkJSON struct {
	UpdateAvailable bool `json:"update_available"`
	Task            *struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		Progress int    `json:"progress"`
		Firmware struct {
			ID string `json:"id"`
		} `json:"firmware"`
	} `json:"task"`
}

// taskOf is the id of the task a 200 check answer hands out ("" if none or
// not a 200).
func taskOf(r result) string {
	if r.status != http.StatusOK || r.kind != "check" {
		return ""
	}
	var c checkJSON
	if json.Unmarshal(r.body, &c) != nil || c.Task == nil {
		return ""
	}
	return c.Task.ID
}

type readyJSON struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

func readinessOf(r result) readyJSON {
	var v readyJSON
	_ = json.Unmarshal(r.body, &v)
	return v
}

// ---- setting up through the admin API ----

func (w *world) mustAdmin(c *client, path string, body any, want int) []byte {
	w.t.Helper()
	r := c.call("admin", http.MethodPost, path, w.admin, body)
	if r.err != nil || r.status != want {
		w.t.Fatalf("POST %s: want %d, got %s", path, want, r)
	}
	return r.body
}

// publish publishes model@version and rolls it out to everyone; it returns
// the firmware and rollout ids.
func (w *world) publish(c *client, model, version string) (string, string) {
	w.t.Helper()
	return w.publishWith(c, model, version, 0)
}

// publishWith is publish with the rollout's max_attempts (0: the default).
func (w *world) publishWith(c *client, model, version string, maxAttempts int) (string, string) {
	w.t.Helper()
	sum := sha256.Sum256([]byte(model + "@" + version))
	var fw struct {
		ID string `json:"id"`
	}
	b := w.mustAdmin(c, "/api/v1/admin/firmwares", map[string]any{
		"model": model, "version": version, "url": "https://fw.example.com/" + model + "/" + version + ".bin",
		"size_bytes": 1 << 20, "sha256": hex.EncodeToString(sum[:]),
	}, http.StatusCreated)
	if err := json.Unmarshal(b, &fw); err != nil || fw.ID == "" {
		w.t.Fatalf("published firmware: %s", b)
	}
	var ro struct {
		ID string `json:"id"`
	}
	spec := map[string]any{"firmware_id": fw.ID, "percentage": 100}
	if maxAttempts > 0 {
		spec["max_attempts"] = maxAttempts
	}
	b = w.mustAdmin(c, "/api/v1/admin/rollouts", spec, http.StatusCreated)
	if err := json.Unmarshal(b, &ro); err != nil || ro.ID == "" {
		w.t.Fatalf("started rollout: %s", b)
	}
	return fw.ID, ro.ID
}

// register registers n devices of model running version.
func (w *world) register(c *client, model, version string, n int) []device {
	w.t.Helper()
	out := make([]device, n)
	for i := range out {
		id := uniq("dev")
		var reg struct {
			Token string `json:"token"`
		}
		b := w.mustAdmin(c, "/api/v1/admin/devices", map[string]any{"device_id": id, "model": model, "current_version": version}, http.StatusCreated)
		if err := json.Unmarshal(b, &reg); err != nil || reg.Token == "" {
			w.t.Fatalf("registered device: %s", b)
		}
		out[i] = device{id: id, token: reg.Token, model: model, version: version}
	}
	return out
}

// mustTask checks d and returns the task it is handed.
func (w *world) mustTask(c *client, d device) string {
	w.t.Helper()
	r := c.check(d)
	id := taskOf(r)
	if id == "" {
		w.t.Fatalf("check of %s: want a task, got %s", d.id, r)
	}
	return id
}

// ---- the tally: every answer of a test ----

type tally struct {
	mu      sync.Mutex
	counts  map[string]int // "instance kind status code"
	results []result
	bad     []string // 500s and answers no fault excuses
}

func newTally() *tally { return &tally{counts: map[string]int{}} }

func (t *tally) add(inst string, r result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := fmt.Sprintf("%s %s %d %s", inst, r.kind, r.status, r.code)
	if r.err != nil {
		key = fmt.Sprintf("%s %s no-answer", inst, r.kind)
	}
	t.counts[key]++
	t.results = append(t.results, r)
	if r.status >= 500 && !(r.status == http.StatusServiceUnavailable && (r.code == "SERVICE_BUSY" || r.kind == "readyz")) {
		t.bad = append(t.bad, inst+" "+r.String())
	}
	if r.status == http.StatusServiceUnavailable && r.code == "SERVICE_BUSY" && !wholeSeconds(r.retryAfter) {
		t.bad = append(t.bad, fmt.Sprintf("%s SERVICE_BUSY without a whole-seconds Retry-After (%q): %s", inst, r.retryAfter, r))
	}
}

func wholeSeconds(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && strconv.Itoa(n) == s
}

// summary renders the counts, sorted.
func (t *tally) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.counts))
	for k := range t.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d; ", strings.TrimSpace(k), t.counts[k])
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// assertNoServerErrors fails the test for every 500 (or other 5xx but a
// SERVICE_BUSY, or readiness's 503), and every SERVICE_BUSY without a
// Retry-After.
func (t *tally) assertNoServerErrors(tt *testing.T) {
	tt.Helper()
	t.mu.Lock()
	bad := slices.Clone(t.bad)
	t.mu.Unlock()
	if len(bad) > 0 {
		shown := bad
		if len(shown) > 10 {
			shown = shown[:10]
		}
		tt.Errorf("%d answers were server errors (want none; a dependency outage is SERVICE_BUSY), first ones:\n  %s",
			len(bad), strings.Join(shown, "\n  "))
	}
}

// assertNoServerErrorsRecorded fails the test when an instance recorded a
// 5xx answer other than 503, including those no client stayed to read (its
// request-duration histogram counts every answer by code).
func assertNoServerErrorsRecorded(t *testing.T, insts ...*testenv.Otad) {
	t.Helper()
	for _, o := range insts {
		for _, code := range []string{"500", "501", "502", "504"} {
			n, err := o.Metric("ota_http_request_duration_seconds_count", `code="`+code+`"`)
			if err != nil {
				t.Fatalf("reading otad %s's metrics: %v", o.Name, err)
			}
			if n != 0 {
				t.Errorf("otad %s recorded %v answers with status %s", o.Name, n, code)
			}
		}
	}
}

// ---- load ----

// poller polls a device's check in a loop until stopped, pausing between
// polls, and keeps every result.
type poller struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	res  map[string][]result // by device id
}

func startPolling(c *client, devs []device, pause time.Duration) *poller {
	p := &poller{stop: make(chan struct{}), res: map[string][]result{}}
	for _, d := range devs {
		p.wg.Go(func() {
			for {
				select {
				case <-p.stop:
					return
				default:
				}
				r := c.check(d)
				p.mu.Lock()
				p.res[d.id] = append(p.res[d.id], r)
				p.mu.Unlock()
				select {
				case <-p.stop:
					return
				case <-time.After(pause):
				}
			}
		})
	}
	return p
}

// halt stops polling and waits for the polls in flight.
func (p *poller) halt() {
	close(p.stop)
	p.wg.Wait()
}

// results returns every result, in no particular order.
func (p *poller) results() []result {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []result
	for _, rs := range p.res {
		out = append(out, rs...)
	}
	return out
}

// of returns a device's results in the order sent.
func (p *poller) of(id string) []result {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.res[id])
}

// phase counts the results sent at or after from and answered before to:
// the requests that lived entirely inside a period.
type phase struct {
	n, ok, busy, other int
	maxBusy, maxOK     time.Duration
	firstOK            time.Time
}

func phaseOf(rs []result, from, to time.Time) phase {
	var p phase
	for _, r := range rs {
		if r.start.Before(from) || !r.start.Add(r.elapsed).Before(to) {
			continue
		}
		p.n++
		switch {
		case r.status == http.StatusOK:
			p.ok++
			p.maxOK = max(p.maxOK, r.elapsed)
			if done := r.start.Add(r.elapsed); p.firstOK.IsZero() || done.Before(p.firstOK) {
				p.firstOK = done
			}
		case r.busy():
			p.busy++
			p.maxBusy = max(p.maxBusy, r.elapsed)
		default:
			p.other++
		}
	}
	return p
}

// inFlightAt counts the results of the requests in flight at at.
func inFlightAt(rs []result, at time.Time) phase {
	var in []result
	for _, r := range rs {
		if r.start.Before(at) && !r.start.Add(r.elapsed).Before(at) {
			in = append(in, r)
		}
	}
	return phaseOf(in, time.Time{}, time.Now().Add(time.Hour))
}

func (p phase) String() string {
	return fmt.Sprintf("%d requests: %d ok (max %v), %d SERVICE_BUSY (max %v), %d other",
		p.n, p.ok, p.maxOK.Round(time.Millisecond), p.busy, p.maxBusy.Round(time.Millisecond), p.other)
}

// readyWatch polls /readyz and keeps every answer.
type readyWatch struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	rs   []result
}

func watchReadiness(c *client, every time.Duration) *readyWatch {
	rw := &readyWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(rw.done)
		for {
			r := c.readyz()
			rw.mu.Lock()
			rw.rs = append(rw.rs, r)
			rw.mu.Unlock()
			select {
			case <-rw.stop:
				return
			case <-time.After(every):
			}
		}
	}()
	return rw
}

func (rw *readyWatch) halt() []result {
	close(rw.stop)
	<-rw.done
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return slices.Clone(rw.rs)
}

// readinessAround finds, in readiness answers, the first one sent after
// from that reports check unavailable, and the first 200 sent after to.
func readinessAround(rs []result, check string, from, to time.Time) (down, up *result) {
	for i := range rs {
		r := &rs[i]
		if down == nil && !r.start.Before(from) && r.status == http.StatusServiceUnavailable {
			if v := readinessOf(*r); v.Status == "unavailable" && v.Checks[check] != "" && v.Checks[check] != "ok" {
				down = r
			}
		}
		if up == nil && !r.start.Before(to) && r.status == http.StatusOK {
			up = r
		}
	}
	return down, up
}

// ---- the database ----

// integrity lists what must never be in the database, whatever failed.
var integrity = []struct{ what, query string }{
	{"devices with more than one active task", `SELECT count(*) FROM (SELECT device_id FROM tasks
		WHERE status IN ('pending','downloading','downloaded','installing') GROUP BY device_id HAVING count(*) > 1) d`},
	{"tasks without their device, firmware, or a rollout of that firmware", `SELECT count(*) FROM tasks t
		LEFT JOIN devices d ON d.device_id = t.device_id LEFT JOIN firmwares f ON f.id = t.firmware_id
		LEFT JOIN rollouts r ON r.id = t.rollout_id
		WHERE d.device_id IS NULL OR f.id IS NULL OR r.id IS NULL OR r.firmware_id <> t.firmware_id`},
	{"rollouts without their firmware", `SELECT count(*) FROM rollouts r LEFT JOIN firmwares f ON f.id = r.firmware_id WHERE f.id IS NULL`},
	{"events without their task", `SELECT count(*) FROM task_events e LEFT JOIN tasks t ON t.id = e.task_id WHERE t.id IS NULL`},
	{"tasks a device moved on without the event recorded", `SELECT count(*) FROM tasks t
		WHERE t.status IN ('downloading','downloaded','installing','failed')
		AND NOT EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = t.id)`},
	{"pending tasks with an event recorded (event kept, status not)", `SELECT count(*) FROM tasks t
		WHERE t.status = 'pending' AND EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = t.id)`},
	{"events stamped after their task's last change", `SELECT count(*) FROM task_events e JOIN tasks t ON t.id = e.task_id
		WHERE e.created_at > t.updated_at OR e.created_at < t.created_at`},
	{"tasks whose fields contradict their status", `SELECT count(*) FROM tasks WHERE updated_at < created_at
		OR (status = 'succeeded' AND progress <> 100) OR (status = 'cancelled' AND error_code IS NULL)
		OR (status = 'pending' AND progress <> 0) OR action_id IS NULL`},
}

// assertIntact runs the integrity queries on the test's database.
func (w *world) assertIntact() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, q := range integrity {
		var n int
		if err := w.db.GetContext(ctx, &n, q.query); err != nil {
			w.t.Fatalf("integrity query (%s): %v", q.what, err)
		}
		if n != 0 {
			w.t.Errorf("database: %d %s, want none", n, q.what)
		}
	}
}

// taskRow is a task as stored.
type taskRow struct {
	ID         string `db:"id"`
	DeviceID   string `db:"device_id"`
	FirmwareID string `db:"firmware_id"`
	Status     string `db:"status"`
	Progress   int    `db:"progress"`
}

// tasksOf returns the tasks of the devices, by device id.
func (w *world) tasksOf(devs []device) map[string][]taskRow {
	w.t.Helper()
	ids := make([]string, len(devs))
	for i, d := range devs {
		ids[i] = d.id
	}
	var rows []taskRow
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.db.SelectContext(ctx, &rows, `SELECT id::text, device_id, firmware_id::text, status, progress
		FROM tasks WHERE device_id = ANY($1) ORDER BY created_at, id`, pq.Array(ids)); err != nil {
		w.t.Fatal(err)
	}
	out := map[string][]taskRow{}
	for _, r := range rows {
		out[r.DeviceID] = append(out[r.DeviceID], r)
	}
	return out
}

// assertOneTaskEach checks that each device has exactly one task, active,
// and that it is the one every 200 it was given named: nothing duplicated,
// nothing handed out and then lost.
func (w *world) assertOneTaskEach(devs []device, handedOut func(device) []string) {
	w.t.Helper()
	tasks := w.tasksOf(devs)
	for _, d := range devs {
		ts := tasks[d.id]
		if len(ts) != 1 || !isActive(ts[0].Status) {
			w.t.Errorf("device %s: tasks %+v, want exactly one, active", d.id, ts)
			continue
		}
		for _, id := range handedOut(d) {
			if id != ts[0].ID {
				w.t.Errorf("device %s was handed task %s, but the database has %s", d.id, id, ts[0].ID)
				break
			}
		}
	}
}

func isActive(status string) bool {
	switch status {
	case "pending", "downloading", "downloaded", "installing":
		return true
	}
	return false
}

// waitLockWaiters waits until n sessions of otad (application_name, or any
// session but the test's own when app is "") on the test's database wait
// for a lock, for at most d.
func (w *world) waitLockWaiters(n int, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Second)
	defer cancel()
	end := time.Now().Add(d)
	for {
		var waiting int
		if err := w.db.GetContext(ctx, &waiting, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`); err != nil {
			return err
		}
		if waiting >= n {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%d sessions waiting for a lock after %v, want %d", waiting, d, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---- Redis ----

// lockKey is where rueidislock keeps the lock {device_id}:{firmware_id}
// under otad's prefix (docs/DOMAIN.md check rule 7).
func lockKey(deviceID, firmwareID string) string {
	return "ota:lock:0:" + deviceID + ":" + firmwareID
}

func redisClient(t *testing.T, redisURL string) rueidis.Client {
	t.Helper()
	opt, err := rueidis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("connecting to Redis at %s: %v", redisURL, err)
	}
	t.Cleanup(c.Close)
	return c
}

// pttl is the key's remaining validity: -2 when it does not exist, -1 when
// it never expires.
func pttl(rc rueidis.Client, key string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ms, err := rc.Do(ctx, rc.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		return 0, err
	}
	if ms < 0 {
		return time.Duration(ms), nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// getKey returns a key's value, "" when it does not exist.
func getKey(rc rueidis.Client, key string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := rc.Do(ctx, rc.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", nil
	}
	return v, err
}

// lockKeys lists the lock keys of the given devices that exist now, with
// their remaining validity.
func lockKeys(rc rueidis.Client, devs []device) (map[string]time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out := map[string]time.Duration{}
	for _, d := range devs {
		var cursor uint64
		for {
			e, err := rc.Do(ctx, rc.B().Scan().Cursor(cursor).Match("ota:lock:*:"+d.id+":*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				return nil, err
			}
			for _, k := range e.Elements {
				v, err := pttl(rc, k)
				if err != nil {
					return nil, err
				}
				if v != -2 {
					out[k] = v
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return out, nil
}

// ---- helpers ----

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// uniq makes an identifier no other test (or earlier run) uses.
func uniq(prefix string) string { return prefix + "-" + randomHex(6) }

// waitFor polls cond every 10ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
