// Package bootstrap assembles the service: configuration from the
// environment, wire provider sets, logging, metrics, migrations and the
// server's lifecycle. It is the only package that knows every adapter.
package bootstrap

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ai-device/ota/adapters/postgres"
)

// Store selects the adapters behind the ports.
type Store string

// Stores: real Postgres and Redis, or in-process fakes for trying it out.
const (
	StorePostgres Store = "postgres"
	StoreMemory   Store = "memory"
)

// Config is the service's whole configuration, read from OTA_* variables.
type Config struct {
	HTTPAddr     string
	DatabaseURL  string
	RedisURL     string
	AdminToken   string
	LockTTL      time.Duration
	LockWait     time.Duration
	PollInterval time.Duration
	// RolloutSweep is how often each replica re-judges the open rollouts
	// (OTA_ROLLOUT_SWEEP_INTERVAL; application.RolloutSweep).
	RolloutSweep time.Duration
	Store        Store
	LogLevel     slog.Level
	// DeviceRate is each device's sustained budget of checks and non-final
	// events per second (0 turns the limit off); DeviceBurst is how many
	// it may spend at once.
	DeviceRate  float64
	DeviceBurst int
	// ConsoleSessionKey signs users' console sessions
	// (OTA_CONSOLE_SESSION_KEY; unset: derived from AdminToken).
	ConsoleSessionKey string
	// SignInRate is each client address's and each username's sustained
	// budget of console sign-in attempts per second (0 turns the limit
	// off); SignInBurst is how many it may spend at once.
	SignInRate  float64
	SignInBurst int
	// LockMajority is how many of 2n-1 Redis keys make a lock (1 on one
	// Redis or one cluster; more spreads keys over cluster masters).
	LockMajority int32
	// Migrate applies pending migrations at start (serve --no-migrate turns it off).
	Migrate bool
	// Mender holds the OTA_MENDER_* settings of Mender's device API.
	Mender MenderSettings
	// Downloads holds the settings of hosted downloads (bootstrap/downloads.go).
	Downloads DownloadSettings
	// DDITenant is the hawkBit tenant the DDI routes answer to
	// (OTA_DDI_TENANT); DDIGatewayToken, when set, is a gateway token valid
	// for every device (OTA_DDI_GATEWAY_TOKEN); DDIVersionAttribute names
	// the configData attribute carrying a device's running version
	// (OTA_DDI_VERSION_ATTRIBUTE).
	DDITenant           string
	DDIGatewayToken     string
	DDIVersionAttribute string
	// PublicURL is the absolute URL devices reach the service at
	// (OTA_PUBLIC_URL), without a trailing slash: the DDI links start with
	// it. Unset, it is made from OTA_HTTP_ADDR (defaultPublicURL) — never
	// from a request's Host header, which the caller chooses.
	PublicURL string
	// DBMaxConns caps the replica's Postgres pool (OTA_DB_MAX_CONNS).
	DBMaxConns DBMaxConns
	// LastSeenResolution is how precisely a device's last_seen_at is
	// stored (OTA_LAST_SEEN_RESOLUTION).
	LastSeenResolution LastSeenResolution
	// DatabaseReadURL is a streaming replica of DatabaseURL for the
	// check's lock-free read (OTA_DATABASE_READ_URL, optional); ReadMaxLag
	// is how far behind the primary it may be read (OTA_READ_MAX_LAG).
	DatabaseReadURL string
	ReadMaxLag      time.Duration
	// PprofAddr, when set, serves net/http/pprof on its own listener
	// (OTA_PPROF_ADDR): off by default, never on the service's address, so
	// profiling a replica under load is opt-in and not reachable by devices.
	PprofAddr string
	// Events is the NATS JetStream sink (OTA_EVENTS_*; bootstrap/events.go).
	Events EventSinkSettings
	// ArtifactStore is where uploaded artifacts are kept
	// (OTA_ARTIFACT_STORE); ArtifactMaxBytes bounds one upload
	// (OTA_ARTIFACT_MAX_BYTES).
	ArtifactStore    string
	ArtifactMaxBytes int64
	// OIDC is the console's single sign-on (OTA_OIDC_*; bootstrap/oidc.go).
	OIDC OIDCSettings
	// Webhooks holds the OTA_WEBHOOK_* settings of the webhook delivery (bootstrap/webhooks.go).
	Webhooks WebhookSettings
}

