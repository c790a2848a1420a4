package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/tests/testenv"
)

// stopDeadline bounds a graceful stop; otad drains for at most 15s.
const stopDeadline = testenv.OtadStopTimeout

// env is one test's world: its own database (cloned from the migrated
// template), the shared Redis, and an admin token its instances share.
type env struct {
	db         *sqlx.DB
	dbURL      string
	redisURL   string
	adminToken string
}

// newEnv gives the test a database and Redis, or skips it when testenv has
// none to give.
func newEnv(t *testing.T) *env {
	t.Helper()
	db, dbURL := testenv.PostgresDB(t)
	return &env{db: db, dbURL: dbURL, redisURL: testenv.RedisURL(t), adminToken: "adm-" + randomHex(16)}
}

// instanceConfig tunes one otad; zero fields take the env's values and the
// product's defaults.
type instanceConfig struct {
	redisURL string // default: env's Redis
	lockWait string // OTA_LOCK_WAIT, default 500ms
	logLevel string // OTA_LOG_LEVEL, default info
	// env adds variables, such as the per-device rate limit
	// (OTA_DEVICE_RATE_LIMIT, 0 turning it off) for scenarios that send
	// more requests per device than a device would.
	env map[string]string
}

// instance is one running otad process (testenv runs it).
type instance = testenv.Otad

// start launches otad instances concurrently and returns them once every one
// answers /readyz with 200. They are stopped with SIGTERM when the test ends,
// and each must then exit 0; a failing test shows the tail of their logs.
func (e *env) start(t *testing.T, cfg instanceConfig, names ...string) []*instance {
	t.Helper()
	redisURL := cfg.redisURL
	if redisURL == "" {
		redisURL = e.redisURL
	}
	vars := map[string]string{"OTA_LOCK_WAIT": "500ms", "OTA_LOG_LEVEL": "info"}
	if cfg.lockWait != "" {
		vars["OTA_LOCK_WAIT"] = cfg.lockWait
	}
	if cfg.logLevel != "" {
		vars["OTA_LOG_LEVEL"] = cfg.logLevel
	}
	for k, v := range cfg.env {
		vars[k] = v
	}
	return testenv.StartOtads(t, testenv.OtadConfig{
		DatabaseURL: e.dbURL, RedisURL: redisURL, AdminToken: e.adminToken, Env: vars,
	}, names...)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// uniq makes an identifier no other test (or earlier run) uses.
func uniq(prefix string) string { return prefix + "-" + randomHex(6) }

// ctxTimeout is a context for one database assertion.
func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
