package bootstrap_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/bootstrap"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef"}), true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != ":8080" || cfg.LockTTL != 5*time.Second || cfg.LockWait != 500*time.Millisecond ||
		cfg.PollInterval != time.Hour || cfg.RolloutSweep != time.Minute || cfg.Store != bootstrap.StorePostgres || cfg.DatabaseURL != bootstrap.DefaultDatabaseURL ||
		cfg.RedisURL != bootstrap.DefaultRedisURL || cfg.LockMajority != 1 || !cfg.Migrate ||
		cfg.LastSeenResolution != bootstrap.DefaultLastSeenResolution ||
		cfg.ConsoleSessionKey != "" || cfg.SignInRate != 0.1 || cfg.SignInBurst != 10 ||
		cfg.Webhooks != (bootstrap.WebhookSettings{Workers: 4, RetryFor: 24 * time.Hour, DisableAfter: 24 * time.Hour, BusyEvery: 100, BusyRate: 10}) {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestLoadConfigRefusesBadValuesNamingTheVariable(t *testing.T) {
	cases := map[string]map[string]string{
		"OTA_ADMIN_TOKEN":                {},
		"OTA_LOCK_TTL":                   {"OTA_LOCK_TTL": "soon"},
		"OTA_LOCK_WAIT":                  {"OTA_LOCK_WAIT": "-1s"},
		"OTA_POLL_INTERVAL":              {"OTA_POLL_INTERVAL": "0s"},
		"OTA_ROLLOUT_SWEEP_INTERVAL":     {"OTA_ROLLOUT_SWEEP_INTERVAL": "0s"},
		"OTA_STORE":                      {"OTA_STORE": "sqlite"},
		"OTA_LOG_LEVEL":                  {"OTA_LOG_LEVEL": "loud"},
		"OTA_HTTP_ADDR":                  {"OTA_HTTP_ADDR": "8080"},
		"OTA_DATABASE_URL":               {"OTA_DATABASE_URL": "mysql://x"},
		"OTA_REDIS_URL":                  {"OTA_REDIS_URL": "http://x"},
		"OTA_DEVICE_RATE_LIMIT":          {"OTA_DEVICE_RATE_LIMIT": "fast"},
		"OTA_LOCK_MAJORITY":              {"OTA_LOCK_MAJORITY": "0"},
		"OTA_LAST_SEEN_RESOLUTION":       {"OTA_LAST_SEEN_RESOLUTION": "-1m"},
		"OTA_DATABASE_READ_URL":          {"OTA_DATABASE_READ_URL": "mysql://replica"},
		"OTA_READ_MAX_LAG":               {"OTA_READ_MAX_LAG": "2m"},
		"OTA_PPROF_ADDR":                 {"OTA_PPROF_ADDR": "6060"},
		"OTA_CONSOLE_SESSION_KEY":        {"OTA_CONSOLE_SESSION_KEY": "too short a key"},
		"OTA_CONSOLE_SIGNIN_RATE_LIMIT":  {"OTA_CONSOLE_SIGNIN_RATE_LIMIT": "-1"},
		"OTA_CONSOLE_SIGNIN_RATE_BURST":  {"OTA_CONSOLE_SIGNIN_RATE_BURST": "0"},
		"OTA_WEBHOOK_WORKERS":            {"OTA_WEBHOOK_WORKERS": "-1"},
		"OTA_WEBHOOK_BUSY_RATE":          {"OTA_WEBHOOK_BUSY_RATE": "fast"},
		"OTA_WEBHOOK_BUSY_EVERY":         {"OTA_WEBHOOK_BUSY_EVERY": "0"},
		"OTA_WEBHOOK_RETRY_FOR":          {"OTA_WEBHOOK_RETRY_FOR": "10s"},
		"OTA_WEBHOOK_DISABLE_AFTER":      {"OTA_WEBHOOK_DISABLE_AFTER": "forever"},
		"OTA_WEBHOOK_ALLOW_PRIVATE":      {"OTA_WEBHOOK_ALLOW_PRIVATE": "perhaps"},
		"OTA_EVENTS_NATS_URL":            {"OTA_EVENTS_NATS_URL": "http://127.0.0.1:4222"},
		"OTA_EVENTS_NATS_STREAM":         {"OTA_EVENTS_NATS_STREAM": "has.dots"},
		"OTA_EVENTS_NATS_SUBJECT_PREFIX": {"OTA_EVENTS_NATS_SUBJECT_PREFIX": "ota.>"},
	}
	for name, vars := range cases {
		if name != "OTA_ADMIN_TOKEN" {
			vars["OTA_ADMIN_TOKEN"] = "0123456789abcdef"
		}
		_, err := bootstrap.LoadConfig(env(vars), true)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v, want an error naming it", name, err)
		}
	}
	if _, err := bootstrap.LoadConfig(env(map[string]string{}), false); err != nil {
		t.Errorf("migrate needs no admin token: %v", err)
	}
}

