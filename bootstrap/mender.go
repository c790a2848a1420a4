package bootstrap

import (
	"log/slog"
	"time"

	"github.com/google/wire"

	httpadapter "github.com/ai-device/ota/adapters/http"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/mender"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
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
}

// MenderSet provides Mender's device API: its use cases over the device
// service, and the adapter whose routes the HTTP edge mounts. The store
// sets provide the admission, auth request, artifact and log ports.
var MenderSet = wire.NewSet(
	mender.ProviderSet,
	MenderConfigFrom,
	wire.Struct(new(application.MenderPorts), "*"),
	application.NewMender,
	wire.Bind(new(ports.MenderService), new(*application.Mender)),
	wire.Bind(new(ports.AdmissionService), new(*application.Mender)),
)

// MenderMemoryStores are the in-process Mender repositories.
var MenderMemoryStores = wire.NewSet(
	memory.NewAdmissions, wire.Bind(new(ports.DeviceAdmissions), new(*memory.Admissions)),
	memory.NewAuthRequests, wire.Bind(new(ports.AuthRequests), new(*memory.AuthRequests)),
	memory.NewArtifactCatalog, wire.Bind(new(ports.ArtifactCatalog), new(*memory.ArtifactCatalog)),
	memory.NewTaskLogs, wire.Bind(new(ports.TaskLogs), new(*memory.TaskLogs)),
)

// MenderPostgresStores are the Postgres Mender repositories.
var MenderPostgresStores = wire.NewSet(
	postgres.NewAdmissionRepository, wire.Bind(new(ports.DeviceAdmissions), new(*postgres.AdmissionRepository)),
	postgres.NewAuthRequestRepository, wire.Bind(new(ports.AuthRequests), new(*postgres.AuthRequestRepository)),
	postgres.NewArtifactCatalogRepository, wire.Bind(new(ports.ArtifactCatalog), new(*postgres.ArtifactCatalogRepository)),
	postgres.NewTaskLogRepository, wire.Bind(new(ports.TaskLogs), new(*postgres.TaskLogRepository)),
)

// MenderConfigFrom extracts the Mender use cases' settings. Without
// OTA_MENDER_TOKEN_SECRET a random secret is made, and the warning says
// what that costs: tokens do not survive a restart and are not valid on
// other replicas (devices then authenticate again, once per replica hop).
func MenderConfigFrom(cfg Config, logger *slog.Logger) (application.MenderConfig, error) {
	secret := domain.SessionSecret(cfg.Mender.TokenSecret)
	if len(secret) == 0 {
		var err error
		if secret, err = domain.NewSessionSecret(); err != nil {
			return application.MenderConfig{}, err
		}
		logger.Warn("OTA_MENDER_TOKEN_SECRET is not set: Mender session tokens are signed with a random per-process secret; " +
			"they do not survive a restart and are not accepted by other replicas (devices authenticate again). " +
			"Harmless for one process in development; set it on every replica in production")
	}
	return application.MenderConfig{IDKey: cfg.Mender.IDKey, AcceptPending: cfg.Mender.AcceptPending,
		TokenTTL: cfg.Mender.TokenTTL, Secret: secret}, nil
}

// menderMounts are the Mender device routes the HTTP edge mounts.
func menderMounts(m *mender.Adapter) []httpadapter.Mount {
	if m == nil {
		return nil
	}
	return []httpadapter.Mount{m.Mount}
}

// menderAdminMounts are the Mender operator routes (under /api/v1/admin).
func menderAdminMounts(m *mender.Adapter) []httpadapter.Mount {
	if m == nil {
		return nil
	}
	return []httpadapter.Mount{m.MountAdmin}
}

// loadMenderConfig reads the OTA_MENDER_* variables into cfg.
func loadMenderConfig(cfg *Config, get func(name, def string) string, getenv func(string) string,
	bad func(name, format string, args ...any), duration func(name, def string, min, max time.Duration) time.Duration) {
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
}
