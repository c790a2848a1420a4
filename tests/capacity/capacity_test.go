// Package capacity measures what one request costs the service, Postgres
// and Redis — CPU-seconds, WAL bytes, Redis commands — for the capacity
// model of docs/SCALING.md. It runs only when OTA_CAPACITY=1:
//
//	OTA_CAPACITY=1 go test ./tests/capacity -run TestCapacityCosts -v -timeout 10m
//
// Postgres and Redis are private to the run (initdb on a free port, a
// redis-server on another), so their CPU and WAL counters see this run's
// requests only, however loaded the shared machine is. CPU-seconds per
// request are read from /proc (utime + stime of otad, of the postmaster
// and its backends, of redis-server): unlike requests per second they
// hardly move with the machine's load.
package capacity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/tests/testenv"
)

const (
	adminToken = "capacity-admin-token-0123456789"
	model      = "cap"
	clkTck     = 100 // USER_HZ on Linux
)

func TestMain(m *testing.M) { os.Exit(testenv.RunWithOtad(m)) }

// cpuOf is the CPU-seconds (user + system) the processes have used.
func cpuOf(pids ...int) float64 {
	var ticks int64
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + k
	}
	return float64(ticks) / clkTck
}

// serverCPU is the CPU-seconds of a server process and all its children,
// live (their utime + stime) or exited (the parent's cutime + cstime, as
// it reaped them): a postmaster and its backends, however many came and
// went.
func serverCPU(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	children := childrenOf(pid)[1:]
	return float64(ticks)/clkTck + cpuOf(children...)
}

// childrenOf lists pid and its children (a postmaster's backends).
func childrenOf(pid int) []int {
	out := []int{pid}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		if err != nil {
			continue
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if pp, _ := strconv.Atoi(f[1]); pp == pid {
			out = append(out, c)
		}
	}
	return out
}

// selfCPU is this process's CPU-seconds (the load generator).
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// privateRedis starts a redis-server with no persistence on a free port.
func privateRedis(t *testing.T) (url string, pid int) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(testenv.RequireServicesEnv) == "1" {
			t.Fatal("no redis-server binary")
		}
		testenv.Skip(t, "redis-server", "no redis-server binary for a private Redis")
	}
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("private redis-server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Sprintf("redis://127.0.0.1:%d/0", port), cmd.Process.Pid
}

// redisCommands is the private Redis's total commands processed.
func redisCommands(t *testing.T, url string) int64 {
	t.Helper()
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "redis://"), "/0")
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command("redis-cli", "-h", host, "-p", port, "INFO", "stats").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "total_commands_processed:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

type meter struct {
	t                 *testing.T
	db                *sqlx.DB
	otadPID, pgPID    int
	redisURL          string
	redisPID          int
	rows              []string
	otadCPU, pgCPU    float64
	redisCPU, selfCPU float64
	wal               string
	redisN            int64
	start             time.Time
}

func (m *meter) begin() {
	m.t.Helper()
	if err := m.db.Get(&m.wal, `SELECT pg_current_wal_lsn()::text`); err != nil {
		m.t.Fatal(err)
	}
	m.otadCPU, m.pgCPU, m.redisCPU, m.selfCPU = cpuOf(m.otadPID), serverCPU(m.pgPID), cpuOf(m.redisPID), selfCPU()
	m.redisN = redisCommands(m.t, m.redisURL)
	m.start = time.Now()
}

func (m *meter) end(what string, n int) {
	m.t.Helper()
	wall := time.Since(m.start)
	time.Sleep(400 * time.Millisecond) // the write-behind's flush belongs to the requests
	var wal int64
	if err := m.db.Get(&wal, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, m.wal); err != nil {
		m.t.Fatal(err)
	}
	per := func(v float64) string { return fmt.Sprintf("%.1f µs", v/float64(n)*1e6) }
	row := fmt.Sprintf("| %s | %d | %s | %s | %s | %.2f | %d | %s | %.0f/s |", what, n,
		per(cpuOf(m.otadPID)-m.otadCPU), per(serverCPU(m.pgPID)-m.pgCPU), per(cpuOf(m.redisPID)-m.redisCPU),
		float64(redisCommands(m.t, m.redisURL)-m.redisN)/float64(n), wal/int64(n), per(selfCPU()-m.selfCPU), float64(n)/wall.Seconds())
	m.rows = append(m.rows, row)
	m.t.Log(row)
}

