package bootstrap

import (
	"context"
	"net/http"
	"time"

	"github.com/google/wire"

	httpadapter "github.com/ai-device/ota/adapters/http"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/adapters/redislock"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/ports"
)

// ApplicationSet provides the use cases and binds them to the ports the
// HTTP edge calls.
var ApplicationSet = wire.NewSet(
	wire.Struct(new(application.Deps), "*"),
	application.NewDevices, wire.Bind(new(ports.DeviceService), new(*application.Devices)),
	application.NewAdmin, wire.Bind(new(ports.AdminService), new(*application.Admin)),
	PollIntervalFrom,
	RateLimiterFrom,
)

// EdgeSet provides the HTTP server, metrics and the app lifecycle.
var EdgeSet = wire.NewSet(
	httpadapter.ProviderSet,
	HTTPConfigFrom,
	NewMetrics,
	wire.Bind(new(ports.Metrics), new(*Metrics)),
	wire.Bind(new(httpadapter.RequestObserver), new(*Metrics)),
	MetricsHandler,
	NewApp,
)

// PostgresSet is the production wiring: Postgres repositories on an
// already-opened pool, and the Redis lock.
var PostgresSet = wire.NewSet(
	postgres.RepositorySet,
	redislock.ProviderSet,
	LockConfigFrom,
	LockMetricsFrom,
	memory.SystemSet,
	HealthChecks,
)

// MemorySet runs the whole service in one process with no Postgres or Redis.
var MemorySet = wire.NewSet(
	memory.ProviderSet,
	memory.SystemSet,
	MemoryLocker,
	NoHealthChecks,
)

// PollIntervalFrom extracts the devices' poll hint.
func PollIntervalFrom(cfg Config) application.PollInterval {
	return application.PollInterval(cfg.PollInterval)
}

// RateLimiterFrom builds the per-device request budget (in-process, per
// replica), or none when OTA_DEVICE_RATE_LIMIT is 0.
func RateLimiterFrom(cfg Config) ports.RateLimiter {
	if cfg.DeviceRate <= 0 {
		return ports.Unlimited{}
	}
	return memory.NewRateLimiter(cfg.DeviceRate, cfg.DeviceBurst)
}

// HTTPConfigFrom extracts the edge's settings.
func HTTPConfigFrom(cfg Config) httpadapter.Config {
	return httpadapter.Config{AdminToken: httpadapter.AdminToken(cfg.AdminToken)}
}

// LockConfigFrom extracts the Redis lock's settings.
func LockConfigFrom(cfg Config) redislock.Config {
	return redislock.Config{URL: cfg.RedisURL, KeyPrefix: "ota:lock", TTL: cfg.LockTTL, Wait: cfg.LockWait, Majority: cfg.LockMajority}
}

// LockMetricsFrom lets the lock report into the service's metrics.
func LockMetricsFrom(m *Metrics) ports.LockMetrics { return m }

// MetricsHandler serves /metrics.
func MetricsHandler(m *Metrics) http.Handler { return m.Handler() }

// MemoryLocker is the in-process lock for OTA_STORE=memory.
func MemoryLocker(cfg Config, m *Metrics) ports.Locker {
	return memory.NewLocker(cfg.LockWait, m)
}

// HealthChecks lists the dependencies /readyz probes.
func HealthChecks(pg *postgres.HealthCheck, lock *redislock.Locker) []ports.HealthCheck {
	return []ports.HealthCheck{pg, redisCheck{lock}}
}

// NoHealthChecks: the memory mode depends on nothing outside the process.
func NoHealthChecks() []ports.HealthCheck { return nil }

type redisCheck struct{ lock *redislock.Locker }

func (redisCheck) Name() string { return "redis" }

func (r redisCheck) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return r.lock.Ping(ctx)
}
