package bootstrap

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/google/wire"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ai-device/ota/adapters/ddi"
	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/mender"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/adapters/redislock"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/ports"
)

// ApplicationSet provides the use cases, each from only the ports it uses,
// and binds their compositions to the ports the HTTP edge calls.
var ApplicationSet = wire.NewSet(
	application.NewAuth, application.NewChecks, application.NewEvents, application.ComposeDevices,
	wire.Bind(new(ports.DeviceService), new(*application.Devices)),
	application.NewDeviceAdmin, application.NewFirmwareAdmin, application.NewRolloutAdmin, application.NewTaskAdmin,
	application.NewTargetingAdmin, application.ComposeAdmin,
	// Registration may carry a device's public key (Mender's device API).
	application.NewKeyedAdmin, wire.Bind(new(ports.AdminService), new(*application.KeyedAdmin)),
	application.NewAccounts, wire.Bind(new(ports.AccountService), new(*application.Accounts)), RootTokenFrom,
	application.NewAudit, wire.Bind(new(ports.AuditService), new(*application.Audit)),
	PollIntervalFrom,
	RateLimiterFrom,
	NewRolloutSweep,
	fleetSet,
	ArtifactSet,
	taskPortSet,
	webhookSet,
)

// edgeBaseSet provides the HTTP server and metrics.
var edgeBaseSet = wire.NewSet(
	rest.ProviderSet,
	DDISet,
	MenderSet,
	DownloadSet,
	HTTPConfigFrom,
	NewMetrics,
	wire.Bind(new(ports.Metrics), new(*Metrics)),
	wire.Bind(new(httpedge.RequestObserver), new(*Metrics)),
	wire.Bind(new(application.RequestLoad), new(*Metrics)),
	MetricsHandler,
	consoleSet,
	NewEventRelay,
)

// EdgeSet provides the HTTP server, metrics and the app lifecycle.
var EdgeSet = wire.NewSet(edgeBaseSet, NewMemoryApp)

// NewMemoryApp is NewApp for the single-process wiring: it sweeps the open
// rollouts, delivers webhooks, and relays events to NATS when configured,
// while it serves.
func NewMemoryApp(cfg Config, server *echo.Echo, logger *slog.Logger, webhooks *application.WebhookDeliverer,
	relay *application.EventRelay, sweep *application.RolloutSweep) *App {
	app := NewApp(cfg, server, logger)
	app.InBackground(sweep.Run)
	app.InBackground(webhooks.Run)
	if relay != nil {
		app.InBackground(relay.Run)
	}
	return app
}

// PostgresEdgeSet is EdgeSet for the production wiring: the app also
// flushes the write-behind of device checks on shutdown, and the metrics
// report it and the catalog cache.
var PostgresEdgeSet = wire.NewSet(edgeBaseSet, NewPostgresApp)

// PostgresSet is the production wiring: Postgres repositories on an
// already-opened pool (device checks written behind, the catalog cached
// and invalidated by LISTEN/NOTIFY), and the Redis lock.
var PostgresSet = wire.NewSet(
	postgres.ServingSet,
	PostgresTaskPorts,
	wire.Bind(new(application.OpenRollouts), new(*postgres.RolloutRepository)),
	postgresFleetSet,
	WriteBehindConfigFrom,
	CatalogCacheConfigFrom,
	ReadReplicaConfigFrom,
	redislock.ProviderSet,
	LockConfigFrom,
	LockMetricsFrom,
	local.SystemSet,
	HealthChecks,
	DDIPostgresStores,
	MenderPostgresStores,
	postgres.NewDeviceDirectory, wire.Bind(new(application.DeviceDirectory), new(*postgres.DeviceDirectory)),
	postgres.NewArtifactRepository, wire.Bind(new(ports.ArtifactRepository), new(*postgres.ArtifactRepository)),
	postgres.NewAccountRepository, wire.Bind(new(application.AccountStore), new(*postgres.AccountRepository)),
	postgres.NewAuditLog, wire.Bind(new(ports.AuditLog), new(*postgres.AuditLog)),
	postgres.NewWebhookRepository, wire.Bind(new(application.WebhookStore), new(*postgres.WebhookRepository)),
	wire.Bind(new(application.DeliveryQueue), new(*postgres.WebhookRepository)),
	postgres.NewEventSinks, wire.Bind(new(application.EventSinkStore), new(*postgres.EventSinks)),
)