// LastSeenResolution is how precisely last_seen_at is kept: a check that
// reports the stored version less than this after the stored last_seen_at
// writes nothing, so a fleet's writes grow with its version changes and
// its size, not with how often it polls (docs/SCALING.md). Operators read
// last_seen_at at most this far behind a device's newest check; a changed
// version is stored at once. Zero stores every check.
type LastSeenResolution time.Duration

// Default and bound of OTA_LAST_SEEN_RESOLUTION. The default is well
// under the devices' hourly poll, so "seen in the last hour" stays exact
// to within five minutes.
const (
	DefaultLastSeenResolution = LastSeenResolution(5 * time.Minute)
	maxLastSeenResolution     = LastSeenResolution(24 * time.Hour)
)

// DBMaxConns is the most connections one replica opens to Postgres. Every
// cold check holds a connection for its round trip, so too few make checks
// queue for the pool; too many make Postgres switch between more backends
// than it has cores, and a fleet of replicas must stay under the server's
// max_connections (100 by default). DefaultDBMaxConns was chosen with
// `make bench` (docs/BENCHMARKS.md, "Pool size").
type DBMaxConns int

// Bounds and default of OTA_DB_MAX_CONNS.
const (
	DefaultDBMaxConns DBMaxConns = postgres.DefaultMaxOpenConns
	maxDBMaxConns     DBMaxConns = 1000
)

// Postgres is the pool configuration of cfg for postgres.Open.
func (c Config) Postgres() postgres.Config {
	return postgres.Config{URL: postgres.DatabaseURL(c.DatabaseURL), MaxOpenConns: int(c.DBMaxConns)}
}

// Defaults from docs/CONFIGURATION.md.
const (
	DefaultHTTPAddr    = ":8080"
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/ota?sslmode=disable"
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
	minAdminTokenLen   = 16
	minSessionKeyLen   = 32
)

