package postgres_test

import (
	"context"
	"database/sql"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// countingDialer counts the client's writes on every connection it dials.
// lib/pq writes once per round trip (a simple query, a Parse/Describe/Sync,
// a Bind/Execute/Sync) and then waits for the answer, so writes are round
// trips.
type countingDialer struct{ writes *atomic.Int64 }

func (d countingDialer) Dial(network, address string) (net.Conn, error) {
	return d.DialTimeout(network, address, 0)
}

func (d countingDialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, writes: d.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// countingPool opens a one-connection pool on url whose round trips are
// counted (one connection: statements are prepared once, at construction).
func countingPool(t *testing.T, url string) (*sqlx.DB, *atomic.Int64) {
	t.Helper()
	conn, err := pq.NewConnector(url)
	if err != nil {
		t.Fatal(err)
	}
	writes := new(atomic.Int64)
	conn.Dialer(countingDialer{writes: writes})
	db := sqlx.NewDb(sql.OpenDB(conn), "postgres")
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db, writes
}

// TestCheckRoundTrips counts the database round trips of a device's poll
// (authentication and check, as the HTTP edge calls them) on the serving
// wiring — prepared statements, the catalog cache, checks written behind —
// and on the plain repositories, and asserts them: a cold poll that
// changes nothing (no update, or reuse) costs exactly one round trip on the
// serving wiring (the device, its active task and its failed counts in one
// statement); creation and the write-behind flush cost what is listed.
// servingDeps wires the use cases' ports as production does — device reports
// written behind (flushed only when a test asks), firmware and rollouts from
// the NOTIFY-driven catalog cache, tasks, attributes and tags straight from
// Postgres — on db, the pool whose round trips a test counts.
func servingDeps(t *testing.T, url string, db *sqlx.DB) application.Deps {
	t.Helper()
	repos, err := postgres.NewRepositories(db)
	must(t, err)
	seen, stop, err := postgres.NewWriteBehindDevices(repos.Devices, postgres.WriteBehindConfig{Interval: time.Hour}, nil)
	must(t, err)
	t.Cleanup(stop)
	cache, stopCache, err := postgres.NewCatalogCache(repos.Firmwares, repos.Rollouts,
		postgres.CatalogCacheConfig{URL: postgres.DatabaseURL(url)}, nil)
	must(t, err)
	t.Cleanup(stopCache)
	return application.Deps{
		Devices: seen, Firmwares: cache.Firmwares(), Rollouts: cache.Rollouts(), Tasks: repos.Tasks,
		Locker: local.NewLocker(time.Second, ports.NopLockMetrics{}), Clock: local.NewClock(), IDs: local.NewUUIDs(),
		Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
		Attributes: postgres.NewAttributeRepository(db), Directory: postgres.NewDeviceDirectory(db),
	}
}

// servingRoundTrips builds the device and admin use cases on the serving
// wiring over a counted one-connection pool (countingPool), for a test that
// counts a request's round trips; it returns the pool and its counter too.
func servingRoundTrips(t *testing.T) (application.Deps, *application.Devices, *application.Admin, *sqlx.DB, *atomic.Int64) {
	t.Helper()
	e := newEnv(t)
	db, writes := countingPool(t, e.url)
	deps := servingDeps(t, e.url, db)
	devices, err := application.NewDevices(deps, application.PollInterval(time.Hour))
	must(t, err)
	admin, err := application.NewAdmin(deps)
	must(t, err)
	return deps, devices, admin, db, writes
}

func TestCheckRoundTrips(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	for _, tc := range []struct {
		name    string
		serving bool
		// exact round trips of a poll that reuses, finds nothing, creates
		poll, create int64
	}{
		// CheckView (auth), RecordSeen, Offers.
		{name: "plain repositories (prepared)", poll: 3, create: 4},
		// CheckView (auth); the rest is cached or written behind.
		{name: "serving wiring", serving: true, poll: 1, create: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, writes := countingPool(t, e.url)
			repos, err := postgres.NewRepositories(db)
			must(t, err)
			deps := application.Deps{
				Devices: repos.Devices, Firmwares: repos.Firmwares, Rollouts: repos.Rollouts, Tasks: repos.Tasks,
				Locker: local.NewLocker(time.Second, ports.NopLockMetrics{}), Clock: local.NewClock(), IDs: local.NewUUIDs(),
				Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{}, Attributes: repos.Attributes, Directory: repos.Directory,
			}
			var seen *postgres.WriteBehindDevices
			if tc.serving {
				deps = servingDeps(t, e.url, db)
				seen = deps.Devices.(*postgres.WriteBehindDevices)
			}
			devices, err := application.NewDevices(deps, application.PollInterval(time.Hour))
			must(t, err)
			admin, err := application.NewAdmin(deps)
			must(t, err)

			// A model with a 100% rollout, and one with nothing to offer.
			model, bare := "rt-"+newID()[:8], "rt-bare-"+newID()[:8]
			fw, err := admin.PublishFirmware(ctx, testActor, domain.FirmwareSpec{Model: model, Version: "2.0.0",
				URL: "https://fw.example/rt.bin", SizeBytes: 10, SHA256: sha(7)})
			must(t, err)
			_, err = admin.StartRollout(ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: domain.RolloutSpec{Percentage: 100}})
			must(t, err)
			register := func(id, m string) ports.DeviceCredentials {
				c, err := admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: id, Model: m, CurrentVersion: "1.0.0"})
				must(t, err)
				return c
			}
			warm, withTask, fresh := register(model+"-0", model), register(model+"-1", model), register(model+"-2", model)
			idle := register(bare+"-1", bare)

			poll := func(c ports.DeviceCredentials) (ports.CheckResult, int64) {
				t.Helper()
				before := writes.Load()
				dev, err := devices.AuthenticateDevice(ctx, c.Token)
				must(t, err)
				res, err := devices.Check(ctx, ports.CheckRequest{Device: dev, Model: c.Device.Model(), CurrentVersion: "1.0.0"})
				must(t, err)
				return res, writes.Load() - before
			}
			// Warm: the cache holds both models and the firmware.
			poll(warm)
			poll(warm)
			poll(idle)
			created, _ := poll(withTask)
			if created.Outcome != ports.CheckCreated {
				t.Fatalf("first check: %s", created.Outcome)
			}
			time.Sleep(50 * time.Millisecond) // the admin writes' notifications land
			poll(warm)
			poll(idle)

			res, create := poll(fresh)
			if res.Outcome != ports.CheckCreated {
				t.Fatalf("create: %s", res.Outcome)
			}
			res, reuse := poll(withTask)
			if res.Outcome != ports.CheckReused || res.Task.Task.ID() != created.Task.Task.ID() {
				t.Fatalf("reuse: %s", res.Outcome)
			}
			res, noUpd := poll(idle)
			if res.Outcome != ports.CheckNoUpdate {
				t.Fatalf("no update: %s", res.Outcome)
			}
			t.Logf("%s: reuse %d round trips, no update %d, create %d", tc.name, reuse, noUpd, create)
			if reuse != tc.poll || noUpd != tc.poll {
				t.Errorf("reuse %d, no update %d round trips, want %d each", reuse, noUpd, tc.poll)
			}
			// Auth, then under the lock one statement, no transaction
			// around it: the insert guarded by the offer FOR SHARE and the
			// failed count (InsertIfUnchanged; plus RecordSeen and Offers
			// when not cached). More is a regression: the full
			// transaction (BEGIN, the active task FOR UPDATE, the failed
			// counts, the offer FOR SHARE, the insert, COMMIT) costs 7.
			if create != tc.create {
				t.Errorf("create %d round trips, want %d", create, tc.create)
			}
			if seen != nil {
				before := writes.Load()
				must(t, seen.Flush(ctx))
				if n := writes.Load() - before; n != 1 {
					t.Errorf("write-behind flush of the checks above: %d round trips, want 1 (one statement)", n)
				}
			}
		})
	}
}