// WriteBehindConfigFrom tunes the write-behind of device checks (the
// adapter's defaults: a flush every 200ms, visible well within 1s) with
// OTA_LAST_SEEN_RESOLUTION (0: every check is written).
func WriteBehindConfigFrom(cfg Config) postgres.WriteBehindConfig {
	r := time.Duration(cfg.LastSeenResolution)
	if r <= 0 {
		r = postgres.SeenEveryCheck
	}
	return postgres.WriteBehindConfig{Resolution: r}
}

// CatalogCacheConfigFrom points the catalog cache's listener at the
// service's database (the adapter's defaults: stale for at most 1s).
func CatalogCacheConfigFrom(cfg Config) postgres.CatalogCacheConfig {
	return postgres.CatalogCacheConfig{URL: postgres.DatabaseURL(cfg.DatabaseURL)}
}

// ReadReplicaConfigFrom points the check's read at OTA_DATABASE_READ_URL
// (none when unset), read while at most OTA_READ_MAX_LAG behind.
func ReadReplicaConfigFrom(cfg Config) postgres.ReadReplicaConfig {
	return postgres.ReadReplicaConfig{URL: postgres.DatabaseURL(cfg.DatabaseReadURL), MaxLag: cfg.ReadMaxLag, MaxOpenConns: int(cfg.DBMaxConns)}
}

// NewPostgresApp is NewApp for the production wiring: on shutdown, after
// requests drained, it stores the device checks still written behind
// (before wire's cleanup closes the pool), and its metrics count the
// write-behind's and the catalog cache's work. It sweeps the open
// rollouts and delivers webhooks (either none: not) while it serves, as
// every replica does, and relays events to NATS when configured (one
// replica at a time holds the cursor).
func NewPostgresApp(cfg Config, server *echo.Echo, logger *slog.Logger, m *Metrics,
	seen *postgres.WriteBehindDevices, catalog *postgres.CatalogCache, reads *postgres.ReadReplica,
	webhooks *application.WebhookDeliverer, relay *application.EventRelay, sweep *application.RolloutSweep) *App {
	app := NewApp(cfg, server, logger)
	if sweep != nil {
		app.InBackground(sweep.Run)
	}
	if webhooks != nil {
		app.InBackground(webhooks.Run)
	}
	if relay != nil {
		app.InBackground(relay.Run)
	}
	app.OnShutdown(seen.Flush)
	registerHotPathMetrics(m, seen.Stats(), catalog.Stats())
	if reads != nil {
		registerReplicaMetrics(m, reads)
	}
	return app
}

// registerReplicaMetrics exposes where the check's reads went and how far
// behind the replica is.
func registerReplicaMetrics(m *Metrics, r *postgres.ReadReplica) {
	s := r.Stats()
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ota_read_replica_lag_seconds",
			Help: "How stale a read from the replica would be now, as measured (-1: not caught up or failing)."},
			func() float64 {
				if lag, ok := r.Lag(); ok {
					return lag.Seconds()
				}
				return -1
			}),
		counter("ota_read_replica_reads_total", "Check reads answered by the read replica.", &s.Reads),
		counter("ota_read_replica_primary_total", "Check reads sent to the primary: the replica too far behind or failing.", &s.Primary),
		counter("ota_read_replica_fallbacks_total", "Check reads tried on the replica and answered by the primary.", &s.Fallbacks),
	)
}