// LoadConfig reads the configuration through getenv (os.Getenv in
// production, a map in tests). Every bad value is refused with a message
// naming its variable, so a misconfigured replica fails at start instead of
// at the first request. requireAdminToken is false for commands that do
// not serve (migrate, version).
func LoadConfig(getenv func(string) string, requireAdminToken bool) (Config, error) {
	get := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	cfg := Config{
		HTTPAddr:    get("OTA_HTTP_ADDR", DefaultHTTPAddr),
		DatabaseURL: get("OTA_DATABASE_URL", DefaultDatabaseURL),
		RedisURL:    get("OTA_REDIS_URL", DefaultRedisURL),
		AdminToken:  getenv("OTA_ADMIN_TOKEN"),
		Migrate:     true,
	}
	var errs []string
	bad := func(name, format string, args ...any) {
		errs = append(errs, name+": "+fmt.Sprintf(format, args...))
	}
	if _, port, err := net.SplitHostPort(cfg.HTTPAddr); err != nil || port == "" {
		bad("OTA_HTTP_ADDR", "%q is not a host:port address such as :8080", cfg.HTTPAddr)
	}
	if u, err := url.Parse(cfg.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		bad("OTA_DATABASE_URL", "must be a postgres:// URL")
	}
	if u, err := url.Parse(cfg.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		bad("OTA_REDIS_URL", "must be a redis:// or rediss:// URL")
	}
	if requireAdminToken {
		switch {
		case cfg.AdminToken == "":
			bad("OTA_ADMIN_TOKEN", "is required: serve refuses to start without an admin token")
		case len(cfg.AdminToken) < minAdminTokenLen:
			bad("OTA_ADMIN_TOKEN", "must be at least %d characters", minAdminTokenLen)
		}
	}
	duration := func(name, def string, min, max time.Duration) time.Duration {
		raw := get(name, def)
		d, err := time.ParseDuration(raw)
		if err != nil {
			bad(name, "%q is not a duration such as %s", raw, def)
			return 0
		}
		if d < min || d > max {
			bad(name, "must be between %s and %s", min, max)
		}
		return d
	}
	cfg.LockTTL = duration("OTA_LOCK_TTL", "5s", 100*time.Millisecond, time.Hour)
	cfg.LockWait = duration("OTA_LOCK_WAIT", "500ms", time.Millisecond, time.Minute)
	cfg.PollInterval = duration("OTA_POLL_INTERVAL", "1h", time.Second, 7*24*time.Hour)
	cfg.RolloutSweep = duration("OTA_ROLLOUT_SWEEP_INTERVAL", "1m", time.Second, 24*time.Hour)
	switch s := Store(get("OTA_STORE", string(StorePostgres))); s {
	case StorePostgres, StoreMemory:
		cfg.Store = s
	default:
		bad("OTA_STORE", "%q must be postgres or memory", s)
	}
	number := func(name, def string, min, max float64) float64 {
		raw := get(name, def)
		v, err := strconv.ParseFloat(raw, 64)
		if err != nil || !(v >= min && v <= max) { // NaN compares false both ways: refused here, not let through
			bad(name, "%q must be a number from %g to %g", raw, min, max)
			return 0
		}
		return v
	}
	// A count is a whole number: "1.5" is refused, not truncated to 1.
	whole := func(name, def string, min, max int) int {
		raw := get(name, def)
		v, err := strconv.Atoi(raw)
		if err != nil || v < min || v > max {
			bad(name, "%q must be a whole number from %d to %d", raw, min, max)
			return 0
		}
		return v
	}
	cfg.DeviceRate = number("OTA_DEVICE_RATE_LIMIT", "5", 0, 1e6)
	cfg.DeviceBurst = whole("OTA_DEVICE_RATE_BURST", "20", 1, 1e6)
	cfg.LockMajority = int32(whole("OTA_LOCK_MAJORITY", "1", 1, 5))
	cfg.ConsoleSessionKey = strings.TrimSpace(getenv("OTA_CONSOLE_SESSION_KEY"))
	if cfg.ConsoleSessionKey != "" && len(cfg.ConsoleSessionKey) < minSessionKeyLen {
		bad("OTA_CONSOLE_SESSION_KEY", "must be at least %d characters (or unset to derive it from OTA_ADMIN_TOKEN)", minSessionKeyLen)
	}
	cfg.SignInRate = number("OTA_CONSOLE_SIGNIN_RATE_LIMIT", "0.1", 0, 1e6)
	cfg.SignInBurst = whole("OTA_CONSOLE_SIGNIN_RATE_BURST", "10", 1, 1e6)
	loadMenderConfig(&cfg, get, getenv, bad, duration, number, whole)
	loadDDIConfig(&cfg, get, getenv, bad)
	loadOIDCConfig(&cfg, getenv, bad)
	loadArtifactConfig(&cfg, get, bad)
	loadDownloadConfig(&cfg, get, getenv, bad, duration)
	loadWebhookConfig(&cfg, get, bad, duration, whole)
	cfg.DBMaxConns = DBMaxConns(whole("OTA_DB_MAX_CONNS", strconv.Itoa(int(DefaultDBMaxConns)), 1, int(maxDBMaxConns)))
	cfg.LastSeenResolution = LastSeenResolution(duration("OTA_LAST_SEEN_RESOLUTION",
		time.Duration(DefaultLastSeenResolution).String(), 0, time.Duration(maxLastSeenResolution)))
	cfg.DatabaseReadURL = strings.TrimSpace(getenv("OTA_DATABASE_READ_URL"))
	if u, err := url.Parse(cfg.DatabaseReadURL); cfg.DatabaseReadURL != "" && (err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql")) {
		bad("OTA_DATABASE_READ_URL", "must be a postgres:// URL (or unset)")
	}
	cfg.ReadMaxLag = duration("OTA_READ_MAX_LAG", "1s", 10*time.Millisecond, time.Minute)
	cfg.PprofAddr = strings.TrimSpace(getenv("OTA_PPROF_ADDR"))
	if _, port, err := net.SplitHostPort(cfg.PprofAddr); cfg.PprofAddr != "" && (err != nil || port == "" || cfg.PprofAddr == cfg.HTTPAddr) {
		bad("OTA_PPROF_ADDR", "%q must be a host:port address other than OTA_HTTP_ADDR, such as 127.0.0.1:6060 (or unset)", cfg.PprofAddr)
	}
	loadEventSinkConfig(&cfg, get, bad)
	if err := cfg.LogLevel.UnmarshalText([]byte(get("OTA_LOG_LEVEL", "info"))); err != nil {
		bad("OTA_LOG_LEVEL", "must be debug, info, warn or error")
	}
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("invalid configuration:\n  %s", strings.Join(errs, "\n  "))
	}
	return cfg, nil
}
