package postgres_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/adapters/redislock"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// TestProfileCreation profiles task creations through the application on
// the serving wiring with the Redis lock (authentication, check, lock,
// transaction), 16 at a time, and writes a CPU profile of that part only
// to OTA_PROFILE_OUT — the "where does a creation's CPU go" of
// docs/SCALING.md:
//
//	OTA_PROFILE_OUT=/tmp/create.prof go test ./adapters/postgres -run TestProfileCreation -v
//	go tool pprof -top /tmp/create.prof
func TestProfileCreation(t *testing.T) {
	out := os.Getenv("OTA_PROFILE_OUT")
	if out == "" {
		t.Skip("a profile, not a test: set OTA_PROFILE_OUT")
	}
	ctx := context.Background()
	db, url := testenv.PostgresDB(t)
	db.SetMaxOpenConns(10)
	db.SetMaxIdleConns(10)
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
	lock, closeLock, err := redislock.New(redislock.Config{URL: testenv.RedisURL(t), KeyPrefix: "ota:profile:" + fmt.Sprint(time.Now().UnixNano())}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeLock)
	deps := application.Deps{
		Devices: seen, Firmwares: cache.Firmwares(), Rollouts: cache.Rollouts(), Tasks: repos.Tasks,
		Attributes: repos.Attributes, Directory: repos.Directory, Locker: lock, Clock: local.NewClock(), IDs: local.NewUUIDs(), Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
	}
	devices, admin := testenv.UseCases(t, deps, time.Hour)
	const n = 3000
	creds := make([]ports.DeviceCredentials, n)
	for i := range creds {
		if creds[i], err = admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: fmt.Sprintf("pc-%05d", i), Model: "pc", CurrentVersion: "1.0.0"}); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := admin.PublishFirmware(ctx, testActor, domain.FirmwareSpec{Model: "pc", Version: "2.0.0", URL: "https://fw.example/pc.bin", SizeBytes: 10, SHA256: sha(7)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.StartRollout(ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: domain.RolloutSpec{Percentage: 100}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var next atomic.Int64
	var wg sync.WaitGroup
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				dev, err := devices.AuthenticateDevice(ctx, creds[i].Token)
				if err != nil {
					t.Error(err)
					return
				}
				res, err := devices.Check(ctx, ports.CheckRequest{Device: dev, Model: "pc", CurrentVersion: "1.0.0"})
				if err != nil || res.Outcome != ports.CheckCreated {
					t.Errorf("%s: %v", res.Outcome, err)
					return
				}
			}
		})
	}
	wg.Wait()
	pprof.StopCPUProfile()
	t.Logf("%d creations in %v (load-sensitive); profile in %s", n, time.Since(start), out)
}