// TestEventRoundTrips counts the database round trips of a device's
// progress and final events (authentication and the event, as the HTTP
// edge calls them) on the serving wiring, on a plain rollout and on a
// staged one with a failure threshold, whose final events are judged after
// their commit (event rule 5), and asserts them: each is what an event
// costs a rollout's devices in a large rollout (docs/SCALING.md).
func TestEventRoundTrips(t *testing.T) {
	ctx := context.Background()
	deps, devices, admin, _, writes := servingRoundTrips(t)
	pct := func(n int) *int { return &n }

	for _, tc := range []struct {
		name string
		spec domain.RolloutSpec
		// exact round trips of a progress event and of a final one
		progress, final int64
	}{
		// Either: auth, the task, then the task's update with its event
		// and counters in one statement (UpdateIfUnchanged), a success's
		// announcement and its device's version too; the firmware's
		// version and whether the rollout judges come from the catalog
		// cache. The success's rollout, with nothing to judge, is not
		// judged (three more: BEGIN, the offer, COMMIT). The
		// transaction the statement spares: BEGIN, the task FOR UPDATE,
		// the event id, the device's counted task, the update, its
		// announcement, the event, the offer, the device's version, the
		// counters, COMMIT (12 with auth, before 2026-12-07).
		{name: "plain", spec: domain.RolloutSpec{Percentage: 100}, progress: 3, final: 3},
		// The success judged after its commit: the offer with the
		// counters of every scope in one statement (JudgeView; the
		// judgement changes nothing, so nothing is locked), where a
		// read-only transaction took five (BEGIN, the offer, the counters
		// of the rollout and of its stage, COMMIT); 17 before 2026-12-07.
		{name: "staged with a threshold", spec: domain.RolloutSpec{FailureThresholdPercent: pct(50), MinSample: pct(1000),
			Stages: []domain.StageRequest{{Percentage: pct(100)}}}, progress: 3, final: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := "ev-" + newID()[:8]
			fw, err := admin.PublishFirmware(ctx, testActor, domain.FirmwareSpec{Model: model, Version: "2.0.0",
				URL: "https://fw.example/ev.bin", SizeBytes: 10, SHA256: sha(9)})
			must(t, err)
			ro, err := admin.StartRollout(ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: tc.spec})
			must(t, err)
			c, err := admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: model + "-1", Model: model, CurrentVersion: "1.0.0"})
			must(t, err)
			time.Sleep(50 * time.Millisecond) // the admin writes' notifications land
			dev, err := devices.AuthenticateDevice(ctx, c.Token)
			must(t, err)
			res, err := devices.Check(ctx, ports.CheckRequest{Device: dev, Model: model, CurrentVersion: "1.0.0"})
			must(t, err)
			if res.Outcome != ports.CheckCreated {
				t.Fatalf("check: %s", res.Outcome)
			}
			_, err = devices.GetTask(ctx, dev.Device.ID(), res.Task.Task.ID()) // the firmware in the cache, as in a fleet
			must(t, err)
			_, err = deps.Rollouts.Get(ctx, ro.ID()) // and the rollout, as after its first device's event
			must(t, err)
			event := func(id, status string) int64 {
				t.Helper()
				before := writes.Load()
				dev, err := devices.AuthenticateDevice(ctx, c.Token)
				must(t, err)
				v, err := devices.ReportEvent(ctx, dev.Device.ID(), res.Task.Task.ID(), ports.EventRequest{EventID: id, Status: status})
				must(t, err)
				if v.Task.Status().String() != status {
					t.Fatalf("event %s: the task is %s", status, v.Task.Status())
				}
				return writes.Load() - before
			}
			progress, final := event("e1", "downloading"), event("e2", "succeeded")
			t.Logf("%s: progress event %d round trips, final %d", tc.name, progress, final)
			if progress != tc.progress || final != tc.final {
				t.Errorf("progress %d, final %d round trips, want %d, %d", progress, final, tc.progress, tc.final)
			}
		})
	}
}
