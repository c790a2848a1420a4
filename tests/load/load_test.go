package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/tests/testenv"
)

// ---- unit tests: no service needed ----

func TestHistogramBuckets(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		v := rng.Uint64() >> rng.IntN(64)
		i := histIndex(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d, out of range", v, i)
		}
		if up := histUpper(i); up < v {
			t.Fatalf("histUpper(histIndex(%d)) = %d, below the value", v, up)
		}
		if i > 0 && histUpper(i-1) >= v {
			t.Fatalf("value %d also fits bucket %d", v, i-1)
		}
	}
	for v := uint64(0); v < 64; v++ {
		if histIndex(v) != int(v) || histUpper(int(v)) != v {
			t.Fatalf("small value %d is not exact", v)
		}
	}
	if histIndex(^uint64(0)) != histBuckets-1 {
		t.Fatalf("the largest value lands in %d, want %d", histIndex(^uint64(0)), histBuckets-1)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	if h.quantile(0.5) != 0 || h.maximum() != 0 || h.mean() != 0 {
		t.Fatal("an empty histogram must answer 0")
	}
	// 1..10000 ms: quantile q is q·10 s, within the bucket precision.
	for i := 1; i <= 10_000; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	for _, q := range []float64{0.5, 0.95, 0.99} {
		want := time.Duration(q * 10_000 * float64(time.Millisecond))
		got := h.quantile(q)
		if got < want || float64(got) > float64(want)*1.04 {
			t.Errorf("p%g = %v, want %v (+4%%)", q*100, got, want)
		}
	}
	if h.maximum() != 10*time.Second || h.quantile(1) != 10*time.Second {
		t.Errorf("max = %v, p100 = %v, want 10s exactly", h.maximum(), h.quantile(1))
	}
	if h.count() != 10_000 {
		t.Errorf("count = %d", h.count())
	}
	if m := h.mean(); m < 5000*time.Millisecond || m > 5001*time.Millisecond {
		t.Errorf("mean = %v, want 5.0005s", m)
	}
}

func TestDeviceTokens(t *testing.T) {
	a, b := deviceToken("k", deviceID("m", 1)), deviceToken("k", deviceID("m", 2))
	if a != deviceToken("k", deviceID("m", 1)) {
		t.Fatal("tokens must be deterministic: the simulator recomputes them on every run")
	}
	if a == b || a == deviceToken("other", deviceID("m", 1)) {
		t.Fatal("tokens must differ by device and by secret")
	}
	for _, tok := range []string{a, b} {
		if !strings.HasPrefix(tok, "sim_") || strings.ContainsAny(tok, " \t/+=") || len(tok) > 64 {
			t.Fatalf("token %q is not a plain bearer token", tok)
		}
	}
	if domain.HashToken(a) == domain.HashToken(b) {
		t.Fatal("distinct tokens must hash apart (token_hash is unique)")
	}
	if id := deviceID(strings.Repeat("m", 56), maxDevices-1); len(id) > domain.MaxIDLen {
		t.Fatalf("device id %q is longer than %d", id, domain.MaxIDLen)
	}
}

func TestFleetIndex(t *testing.T) {
	f := newFleet("m.1", "1.0.0", 12)
	for i, d := range f.devices {
		if got, ok := f.index(d.id); !ok || got != i {
			t.Fatalf("index(%q) = %d, %v", d.id, got, ok)
		}
	}
	for _, id := range []string{"m.1-0000012", "m.1-12", "m.2-0000001", "m.1-000000x", "m.1-00000001"} {
		if _, ok := f.index(id); ok {
			t.Errorf("index(%q) accepted", id)
		}
	}
}

