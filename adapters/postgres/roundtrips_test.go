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

	"github.com/ai-device/ota/adapters/memory"
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
// and on the plain repositories, for docs/BENCHMARKS.md.
func TestCheckRoundTrips(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	for _, tc := range []struct {
		name         string
		serving      bool
		reuse, noUpd int64 // the most round trips allowed
	}{
		{name: "plain repositories (prepared)", reuse: 4, noUpd: 4},
		{name: "serving wiring", serving: true, reuse: 2, noUpd: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, writes := countingPool(t, e.url)
			repos, err := postgres.NewRepositories(db)
			must(t, err)
			deps := application.Deps{
				Devices: repos.Devices, Firmwares: repos.Firmwares, Rollouts: repos.Rollouts, Tasks: repos.Tasks,
				Locker: memory.NewLocker(time.Second, ports.NopLockMetrics{}), Clock: memory.NewClock(), IDs: memory.NewUUIDs(),
				Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
			}
			var seen *postgres.WriteBehindDevices
			if tc.serving {
				var stop func()
				seen, stop, err = postgres.NewWriteBehindDevices(repos.Devices, postgres.WriteBehindConfig{Interval: time.Hour}, nil)
				must(t, err)
				t.Cleanup(stop)
				cache, stopCache, err := postgres.NewCatalogCache(repos.Firmwares, repos.Rollouts,
					postgres.CatalogCacheConfig{URL: postgres.DatabaseURL(e.url)}, nil)
				must(t, err)
				t.Cleanup(stopCache)
				deps.Devices, deps.Firmwares, deps.Rollouts = seen, cache.Firmwares(), cache.Rollouts()
			}
			devices, err := application.NewDevices(deps, application.PollInterval(time.Hour))
			must(t, err)
			admin, err := application.NewAdmin(deps)
			must(t, err)

			// A model with a 100% rollout, and one with nothing to offer.
			model, bare := "rt-"+newID()[:8], "rt-bare-"+newID()[:8]
			fw, err := admin.PublishFirmware(ctx, domain.FirmwareSpec{Model: model, Version: "2.0.0",
				URL: "https://fw.example/rt.bin", SizeBytes: 10, SHA256: sha(7)})
			must(t, err)
			_, err = admin.StartRollout(ctx, ports.StartRollout{FirmwareID: fw.ID(), Spec: domain.RolloutSpec{Percentage: 100}})
			must(t, err)
			withTask, err := admin.RegisterDevice(ctx, ports.RegisterDevice{DeviceID: model + "-1", Model: model, CurrentVersion: "1.0.0"})
			must(t, err)
			idle, err := admin.RegisterDevice(ctx, ports.RegisterDevice{DeviceID: bare + "-1", Model: bare, CurrentVersion: "1.0.0"})
			must(t, err)

			poll := func(c ports.DeviceCredentials) (ports.CheckResult, int64) {
				t.Helper()
				before := writes.Load()
				id, err := devices.AuthenticateDevice(ctx, c.Token)
				must(t, err)
				res, err := devices.Check(ctx, ports.CheckRequest{DeviceID: id, Model: c.Device.Model(), CurrentVersion: "1.0.0"})
				must(t, err)
				return res, writes.Load() - before
			}
			created, n := poll(withTask)
			if created.Outcome != ports.CheckCreated {
				t.Fatalf("first check: %s", created.Outcome)
			}
			t.Logf("create: %d round trips (lock, transaction)", n)
			// Warm: the cache holds both models.
			poll(withTask)
			poll(idle)
			time.Sleep(50 * time.Millisecond) // the admin writes' notifications land

			res, reuse := poll(withTask)
			if res.Outcome != ports.CheckReused || res.Task.Task.ID() != created.Task.Task.ID() {
				t.Fatalf("reuse: %s", res.Outcome)
			}
			res, noUpd := poll(idle)
			if res.Outcome != ports.CheckNoUpdate {
				t.Fatalf("no update: %s", res.Outcome)
			}
			t.Logf("%s: reuse %d round trips, no update %d", tc.name, reuse, noUpd)
			if reuse > tc.reuse || noUpd > tc.noUpd {
				t.Errorf("reuse %d (want ≤ %d), no update %d (want ≤ %d)", reuse, tc.reuse, noUpd, tc.noUpd)
			}
			if seen != nil {
				before := writes.Load()
				must(t, seen.Flush(ctx))
				t.Logf("write-behind flush of the checks above: %d round trip(s)", writes.Load()-before)
			}
		})
	}
}
