package faults

import (
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/adapters/redislock"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/bootstrap"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// TestNoGoroutineLeakInProcess runs the service in this process - the
// production adapters wired by hand as the binary wires them (Postgres
// repositories behind the write-behind of checks and the catalog cache,
// the Redis lock, the HTTP edge) - with Postgres and Redis behind proxies,
// slows each dependency down, abandons requests, then shuts everything
// down and asks goleak whether any goroutine is left.
//
// It is not parallel: goleak looks at every goroutine of the process, so
// it runs while no other test of the package does (parallel tests resume
// only after the sequential ones finished).
func TestNoGoroutineLeakInProcess(t *testing.T) {
	w := newWorld(t)
	before := runtime.NumGoroutine()
	ignore := goleak.IgnoreCurrent()

	const (
		lockWait = 300 * time.Millisecond
		slack    = 700 * time.Millisecond
	)
	var (
		during, live, settled int
		settleTook            time.Duration
	)
	func() {
		pgProxy, err := testenv.NewProxy(hostOf(t, w.dbURL))
		if err != nil {
			t.Fatal(err)
		}
		defer pgProxy.Close()
		redisProxy, err := testenv.NewProxy(hostOf(t, w.redisURL))
		if err != nil {
			t.Fatal(err)
		}
		defer redisProxy.Close()

		logger := slog.New(slog.DiscardHandler)
		metrics := bootstrap.NewMetrics()
		dbURL := postgres.DatabaseURL(viaProxy(t, w.dbURL, pgProxy))
		pool, closePool, err := postgres.Open(postgres.Config{URL: dbURL})
		if err != nil {
			t.Fatal(err)
		}
		defer closePool()
		repos, err := postgres.NewRepositories(pool)
		if err != nil {
			t.Fatal(err)
		}
		seen, closeSeen, err := postgres.NewWriteBehindDevices(repos.Devices, postgres.WriteBehindConfig{}, logger)
		if err != nil {
			t.Fatal(err)
		}
		defer closeSeen()
		catalog, closeCatalog, err := postgres.NewCatalogCache(repos.Firmwares, repos.Rollouts, postgres.CatalogCacheConfig{URL: dbURL}, logger)
		if err != nil {
			t.Fatal(err)
		}
		defer closeCatalog()
		locker, closeLocker, err := redislock.New(redislock.Config{URL: viaProxy(t, w.redisURL, redisProxy),
			KeyPrefix: "ota:faults:" + randomHex(8), TTL: 2 * time.Second, Wait: lockWait}, metrics)
		if err != nil {
			t.Fatal(err)
		}
		defer closeLocker()
		deps := application.Deps{
			Devices: seen, Firmwares: catalog.Firmwares(), Rollouts: catalog.Rollouts(), Tasks: repos.Tasks,
			Attributes: repos.Attributes, Directory: repos.Directory, Locker: locker, Clock: local.NewClock(), IDs: local.NewUUIDs(), Metrics: metrics, Limiter: ports.Unlimited{},
		}
		devices, admin := testenv.UseCases(t, deps, time.Hour)
		edge := rest.NewServer(rest.Config{AdminToken: rest.AdminToken(w.admin)}, devices, admin,
			[]ports.HealthCheck{postgres.NewHealthCheck(pool)}, metrics, metrics.Handler(), logger)
		srv := httptest.NewServer(edge)
		defer srv.Close()

		c := w.clientOf("in-process", srv.URL, 15*time.Second)
		impatient := w.clientOf("in-process", srv.URL, 300*time.Millisecond)
		defer c.hc.CloseIdleConnections()
		defer impatient.hc.CloseIdleConnections()
		model := uniq("cam")
		w.publish(c, model, "2.0.0")
		warm := w.register(c, model, "1.0.0", 3)
		redisSlow := w.register(c, model, "1.0.0", 4)
		pgSlow := w.register(c, model, "1.0.0", 4)
		for _, d := range warm {
			w.mustTask(c, d)
		}
		c.hc.CloseIdleConnections()
		time.Sleep(200 * time.Millisecond)
		live = serviceGoroutines()

		// Redis slower than the wait: SERVICE_BUSY within the wait.
		redisProxy.SetLatency(time.Second)
		var wg sync.WaitGroup
		for _, d := range redisSlow {
			wg.Go(func() {
				r := c.check(d)
				if !r.busy() || r.elapsed > lockWait+slack {
					t.Errorf("check with Redis 1s away: want SERVICE_BUSY within %v, got %s", lockWait+slack, r)
				}
			})
		}
		wg.Wait()
		during = serviceGoroutines()
		redisProxy.SetLatency(0)

		// Postgres slow, and callers that give up.
		pgProxy.SetLatency(100 * time.Millisecond)
		for _, d := range pgSlow {
			wg.Go(func() { impatient.check(d) })
		}
		wg.Wait()
		pgProxy.SetLatency(0)

		// Back to normal: everyone gets exactly one task.
		if !waitFor(5*time.Second, func() bool {
			for _, d := range append(redisSlow, pgSlow...) {
				if taskOf(c.check(d)) == "" {
					return false
				}
			}
			return true
		}) {
			t.Errorf("devices not served within 5s of the dependencies being fast again")
		}
		all := append(append(warm, redisSlow...), pgSlow...)
		w.assertOneTaskEach(all, func(device) []string { return nil })
		w.assertIntact()
		w.tally.assertNoServerErrors(t)

		// While the stack still runs, the requests' goroutines are gone:
		// back to the count after the warm-up (the proxies' own goroutines,
		// which follow the number of pooled connections, not counted).
		c.hc.CloseIdleConnections()
		impatient.hc.CloseIdleConnections()
		start := time.Now()
		waitFor(5*time.Second, func() bool {
			settled = serviceGoroutines()
			return settled <= live
		})
		settleTook = time.Since(start)
		if settled > live+goroutineSlack {
			t.Errorf("%d goroutines 5s after the faults, %d before them (+%d allowed)", settled, live, goroutineSlack)
		}
	}()

	// Everything is closed: nothing of the stack may still run.
	goleak.VerifyNone(t, ignore)
	t.Logf("FIGURES goleak: goroutines before the stack %d, stack warmed up %d (not counting the proxies'), with Redis slow %d, after the faults %d (within %s), "+
		"after shutdown %d; goleak found none left; tally: %s",
		before, live, during, settled, ms(settleTook), runtime.NumGoroutine(), w.tally.summary())
}

// serviceGoroutines counts this process's goroutines but the test proxies'
// (5 per forwarded connection).
func serviceGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.HasPrefix(g, "goroutine ") && !strings.Contains(g, "testenv.(*Proxy)") {
			count++
		}
	}
	return count
}