// registerHotPathMetrics exposes the write-behind's and the cache's
// counters on m's registry.
func registerHotPathMetrics(m *Metrics, seen *postgres.WriteBehindStats, catalog *postgres.CatalogCacheStats) {
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	m.registry.MustRegister(
		counter("ota_device_seen_written_total", "Device check records (last_seen_at, current_version) written behind.", &seen.Written),
		counter("ota_device_seen_batches_total", "Write-behind batch statements that succeeded.", &seen.Batches),
		counter("ota_device_seen_flush_failures_total", "Write-behind batch statements that failed (their records retried).", &seen.Failures),
		counter("ota_device_seen_skipped_total", "Device checks not written: same version, last_seen_at within OTA_LAST_SEEN_RESOLUTION.", &seen.Skipped),
		counter("ota_device_seen_dropped_total", "Device check records given up (retries spent, or too many pending).", &seen.Dropped),
		counter("ota_catalog_cache_hits_total", "Catalog reads (offers, firmware, rollouts) answered from memory.", &catalog.Hits),
		counter("ota_catalog_cache_misses_total", "Catalog reads that filled the cache from Postgres.", &catalog.Misses),
		counter("ota_catalog_cache_bypassed_total", "Catalog reads sent to Postgres while the listener was not proven alive.", &catalog.Bypassed),
		counter("ota_catalog_cache_invalidations_total", "Catalog cache invalidations (notifications, local writes, reconnections, refreshes).", &catalog.Invalidations),
	)
}

// MemorySet runs the whole service in one process with no Postgres or Redis.
var MemorySet = wire.NewSet(
	memory.ProviderSet,
	MemoryTaskPorts,
	wire.Bind(new(application.OpenRollouts), new(*memory.Rollouts)),
	memoryFleetSet,
	local.SystemSet,
	MemoryLocker,
	NoHealthChecks,
	DDIMemoryStores,
	MenderMemoryStores,
	memory.NewDirectory, wire.Bind(new(application.DeviceDirectory), new(*memory.Directory)),
	memory.NewAccounts, wire.Bind(new(application.AccountStore), new(*memory.Accounts)),
	// The store keeps the audit records its writes make, and reads them.
	wire.Bind(new(ports.AuditLog), new(*memory.Store)),
	memory.NewWebhooks, wire.Bind(new(application.WebhookStore), new(*memory.Webhooks)),
	wire.Bind(new(application.DeliveryQueue), new(*memory.Webhooks)),
	memory.NewEventSinks, wire.Bind(new(application.EventSinkStore), new(*memory.EventSinks)),
)

// RootTokenFrom is the break-glass root secret, OTA_ADMIN_TOKEN.
func RootTokenFrom(cfg Config) application.RootToken { return application.RootToken(cfg.AdminToken) }

// NewRolloutSweep re-judges the open rollouts every
// OTA_ROLLOUT_SWEEP_INTERVAL, on the uncached catalog: it reads each
// rollout again in its judgement anyway.
func NewRolloutSweep(cfg Config, open application.OpenRollouts, tasks application.TaskTransactor, clock ports.Clock,
	logger *slog.Logger) (*application.RolloutSweep, error) {
	return application.NewRolloutSweep(open, tasks, clock, cfg.RolloutSweep, logger)
}

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
	return local.NewRateLimiter(cfg.DeviceRate, cfg.DeviceBurst)
}

// HTTPConfigFrom extracts the edge's settings; the DDI and Mender routes
// are mounted on it.
func HTTPConfigFrom(cfg Config, d *ddi.Adapter, m *mender.Adapter) rest.Config {
	return rest.Config{AdminToken: rest.AdminToken(cfg.AdminToken),
		Mounts: append(ddiMounts(d), menderMounts(m)...), AdminMounts: menderAdminMounts(m)}
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
	return local.NewLocker(cfg.LockWait, m)
}

// HealthChecks lists the dependencies /readyz probes.
func HealthChecks(pg *postgres.HealthCheck, lock *redislock.Locker) []ports.HealthCheck {
	return []ports.HealthCheck{pg, redisCheck{lock}}
}

// NoHealthChecks: the memory mode depends on nothing outside the process.
func NoHealthChecks() []ports.HealthCheck { return nil }

type redisCheck struct{ lock *redislock.Locker }

// Name is the key in the readiness report.
func (redisCheck) Name() string { return "redis" }

// Check pings Redis through the lock's own client, with a 1s bound.
func (r redisCheck) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return r.lock.Ping(ctx)
}