func TestUUIDv7(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	prev := ""
	for i := range 1000 {
		s := uuidV7(t0.Add(time.Duration(i)*time.Millisecond), rng)
		u, err := uuid.Parse(s)
		if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("%q: %v, version %d, variant %v", s, err, u.Version(), u.Variant())
		}
		if sec, nsec := u.Time().UnixTime(); time.Unix(sec, nsec).UnixMilli() != t0.Add(time.Duration(i)*time.Millisecond).UnixMilli() {
			t.Fatalf("%q carries time %v", s, time.Unix(sec, nsec))
		}
		if s <= prev {
			t.Fatalf("%q does not sort after %q", s, prev)
		}
		prev = s
	}
}

func TestParseConfig(t *testing.T) {
	env := map[string]string{"OTA_ADMIN_TOKEN": "from-env-admin-token", "OTA_DATABASE_URL": "postgres://x@h/db"}
	getenv := func(k string) string { return env[k] }
	var stderr bytes.Buffer
	cfg, err := parseConfig([]string{"-urls", "http://a:1/, http://b:2", "-mode", "burst", "-devices", "7"}, getenv, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cfg.URLs) != "[http://a:1 http://b:2]" || cfg.Mode != modeBurst || cfg.Devices != 7 ||
		cfg.AdminToken != env["OTA_ADMIN_TOKEN"] || cfg.DatabaseURL != env["OTA_DATABASE_URL"] {
		t.Fatalf("config = %+v", cfg)
	}
	if v := cfg.firmwareVersion(time.Unix(1700000000, 0)); v != "2.1700000000.0" {
		t.Fatalf("firmware version %q", v)
	}
	for _, args := range [][]string{
		{"-mode", "storm"},
		{"-devices", "0"},
		{"-urls", "ftp://x"},
		{"-fail-rate", "2"},
		{"-model", "bad model"},
		{"-seed", "-database-url", ""},
		{"-rollout-percent", "101"},
		{"-stages", "1,x", "-publish"},
		{"-stages", "1,10", "-publish", "-mode", "burst"},
		{"-stages", "1,10"},
		{"-until-complete"},
		{"-until-complete", "-publish", "-mode", "poll"},
		{"extra"},
	} {
		if _, err := parseConfig(args, getenv, &stderr); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
	if _, err := parseConfig(nil, func(string) string { return "" }, &stderr); err == nil ||
		!strings.Contains(err.Error(), "-admin-token") {
		t.Errorf("registering without an admin token: %v", err)
	}
	if code := mainCode(context.Background(), []string{"-mode", "storm"}, getenv, &stderr, &stderr); code != 2 {
		t.Errorf("bad flags exit %d, want 2", code)
	}
}

func TestResumeStepKeepsTheOrder(t *testing.T) {
	rank := map[string]int{"pending": 0, "downloading": 1, "downloaded": 2, "installing": 3, "succeeded": 4}
	for st, r := range rank {
		if st == "succeeded" {
			continue
		}
		if got := walkSteps[resumeStep(st)].status; rank[got] < r {
			t.Errorf("a task at %s resumes with %s, a step back", st, got)
		}
	}
	for i := 1; i < len(walkSteps); i++ {
		if rank[walkSteps[i].status] < rank[walkSteps[i-1].status] {
			t.Errorf("walk step %d goes back", i)
		}
	}
	if walkSteps[len(walkSteps)-1].status != "succeeded" {
		t.Error("the walk must end succeeded")
	}
}

// ---- the simulator smoke: real otad processes ----

// TestSimulatorSmoke is the short simulator smoke of make test: two otad
// instances on a fresh database, 50 devices in mixed mode for ~3s, then a
// burst and an API-registered fleet. It asserts the invariants, never a
// timing.
func TestSimulatorSmoke(t *testing.T) {
	_, dbURL := testenv.PostgresDB(t)
	redisURL := testenv.RedisURL(t)
	admin := "smoke-admin-token-" + fmt.Sprint(time.Now().UnixNano())
	instances := testenv.StartOtads(t, testenv.OtadConfig{
		DatabaseURL: dbURL, RedisURL: redisURL, AdminToken: admin,
		Env: map[string]string{"OTA_DEVICE_RATE_LIMIT": "0"},
	}, "a", "b")
	urls := []string{instances[0].URL, instances[1].URL}
	ctx := context.Background()
	base := config{
		URLs: urls, AdminToken: admin, DatabaseURL: dbURL, Model: "smoke", BaseVersion: "1.0.0",
		TokenSecret: "smoke-secret", Concurrency: 8, Dup: 4, FailRate: 0.2, RolloutPercent: 100,
		Timeout: 10 * time.Second, Quiet: true,
	}
	runOK := func(t *testing.T, cfg config) *report {
		t.Helper()
		if err := cfg.validate(); err != nil {
			t.Fatal(err)
		}
		r, err := run(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		var text bytes.Buffer
		r.writeText(&text)
		if !r.OK {
			t.Fatalf("invariants broke:\n%s", text.String())
		}
		if r.Consistency == nil {
			t.Fatalf("no database check:\n%s", text.String())
		}
		t.Logf("\n%s", text.String())
		return r
	}

	t.Run("mixed", func(t *testing.T) {
		cfg := base
		cfg.Devices, cfg.Seed, cfg.TasksHistory, cfg.Publish = 50, true, 200, true
		cfg.Mode, cfg.Duration = modeMixed, 3*time.Second
		r := runOK(t, cfg)
		if r.Seeded.Inserted != 50 || r.History == nil || r.History.Inserted != 200 {
			t.Errorf("setup: devices %+v, history %+v", r.Seeded, r.History)
		}
		if r.Calls["check"].OK == 0 || r.Calls["event"].OK == 0 {
			t.Errorf("no successful checks or events: %+v", r.Calls)
		}
		// Only that work happened: how much depends on the machine.
		if c := r.Consistency; c.HandedTasks == 0 || c.RunTasks == 0 {
			t.Errorf("no task was handed out: %+v", c)
		}
	})

	t.Run("burst", func(t *testing.T) {
		cfg := base
		cfg.Devices, cfg.Seed, cfg.Publish, cfg.RolloutPercent = 30, true, true, 50
		cfg.Mode, cfg.Duration = modeBurst, 20*time.Second
		cfg.Version = "3.0.0"
		r := runOK(t, cfg)
		if r.Seeded.Existing != 30 || r.Seeded.Inserted != 0 || r.Seeded.Mismatched != 0 {
			t.Errorf("seeding again must reuse every device: %+v", r.Seeded)
		}
		b := r.Consistency.Burst
		if b == nil || b.Admitted == 0 || b.Admitted == 30 || r.Sim.DupGroups != 30 {
			t.Fatalf("burst: %+v, groups %d", b, r.Sim.DupGroups)
		}
		if got := r.Calls["check"].Count; got != 30*4 {
			t.Errorf("burst sent %d checks, want %d", got, 30*4)
		}
	})

	t.Run("staged", func(t *testing.T) {
		// A staged 10% → 100% plan widens by itself as walked devices
		// succeed, with no operator call.
		cfg := base
		cfg.Model, cfg.Devices, cfg.Seed, cfg.Publish, cfg.FailRate = "smoke-staged", 100, true, true, 0
		cfg.Stages, cfg.StageMinFinished = []int{10, 100}, 3
		cfg.Mode, cfg.Duration = modeWalk, 4*time.Second
		runOK(t, cfg)
		db, err := sqlx.Connect("postgres", dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var pct, tasks int
		if err := db.QueryRow(`SELECT r.percentage, (SELECT count(*) FROM tasks t WHERE t.rollout_id = r.id)
			FROM rollouts r JOIN firmwares f ON f.id = r.firmware_id WHERE f.model = 'smoke-staged'`).Scan(&pct, &tasks); err != nil {
			t.Fatal(err)
		}
		if pct != 100 || tasks <= 20 {
			t.Fatalf("after the walk the rollout is at %d%% with %d tasks, want 100%% and more than the first stage's", pct, tasks)
		}
	})

	t.Run("until-complete", func(t *testing.T) {
		// The run ends once every device has finished in the staged
		// rollout, long before -duration, and says when each stage opened.
		cfg := base
		cfg.Model, cfg.Devices, cfg.Seed, cfg.Publish, cfg.FailRate = "smoke-complete", 60, true, true, 0
		// The first stage holds each device with probability 1/5: with 60
		// random ids it holds none about once in 700,000 runs. (At 10 % and a
		// gate of 3 finished tasks, about one run in 20 drew at most 2
		// devices into it, and its gate could never be met.)
		cfg.Stages, cfg.StageMinFinished, cfg.UntilComplete = []int{20, 100}, 1, true
		cfg.Mode, cfg.Duration = modeWalk, 2*time.Minute
		r := runOK(t, cfg)
		ro := r.Rollout
		if ro == nil || ro.Succeeded != 60 || ro.CompleteAfter <= 0 || ro.CompleteAfter > r.Seconds+1 || r.Seconds > 100 {
			t.Fatalf("rollout %+v after %.1fs: want all 60 succeeded and the run ended at completion", ro, r.Seconds)
		}
		if len(ro.Stages) != 2 || ro.Stages[1].Percentage != 100 || ro.Stages[1].StartedAfter > ro.CompleteAfter {
			t.Fatalf("stages %+v, complete after %.1fs", ro.Stages, ro.CompleteAfter)
		}
		// Two replicas, the short creation path and the transaction, stage
		// advances: the counters still equal a recount of the tasks.
		db, err := sqlx.Connect("postgres", dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		tasks, err := postgres.NewTaskRepository(db)
		if err != nil {
			t.Fatal(err)
		}
		if n, drift, err := application.VerifyCounters(ctx, tasks, domain.UUID{}); err != nil || len(drift) > 0 || n == 0 {
			t.Fatalf("counters after the rollout: %d rollouts, drift %+v, %v", n, drift, err)
		}
	})

	t.Run("honour-poll", func(t *testing.T) {
		// Nothing is offered, so every answer says no update and to poll
		// again in an hour (OTA_POLL_INTERVAL's default): each device
		// checks once and rests (the first rest at least a tenth of the
		// hour, its phase in a fleet of 10), where it would otherwise check
		// once per free worker for the whole run.
		cfg := base
		cfg.Model, cfg.Devices, cfg.Seed = "smoke-rest", 10, true
		cfg.Mode, cfg.Duration, cfg.HonourPoll = modePoll, 2*time.Second, true
		r := runOK(t, cfg)
		if got := r.Calls["check"]; got.Count != 10 || got.OK != 10 {
			t.Fatalf("with -honour-poll 10 resting devices sent %+v checks in %.1fs, want 10, one each", got, r.Seconds)
		}
	})

	t.Run("registered-json", func(t *testing.T) {
		args := []string{
			"-urls", strings.Join(urls, ","), "-database-url", dbURL, "-devices", "10", "-model", "smoke-api",
			"-mode", "poll", "-duration", "1s", "-concurrency", "4", "-quiet", "-json",
		}
		getenv := func(k string) string {
			if k == "OTA_ADMIN_TOKEN" {
				return admin
			}
			return ""
		}
		for round, wantNew := range []int64{10, 0} {
			var stdout, stderr bytes.Buffer
			if code := mainCode(ctx, args, getenv, &stdout, &stderr); code != 0 {
				t.Fatalf("round %d: exit %d\n%s\n%s", round, code, stdout.String(), stderr.String())
			}
			var r report
			if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
				t.Fatalf("round %d: -json output: %v\n%s", round, err, stdout.String())
			}
			if !r.OK || r.Seeded == nil || r.Seeded.Inserted != wantNew || r.Seeded.Existing != 10-wantNew ||
				r.Calls["check"].OK == 0 || len(r.Invariants) == 0 {
				t.Fatalf("round %d: %s", round, stdout.String())
			}
		}
	})
}
