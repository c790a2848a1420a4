package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// benchFleet is a service on the serving wiring (or in memory) with a fleet
// of devices: half of a model with a 100% rollout (their checks reuse their
// task after the first), half of a model with nothing to offer.
type benchFleet struct {
	devices       *application.Devices
	handler       http.Handler
	reuse, noUpd  []ports.DeviceCredentials
	reuseM, noUpM string
}

const benchFleetSize = 500

func newBenchFleet(b testing.TB, store string) *benchFleet {
	b.Helper()
	ctx := context.Background()
	deps := application.Deps{
		Locker: local.NewLocker(time.Second, ports.NopLockMetrics{}), Clock: local.NewClock(), IDs: local.NewUUIDs(),
		Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
	}
	switch store {
	case "memory":
		s := memory.NewStore()
		deps.Devices, deps.Firmwares, deps.Rollouts, deps.Tasks = memory.NewDevices(s), memory.NewFirmwares(s), memory.NewRollouts(s), memory.NewTasks(s)
		deps.Attributes, deps.Directory = memory.NewAttributes(s), memory.NewDirectory(s)
	default:
		db, url := testenv.PostgresDB(b)
		db.SetMaxOpenConns(10)
		db.SetMaxIdleConns(10)
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			b.Fatal(err)
		}
		deps.Attributes, deps.Directory = repos.Attributes, repos.Directory
		if store == "plain" {
			// Prepared statements alone: no cache, checks written at once.
			deps.Devices, deps.Firmwares, deps.Rollouts, deps.Tasks = repos.Devices, repos.Firmwares, repos.Rollouts, repos.Tasks
			break
		}
		seen, stop, err := postgres.NewWriteBehindDevices(repos.Devices, postgres.WriteBehindConfig{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(stop)
		cache, stopCache, err := postgres.NewCatalogCache(repos.Firmwares, repos.Rollouts, postgres.CatalogCacheConfig{URL: postgres.DatabaseURL(url)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(stopCache)
		deps.Devices, deps.Firmwares, deps.Rollouts, deps.Tasks = seen, cache.Firmwares(), cache.Rollouts(), repos.Tasks
	}
	devices, err := application.NewDevices(deps, application.PollInterval(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	admin, err := application.NewAdmin(deps)
	if err != nil {
		b.Fatal(err)
	}
	f := &benchFleet{devices: devices, reuseM: "bench-reuse", noUpM: "bench-idle"}
	f.handler = rest.NewServer(rest.Config{AdminToken: "bench-admin-token-0123456789"}, devices, admin, nil, nil, nil,
		slog.New(slog.DiscardHandler))
	fw, err := admin.PublishFirmware(ctx, testActor, domain.FirmwareSpec{Model: f.reuseM, Version: "2.0.0",
		URL: "https://fw.example/bench.bin", SizeBytes: 10, SHA256: sha(9)})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := admin.StartRollout(ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: domain.RolloutSpec{Percentage: 100}}); err != nil {
		b.Fatal(err)
	}
	for i := range benchFleetSize {
		for _, m := range []string{f.reuseM, f.noUpM} {
			c, err := admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: fmt.Sprintf("%s-%04d", m, i), Model: m, CurrentVersion: "1.0.0"})
			if err != nil {
				b.Fatal(err)
			}
			dev, err := devices.IdentifyDevice(ctx, c.Device.ID())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := devices.Check(ctx, ports.CheckRequest{Device: dev, Model: m, CurrentVersion: "1.0.0"}); err != nil {
				b.Fatal(err)
			}
			if m == f.reuseM {
				f.reuse = append(f.reuse, c)
			} else {
				f.noUpd = append(f.noUpd, c)
			}
		}
	}
	return f
}

// BenchmarkCheck measures a device's poll as the HTTP edge makes it
// (authenticate, then check) through the application, without HTTP: the
// use case's and the adapters' share. "postgres" is the serving wiring,
// "plain" the prepared repositories without the catalog cache and the
// write-behind, "memory" the in-process adapters.
//
//	OTA_TEST_DATABASE_URL=… go test -run '^$' -bench BenchmarkCheck -benchmem ./adapters/postgres/
func BenchmarkCheck(b *testing.B) {
	for _, store := range []string{"postgres", "plain", "memory"} {
		f := newBenchFleet(b, store)
		for _, kind := range []string{"reuse", "noupdate"} {
			devs, want := f.reuse, ports.CheckReused
			if kind == "noupdate" {
				devs, want = f.noUpd, ports.CheckNoUpdate
			}
			b.Run(store+"/"+kind, func(b *testing.B) {
				var next atomic.Int64
				b.ReportAllocs()
				// Enough requests in flight to keep the database busy, as
				// the HTTP server's many connections do.
				b.SetParallelism(16)
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					for pb.Next() {
						c := devs[int(next.Add(1))%len(devs)]
						dev, err := f.devices.AuthenticateDevice(ctx, c.Token)
						if err != nil {
							b.Error(err)
							return
						}
						res, err := f.devices.Check(ctx, ports.CheckRequest{Device: dev, Model: c.Device.Model(), CurrentVersion: "1.0.0"})
						if err != nil || res.Outcome != want {
							b.Errorf("%s: %v", res.Outcome, err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkCheckHTTP is BenchmarkCheck through the HTTP edge's handler
// (Echo, JSON, access log to a discarding handler), without a network: the
// allocations of the whole request path.
func BenchmarkCheckHTTP(b *testing.B) {
	for _, store := range []string{"postgres", "memory"} {
		f := newBenchFleet(b, store)
		for _, kind := range []string{"reuse", "noupdate"} {
			devs := f.reuse
			if kind == "noupdate" {
				devs = f.noUpd
			}
			b.Run(store+"/"+kind, func(b *testing.B) {
				var next atomic.Int64
				body := []byte(`{"model":"` + devs[0].Device.Model() + `","current_version":"1.0.0"}`)
				b.ReportAllocs()
				// Enough requests in flight to keep the database busy, as
				// the HTTP server's many connections do.
				b.SetParallelism(16)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						c := devs[int(next.Add(1))%len(devs)]
						req := httptest.NewRequest(http.MethodPost, "/api/v1/devices/"+c.Device.ID().String()+"/ota/check", bytes.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Authorization", "Bearer "+c.Token)
						rec := httptest.NewRecorder()
						f.handler.ServeHTTP(rec, req)
						if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "update_available") {
							b.Errorf("%d %s", rec.Code, rec.Body)
							return
						}
					}
				})
			})
		}
	}
}