type device struct{ id, token, task string }

// fire sends one request per device, concurrency at a time, and fails the
// test on an unexpected status.
func fire(t *testing.T, client *http.Client, base string, devs []device, concurrency int, req func(d *device) (string, any, int)) {
	t.Helper()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(devs) || failed.Load() != nil {
					return
				}
				d := &devs[i]
				path, body, want := req(d)
				b, _ := json.Marshal(body)
				r, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
				if err != nil {
					failed.Store(err.Error())
					return
				}
				r.Header.Set("Authorization", "Bearer "+d.token)
				r.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(r)
				if err != nil {
					failed.Store(err.Error())
					return
				}
				var out struct {
					Task *struct {
						ID string `json:"id"`
					} `json:"task"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if resp.StatusCode != want {
					failed.Store(fmt.Sprintf("%s: %d, want %d", path, resp.StatusCode, want))
					return
				}
				if out.Task != nil {
					d.task = out.Task.ID
				}
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatal(f)
	}
}

// admin makes an admin call that must create what it posts.
func admin(t *testing.T, base, path string, body any) map[string]any {
	t.Helper()
	code, out := testenv.PostJSON(t, base+path, adminToken, body)
	if code != http.StatusCreated {
		t.Fatalf("%s: %d %v", path, code, out)
	}
	return out
}

// TestCapacityCosts measures per-request costs of the requests the
// capacity model counts: a poll that writes its last_seen_at, a poll
// within OTA_LAST_SEEN_RESOLUTION (no write), a poll that creates a task,
// a poll that reuses it, a progress event and a success.
func TestCapacityCosts(t *testing.T) {
	if os.Getenv("OTA_CAPACITY") != "1" {
		t.Skip("a measurement, not a test: OTA_CAPACITY=1 runs it (docs/SCALING.md)")
	}
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("OTA_CAPACITY_DEVICES")); err == nil && v > 0 {
		n = v
	}
	pg := testenv.StartPrivatePrimary(t)
	db := pg.Open(t, pg.PrimaryURL)
	pgPID, err := pg.PrimaryPID()
	if err != nil {
		t.Fatal(err)
	}
	redisURL, redisPID := privateRedis(t)
	if _, err := db.Exec(`INSERT INTO devices (device_id, model, current_version, token_hash, last_seen_at, created_at)
		SELECT 'cap-' || i, $1, '1.0.0', sha256(('tok-cap-' || i)::bytea), now() - interval '2 hours', now() - interval '1 day'
		FROM generate_series(1, $2) i`, model, n); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`VACUUM ANALYZE devices`); err != nil {
		t.Fatal(err)
	}
	devs := make([]device, n)
	for i := range devs {
		devs[i] = device{id: "cap-" + strconv.Itoa(i+1), token: "tok-cap-" + strconv.Itoa(i+1)}
	}
	o := testenv.StartOtad(t, testenv.OtadConfig{Name: "capacity", DatabaseURL: pg.PrimaryURL, RedisURL: redisURL, AdminToken: adminToken,
		Env: map[string]string{"OTA_DEVICE_RATE_LIMIT": "0", "OTA_LOG_LEVEL": "error"}})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	const concurrency = 32
	m := &meter{t: t, db: db, otadPID: o.Pid(), pgPID: pgPID, redisURL: redisURL, redisPID: redisPID}
	check := func(d *device) (string, any, int) {
		return "/api/v1/devices/" + d.id + "/ota/check", map[string]string{"model": model, "current_version": "1.0.0"}, http.StatusOK
	}
	// Warm the pools and prepared statements on a few devices (their
	// last_seen_at is written; they are a rounding error below).
	fire(t, client, o.URL, devs[:200], concurrency, check)

	m.begin()
	fire(t, client, o.URL, devs, concurrency, check)
	m.end("check, no update, last_seen_at written (first poll past the resolution)", n)
	m.begin()
	fire(t, client, o.URL, devs, concurrency, check)
	m.end("check, no update, within the resolution (nothing written)", n)

	sum := strings.Repeat("ab", 32)
	fw := admin(t, o.URL, "/api/v1/admin/firmwares", map[string]any{"model": model, "version": "2.0.0",
		"url": "https://fw.example/cap.bin", "size_bytes": 1 << 20, "sha256": sum})
	admin(t, o.URL, "/api/v1/admin/rollouts", map[string]any{"firmware_id": fw["id"], "percentage": 100})
	time.Sleep(1500 * time.Millisecond) // the catalog cache hears of the rollout
	m.begin()
	fire(t, client, o.URL, devs, concurrency, check)
	m.end("check that creates a task (lock, transaction)", n)
	for _, d := range devs {
		if d.task == "" {
			t.Fatalf("device %s got no task", d.id)
		}
	}
	m.begin()
	fire(t, client, o.URL, devs, concurrency, check)
	m.end("check that reuses its task, within the resolution", n)
	m.begin()
	fire(t, client, o.URL, devs, concurrency, func(d *device) (string, any, int) {
		return "/api/v1/devices/" + d.id + "/ota/tasks/" + d.task + "/events",
			map[string]any{"event_id": "p10", "status": "downloading", "progress": 10}, http.StatusOK
	})
	m.end("progress event", n)
	for _, status := range []string{"downloaded", "installing"} {
		fire(t, client, o.URL, devs, concurrency, func(d *device) (string, any, int) {
			return "/api/v1/devices/" + d.id + "/ota/tasks/" + d.task + "/events",
				map[string]any{"event_id": status, "status": status}, http.StatusOK
		})
	}
	m.begin()
	fire(t, client, o.URL, devs, concurrency, func(d *device) (string, any, int) {
		return "/api/v1/devices/" + d.id + "/ota/tasks/" + d.task + "/events",
			map[string]any{"event_id": "done", "status": "succeeded"}, http.StatusOK
	})
	m.end("success event (a rollout without threshold or stages)", n)

	// At OTA_LOG_LEVEL=error otad does not log "stopped"; the numbers
	// are taken, so end it without the clean-stop check.
	_ = o.Kill()
	m.pgbench(pg.PrimaryURL)
	report := "| request | n | otad CPU/req | Postgres CPU/req | Redis CPU/req | Redis cmds/req | WAL bytes/req | generator CPU/req | rate (load-sensitive) |\n" +
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n" + strings.Join(m.rows, "\n") + "\n"
	t.Logf("\n%s", report)
	if out := os.Getenv("OTA_CAPACITY_OUT"); out != "" {
		if err := os.WriteFile(filepath.Clean(out), []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// checksServed sums ota_checks_total over its outcomes.
func checksServed(t *testing.T, base string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	var total float64
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(l, "ota_checks_total") {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += v
		}
	}
	return total
}

// TestCapacityModelAt1M checks the model against the fleet simulator
// (tests/load) at 1,000,000 devices: it seeds them (COPY) on a private
// Postgres, then polls at the rate of a 1M fleet polling hourly (278/s)
// and at a higher open-loop rate, and compares otad's CPU-seconds per
// check with the per-check cost TestCapacityCosts measured on 20,000
// devices (otad's CPU is its own process's; Postgres's is not compared
// here, as the simulator's seeding and final consistency check run on the
// same server).
//
//	OTA_CAPACITY=1 go test ./tests/capacity -run TestCapacityModelAt1M -v -timeout 20m
func TestCapacityModelAt1M(t *testing.T) {
	if os.Getenv("OTA_CAPACITY") != "1" {
		t.Skip("a measurement, not a test: OTA_CAPACITY=1 runs it (docs/SCALING.md)")
	}
	devices := "1000000"
	if v := os.Getenv("OTA_CAPACITY_SIM_DEVICES"); v != "" {
		devices = v
	}
	pg := testenv.StartPrivatePrimary(t)
	redisURL, _ := privateRedis(t)
	o := testenv.StartOtad(t, testenv.OtadConfig{Name: "capacity-1m", DatabaseURL: pg.PrimaryURL, RedisURL: redisURL, AdminToken: adminToken,
		Env: map[string]string{"OTA_DEVICE_RATE_LIMIT": "0", "OTA_LOG_LEVEL": "error"}})
	defer func() { _ = o.Kill() }()
	sim := filepath.Join(t.TempDir(), "loadsim")
	if out, err := exec.Command("go", "build", "-o", sim, "github.com/ai-device/ota/tests/load").CombinedOutput(); err != nil {
		t.Fatalf("building the simulator: %v\n%s", err, out)
	}
	run := func(rate, duration string) string {
		t.Helper()
		cmd := exec.Command(sim, "-urls", o.URL, "-admin-token", adminToken, "-database-url", pg.PrimaryURL, "-seed",
			"-devices", devices, "-model", "sim1m", "-mode", "poll", "-rate", rate, "-duration", duration, "-concurrency", "64", "-quiet")
		cmd.Env = append(os.Environ(), "OTA_LOAD_TOKEN_SECRET=capacity")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("simulator: %v\n%s", err, out)
		}
		return string(out)
	}
	start := time.Now()
	t.Logf("seeding %s devices (simulator, COPY):\n%s(%v)", devices, run("50", "2s"), time.Since(start).Round(time.Second))
	for _, rate := range []string{"278", "1000"} {
		cpu0, n0 := cpuOf(o.Pid()), checksServed(t, o.URL)
		out := run(rate, "20s")
		cpu, n := cpuOf(o.Pid())-cpu0, checksServed(t, o.URL)-n0
		t.Logf("simulator at -rate %s for 20s on %s devices: %.0f checks, otad %.1f µs CPU per check (%.3f cores)\n%s",
			rate, devices, n, cpu/n*1e6, cpu/20, out)
	}
}

// pgbench measures, on the same private server, what one `pgbench -N`
// transaction (BEGIN; UPDATE; SELECT; INSERT; END) costs Postgres, the
// yardstick docs/SCALING.md sets creations against.
func (m *meter) pgbench(primaryURL string) {
	t := m.t
	t.Helper()
	bin := "pgbench"
	if _, err := exec.LookPath(bin); err != nil {
		if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
			bin = filepath.Join(strings.TrimSpace(string(out)), "pgbench")
		}
	}
	if _, err := os.Stat(bin); err != nil && bin != "pgbench" {
		t.Logf("no pgbench: the pgbench -N comparison is skipped")
		return
	}
	if _, err := m.db.Exec(`CREATE DATABASE pgb`); err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(primaryURL, "/ota?", "/pgb?", 1)
	if out, err := exec.Command(bin, "-i", "-q", "-s", "10", url).CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	m.begin()
	out, err := exec.Command(bin, "-n", "-N", "-M", "prepared", "-c", "8", "-j", "2", "-T", "10", url).CombinedOutput()
	if err != nil {
		t.Fatalf("pgbench -N: %v\n%s", err, out)
	}
	var n int
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "number of transactions actually processed: "); ok {
			n, _ = strconv.Atoi(strings.Fields(v)[0])
		}
	}
	if n == 0 {
		t.Fatalf("pgbench -N: no transaction count in\n%s", out)
	}
	m.end("pgbench -N -M prepared -c 8 -j 2 -T 10 transaction (scale 10)", n)
}

// TestStagedRolloutAt1M rolls a firmware out in stages (1, 10, 50, 100 %,
// each gate a tenth of the first stage's devices finished, 95 % of them
// succeeded: 1,000 at a million devices) across
// OTA_CAPACITY_ROLLOUT_DEVICES simulated devices (default 1,000,000)
// served by two otad replicas on one private Postgres and Redis, with no
// operator call: the devices poll, take their task, report their way to
// succeeded, and the run ends once every device has finished. The
// simulator's report gives the time each stage opened and the time to
// 100 % of the devices, events per second and the checks' p99 during the
// rollout (docs/SCALING.md). The simulator gives up after 36 ms a device
// (at least 3 h): 10 h at a million, where the 500,000-device run's pace
// predicts about 3.7 h on two cores.
//
//	OTA_CAPACITY=1 go test ./tests/capacity -run TestStagedRolloutAt1M -v -timeout 11h
func TestStagedRolloutAt1M(t *testing.T) {
	if os.Getenv("OTA_CAPACITY") != "1" {
		t.Skip("a measurement, not a test: OTA_CAPACITY=1 runs it (docs/SCALING.md)")
	}
	devices := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("OTA_CAPACITY_ROLLOUT_DEVICES")); err == nil && v > 0 {
		devices = v
	}
	pg := testenv.StartPrivatePrimary(t)
	// A rollout writes every task several times: without autovacuum the
	// tasks table held four dead rows to a live one by the end of a
	// 500,000-device run, and 16 MB of shared_buffers sent its reads to the
	// page cache. The run measures the server a deployment has.
	pg.RestartPrimaryWith(t, "autovacuum = on\nshared_buffers = 1GB")
	var av, sb string
	if err := pg.Open(t, pg.PrimaryURL).QueryRowx(`SELECT current_setting('autovacuum'), current_setting('shared_buffers')`).Scan(&av, &sb); err != nil || av != "on" || sb != "1GB" {
		t.Fatalf("the private server restarted with autovacuum %q, shared_buffers %q (%v); want on, 1GB", av, sb, err)
	}
	redisURL, _ := privateRedis(t)
	// The devices poll as real agents do, every OTA_POLL_INTERVAL while
	// nothing is offered: a second per thousand devices by default, so a
	// waiting fleet checks ~1,000 times a second whatever its size and
	// the cores go to the devices walking their tasks.
	poll := time.Duration(max(1, devices/1000)) * time.Second
	if v, err := time.ParseDuration(os.Getenv("OTA_CAPACITY_POLL_INTERVAL")); err == nil && v >= time.Second {
		poll = v
	}
	replicas := testenv.StartOtads(t, testenv.OtadConfig{DatabaseURL: pg.PrimaryURL, RedisURL: redisURL, AdminToken: adminToken,
		Env: map[string]string{"OTA_DEVICE_RATE_LIMIT": "0", "OTA_LOG_LEVEL": "error", "OTA_POLL_INTERVAL": poll.String()}}, "rollout-a", "rollout-b")
	defer func() { // at error level they do not log their clean stop
		for _, r := range replicas {
			_ = r.Kill()
		}
	}()
	sim := filepath.Join(t.TempDir(), "loadsim")
	if out, err := exec.Command("go", "build", "-o", sim, "github.com/ai-device/ota/tests/load").CombinedOutput(); err != nil {
		t.Fatalf("building the simulator: %v\n%s", err, out)
	}
	cpu0 := cpuOf(replicas[0].Pid(), replicas[1].Pid())
	cmd := exec.Command(sim, "-urls", replicas[0].URL+","+replicas[1].URL, "-admin-token", adminToken, "-database-url", pg.PrimaryURL,
		"-seed", "-devices", strconv.Itoa(devices), "-model", "rollout1m", "-publish", "-stages", "1,10,50,100", "-stage-min-finished", strconv.Itoa(max(1, devices/1000)),
		"-mode", "mixed", "-fail-rate", "0", "-until-complete", "-honour-poll", "-duration", max(3*time.Hour, time.Duration(devices)*36*time.Millisecond).String(), "-concurrency", "128", "-quiet")
	cmd.Env = append(os.Environ(), "OTA_LOAD_TOKEN_SECRET=capacity")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("simulator: %v\n%s", err, out)
	}
	t.Logf("staged rollout across %d devices, two replicas, devices polling every %s while nothing is offered: otad CPU %.0f s in all\n%s",
		devices, poll, cpuOf(replicas[0].Pid(), replicas[1].Pid())-cpu0, out)
}
