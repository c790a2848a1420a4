package bootstrap

import (
	"log/slog"
	"sync"
	"time"

	"github.com/google/wire"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/mender"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	menderapp "github.com/ai-device/ota/application/mender"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// MenderSettings are the OTA_MENDER_* variables.
type MenderSettings struct {
	// IDKey names the id_data key carrying the device id (OTA_MENDER_ID_KEY,
	// default device_id).
	IDKey string
	// AcceptPending lists unknown devices for operators to accept
	// (OTA_MENDER_ACCEPT_PENDING, default false: preauthorized devices only).
	AcceptPending bool
	// TokenSecret signs session tokens (OTA_MENDER_TOKEN_SECRET, at least
	// 32 characters). Unset: a random one per process, with a warning.
	TokenSecret string
	// TokenTTL is how long a session token is valid (OTA_MENDER_TOKEN_TTL,
	// default 1h).
	TokenTTL time.Duration
	// RequestTTL is how long a pending or rejected auth request is kept
	// after its last change (OTA_MENDER_AUTH_REQUEST_TTL, default 168h).
	RequestTTL time.Duration
	// AuthRate is each source address's sustained budget of
	// authentication requests per second (OTA_MENDER_AUTH_RATE_LIMIT,
	// default 2; 0 turns the limit off); AuthBurst is how many it may send
	// at once (OTA_MENDER_AUTH_RATE_BURST, default 50).
	AuthRate  float64
	AuthBurst int
}

// MenderSet provides Mender's device API: its use cases over the device
// service, and the adapter whose routes the HTTP edge mounts. The store
// sets provide the admission, auth request, artifact and log ports.
var MenderSet = wire.NewSet(
	mender.ProviderSet,
	MenderConfigFrom,
	wire.Struct(new(menderapp.Ports), "*"),
	menderapp.New,
	MenderQueueObserverFrom,
	wire.Bind(new(menderapp.Service), new(*menderapp.UseCases)),
	wire.Bind(new(menderapp.AdmissionService), new(*menderapp.UseCases)),
)

// MenderMemoryStores are the in-process Mender repositories.
var MenderMemoryStores = wire.NewSet(
	memory.NewAdmissions, wire.Bind(new(menderapp.DeviceAdmissions), new(*memory.Admissions)),
	wire.Bind(new(application.KeyedAdmissions), new(*memory.Admissions)),
	memory.NewAuthRequests, wire.Bind(new(menderapp.AuthRequests), new(*memory.AuthRequests)),
	memory.NewArtifactCatalog, wire.Bind(new(menderapp.ArtifactCatalog), new(*memory.ArtifactCatalog)),
	memory.NewTaskLogs, wire.Bind(new(menderapp.TaskLogs), new(*memory.TaskLogs)),
)

// MenderPostgresStores are the Postgres Mender repositories.
var MenderPostgresStores = wire.NewSet(
	postgres.NewAdmissionRepository, wire.Bind(new(menderapp.DeviceAdmissions), new(*postgres.AdmissionRepository)),
	wire.Bind(new(application.KeyedAdmissions), new(*postgres.AdmissionRepository)),
	postgres.NewAuthRequestRepository, wire.Bind(new(menderapp.AuthRequests), new(*postgres.AuthRequestRepository)),
	postgres.NewArtifactCatalogRepository, wire.Bind(new(menderapp.ArtifactCatalog), new(*postgres.ArtifactCatalogRepository)),
	postgres.NewTaskLogRepository, wire.Bind(new(menderapp.TaskLogs), new(*postgres.TaskLogRepository)),
)

// MenderConfigFrom extracts the Mender use cases' settings. Without
// OTA_MENDER_TOKEN_SECRET a random secret is made, and the warning says
// what that costs: tokens do not survive a restart and are not valid on
// other replicas (devices then authenticate again, once per replica hop).
func MenderConfigFrom(cfg Config, logger *slog.Logger) (menderapp.Config, error) {
	secret := domain.SessionSecret(cfg.Mender.TokenSecret)
	if len(secret) == 0 {
		var err error
		if secret, err = domain.NewSessionSecret(); err != nil {
			return menderapp.Config{}, err
		}
		logger.Warn("OTA_MENDER_TOKEN_SECRET is not set: Mender session tokens are signed with a random per-process secret; " +
			"they do not survive a restart and are not accepted by other replicas (devices authenticate again). " +
			"Harmless for one process in development; set it on every replica in production")
	}
	var limiter ports.RateLimiter = ports.Unlimited{}
	if cfg.Mender.AuthRate > 0 {
		limiter = local.NewRateLimiter(cfg.Mender.AuthRate, cfg.Mender.AuthBurst)
	}
	return menderapp.Config{IDKey: cfg.Mender.IDKey, AcceptPending: cfg.Mender.AcceptPending,
		TokenTTL: cfg.Mender.TokenTTL, Secret: secret, RequestTTL: cfg.Mender.RequestTTL, AuthLimiter: limiter}, nil
}

// menderQueueObserver counts (ota_mender_auth_requests_dropped_total) and
// logs the auth requests dropped because the pending queue is full; the
// log says so at most once a minute, since whoever fills the queue also
// chooses how often it would be written.
type menderQueueObserver struct {
	dropped prometheus.Counter
	logger  *slog.Logger
	mu      sync.Mutex
	last    time.Time
	since   int
}

// MenderQueueObserverFrom registers the dropped-requests counter with m.
func MenderQueueObserverFrom(m *Metrics, logger *slog.Logger) menderapp.AuthQueueObserver {
	o := &menderQueueObserver{logger: logger, dropped: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ota_mender_auth_requests_dropped_total",
		Help: "Mender auth requests not recorded because the pending queue was full.",
	})}
	m.registry.MustRegister(o.dropped)
	return o
}

