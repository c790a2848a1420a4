package bootstrap_test

import (
	"os"
	"strings"
	"testing"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/bootstrap"
)

func TestDBMaxConnsDefaultsValidatesAndReachesThePoolConfig(t *testing.T) {
	base := map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef"}
	cfg, err := bootstrap.LoadConfig(env(base), true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DBMaxConns != bootstrap.DefaultDBMaxConns || cfg.Postgres().MaxOpenConns != int(bootstrap.DefaultDBMaxConns) {
		t.Fatalf("default: %d, pool config %+v", cfg.DBMaxConns, cfg.Postgres())
	}
	base["OTA_DB_MAX_CONNS"] = " 24 "
	if cfg, err = bootstrap.LoadConfig(env(base), true); err != nil || cfg.DBMaxConns != 24 || cfg.Postgres().MaxOpenConns != 24 {
		t.Fatalf("OTA_DB_MAX_CONNS=24: %d, %v", cfg.DBMaxConns, err)
	}
	if got := cfg.Postgres().URL; string(got) != cfg.DatabaseURL {
		t.Fatalf("pool config URL %q, want %q", got, cfg.DatabaseURL)
	}
	for _, bad := range []string{"0", "-1", "ten", "2.5", "1001", "99999999999999999999"} {
		base["OTA_DB_MAX_CONNS"] = bad
		if _, err := bootstrap.LoadConfig(env(base), true); err == nil || !strings.Contains(err.Error(), "OTA_DB_MAX_CONNS") {
			t.Errorf("OTA_DB_MAX_CONNS=%q: got %v, want an error naming it", bad, err)
		}
	}
}

// The configured size is the pool's cap, against a real Postgres.
func TestDBMaxConnsCapsTheOpenedPool(t *testing.T) {
	url := os.Getenv("OTA_TEST_DATABASE_URL")
	if url == "" {
		t.Skip("OTA_TEST_DATABASE_URL not set: no Postgres to open a pool on")
	}
	cfg, err := bootstrap.LoadConfig(env(map[string]string{
		"OTA_ADMIN_TOKEN": "0123456789abcdef", "OTA_DATABASE_URL": url, "OTA_DB_MAX_CONNS": "3",
	}), true)
	if err != nil {
		t.Fatal(err)
	}
	db, closeDB, err := postgres.Open(cfg.Postgres())
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB()
	if got := db.Stats().MaxOpenConnections; got != 3 {
		t.Fatalf("pool capped at %d, want 3", got)
	}
}