// A count is a whole number: a fraction is refused, naming the variable,
// rather than silently truncated.
func TestLoadConfigRefusesFractionalCounts(t *testing.T) {
	for _, name := range []string{"OTA_DEVICE_RATE_BURST", "OTA_LOCK_MAJORITY", "OTA_DB_MAX_CONNS", "OTA_MENDER_AUTH_RATE_BURST"} {
		_, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef", name: "1.5"}), true)
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "whole number") {
			t.Errorf("%s=1.5: got %v, want an error naming it", name, err)
		}
	}
	cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef", "OTA_DEVICE_RATE_BURST": "7", "OTA_DEVICE_RATE_LIMIT": "0.5"}), true)
	if err != nil || cfg.DeviceBurst != 7 || cfg.DeviceRate != 0.5 {
		t.Fatalf("burst 7, rate 0.5: %+v %v", cfg, err)
	}
}

func TestLoadConfigAcceptsSeveralRedisAddresses(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env(map[string]string{
		"OTA_ADMIN_TOKEN": "0123456789abcdef",
		"OTA_REDIS_URL":   "redis://10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000",
	}), true)
	if err != nil || cfg.RedisURL != "redis://10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000" {
		t.Fatalf("%+v %v", cfg, err)
	}
}

func TestLoadConfigLastSeenResolution(t *testing.T) {
	for raw, want := range map[string]time.Duration{"0": 0, "30s": 30 * time.Second, "1h": time.Hour} {
		cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_LAST_SEEN_RESOLUTION": raw}), false)
		if err != nil || time.Duration(cfg.LastSeenResolution) != want {
			t.Errorf("OTA_LAST_SEEN_RESOLUTION=%s: %v %v, want %v", raw, time.Duration(cfg.LastSeenResolution), err, want)
		}
	}
	if _, err := bootstrap.LoadConfig(env(map[string]string{"OTA_LAST_SEEN_RESOLUTION": "48h"}), false); err == nil ||
		!strings.Contains(err.Error(), "OTA_LAST_SEEN_RESOLUTION") {
		t.Errorf("48h: %v, want an error naming OTA_LAST_SEEN_RESOLUTION", err)
	}
}

// TestWebhookDeliveryConfigOffIsOff: 0 in OTA_WEBHOOK_WORKERS and
// OTA_WEBHOOK_BUSY_RATE turns the worker, or its pacing, off, where the
// worker's own zero would take its default.
func TestWebhookDeliveryConfigOffIsOff(t *testing.T) {
	var cfg bootstrap.Config
	cfg.Webhooks.Workers, cfg.Webhooks.BusyRate = 0, 0
	if d := bootstrap.WebhookDeliveryConfigFrom(cfg); d.Workers >= 0 || d.BusyRate >= 0 {
		t.Fatalf("0 and 0: %+v; want both negative (off)", d)
	}
	cfg.Webhooks.Workers, cfg.Webhooks.BusyRate, cfg.Webhooks.BusyEvery = 3, 250, 40
	if d := bootstrap.WebhookDeliveryConfigFrom(cfg); d.Workers != 3 || d.BusyRate != 250 || d.BusyEvery != 40 {
		t.Fatalf("3, 250 and 40: %+v", d)
	}
}

// TestLoadConfigRefusesNaNRates: a rate that is not a number is a bad
// value like "fast" (docs/CONFIGURATION.md: "Every value is checked at
// start: a bad one stops otad with a message naming the variable").
// strconv.ParseFloat reads "NaN" as a float, and NaN compares false with
// both bounds, so it slips past the range check; a token bucket filled at
// NaN a second then admits every request — the sign-in budget (S5), the
// devices' and Mender's all silently off.
func TestLoadConfigRefusesNaNRates(t *testing.T) {
	for _, name := range []string{"OTA_DEVICE_RATE_LIMIT", "OTA_CONSOLE_SIGNIN_RATE_LIMIT", "OTA_MENDER_AUTH_RATE_LIMIT"} {
		cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef", name: "NaN"}), true)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=NaN: accepted (device %v, sign-in %v, mender %v), want an error naming it",
				name, cfg.DeviceRate, cfg.SignInRate, cfg.Mender.AuthRate)
		}
	}
}