// AuthQueueFull counts a dropped request and logs, at most once a minute,
// how many were dropped since the last line.
func (o *menderQueueObserver) AuthQueueFull(deviceID domain.DeviceID, pending int) {
	o.dropped.Inc()
	o.mu.Lock()
	o.since++
	now := time.Now()
	if now.Sub(o.last) < time.Minute {
		o.mu.Unlock()
		return
	}
	n := o.since
	o.last, o.since = now, 0
	o.mu.Unlock()
	o.logger.Warn("Mender pending queue is full: auth requests are not recorded; delete or reject pending requests, or wait for them to expire (OTA_MENDER_AUTH_REQUEST_TTL)",
		"pending", pending, "dropped", n, "device_id", deviceID.String())
}

// menderMounts are the Mender device routes the HTTP edge mounts.
func menderMounts(m *mender.Adapter) []httpedge.Mount {
	if m == nil {
		return nil
	}
	return []httpedge.Mount{m.Mount}
}

// menderAdminMounts are the Mender operator routes (under /api/v1/admin).
func menderAdminMounts(m *mender.Adapter) []httpedge.Mount {
	if m == nil {
		return nil
	}
	return []httpedge.Mount{m.MountAdmin}
}

// loadMenderConfig reads the OTA_MENDER_* variables into cfg.
func loadMenderConfig(cfg *Config, get func(name, def string) string, getenv func(string) string,
	bad func(name, format string, args ...any), duration func(name, def string, min, max time.Duration) time.Duration,
	number func(name, def string, min, max float64) float64, whole func(name, def string, min, max int) int) {
	m := &cfg.Mender
	m.IDKey = get("OTA_MENDER_ID_KEY", "device_id")
	if len(m.IDKey) > 128 {
		bad("OTA_MENDER_ID_KEY", "must be at most 128 characters")
	}
	switch v := get("OTA_MENDER_ACCEPT_PENDING", "false"); v {
	case "true", "1":
		m.AcceptPending = true
	case "false", "0":
	default:
		bad("OTA_MENDER_ACCEPT_PENDING", "%q must be true or false", v)
	}
	m.TokenSecret = getenv("OTA_MENDER_TOKEN_SECRET")
	if m.TokenSecret != "" && len(m.TokenSecret) < domain.MinSessionSecretLen {
		bad("OTA_MENDER_TOKEN_SECRET", "must be at least %d characters (or unset for a random per-process secret)", domain.MinSessionSecretLen)
	}
	m.TokenTTL = duration("OTA_MENDER_TOKEN_TTL", "1h", time.Minute, 7*24*time.Hour)
	m.RequestTTL = duration("OTA_MENDER_AUTH_REQUEST_TTL", "168h", time.Hour, 365*24*time.Hour)
	m.AuthRate = number("OTA_MENDER_AUTH_RATE_LIMIT", "2", 0, 1e6)
	m.AuthBurst = whole("OTA_MENDER_AUTH_RATE_BURST", "50", 1, 1e6)
}
