package bootstrap_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/bootstrap"
	"github.com/ai-device/ota/domain"
)

func TestMenderConfig(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef"}), true)
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Mender
	if m.IDKey != "device_id" || m.AcceptPending || m.TokenSecret != "" || m.TokenTTL != time.Hour {
		t.Fatalf("Mender defaults: %+v", m)
	}
	cfg, err = bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef",
		"OTA_MENDER_ID_KEY": "mac", "OTA_MENDER_ACCEPT_PENDING": "true",
		"OTA_MENDER_TOKEN_SECRET": strings.Repeat("s", 32), "OTA_MENDER_TOKEN_TTL": "15m"}), true)
	if m = cfg.Mender; err != nil || m.IDKey != "mac" || !m.AcceptPending || m.TokenTTL != 15*time.Minute {
		t.Fatalf("Mender settings: %v %+v", err, m)
	}
	for name, value := range map[string]string{
		"OTA_MENDER_ACCEPT_PENDING": "yes",
		"OTA_MENDER_TOKEN_SECRET":   "short-secret",
		"OTA_MENDER_TOKEN_TTL":      "5s",
		"OTA_MENDER_ID_KEY":         strings.Repeat("k", 129),
	} {
		_, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef", name: value}), true)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v, want an error naming the variable", name, value, err)
		}
		if err != nil && name == "OTA_MENDER_TOKEN_SECRET" && strings.Contains(err.Error(), value) {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}

// TestMenderAuthRequestSettings: the auth request age and the per-address
// budget have sane defaults, are read, and refuse what is out of range.
func TestMenderAuthRequestSettings(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef"}), true)
	if m := cfg.Mender; err != nil || m.RequestTTL != 7*24*time.Hour || m.AuthRate != 2 || m.AuthBurst != 50 {
		t.Fatalf("defaults: %v %+v", err, m)
	}
	cfg, err = bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef",
		"OTA_MENDER_AUTH_REQUEST_TTL": "24h", "OTA_MENDER_AUTH_RATE_LIMIT": "0", "OTA_MENDER_AUTH_RATE_BURST": "5"}), true)
	if m := cfg.Mender; err != nil || m.RequestTTL != 24*time.Hour || m.AuthRate != 0 || m.AuthBurst != 5 {
		t.Fatalf("settings: %v %+v", err, m)
	}
	for name, value := range map[string]string{
		"OTA_MENDER_AUTH_REQUEST_TTL": "1m",
		"OTA_MENDER_AUTH_RATE_LIMIT":  "-1",
		"OTA_MENDER_AUTH_RATE_BURST":  "0",
	} {
		_, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef", name: value}), true)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v, want an error naming the variable", name, value, err)
		}
	}
}

// TestMenderQueueFullIsCountedAndLogged: every dropped auth request is
// counted on /metrics; the log says so once a minute, not once a request.
func TestMenderQueueFullIsCountedAndLogged(t *testing.T) {
	m := bootstrap.NewMetrics()
	var logs bytes.Buffer
	o := bootstrap.MenderQueueObserverFrom(m, slog.New(slog.NewTextHandler(&logs, nil)))
	id, _ := domain.ParseDeviceID("dev-1")
	for i := 0; i < 3; i++ {
		o.AuthQueueFull(id, 10000)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "ota_mender_auth_requests_dropped_total 3") {
		t.Fatalf("metric: %s", rec.Body.String())
	}
	if n := strings.Count(logs.String(), "pending queue is full"); n != 1 {
		t.Fatalf("%d log lines for 3 dropped requests in a minute, want 1:\n%s", n, logs.String())
	}
}

// Without OTA_MENDER_TOKEN_SECRET the warning says what it costs and that
// one process in development need not care: `make run` shows it to every
// newcomer.
func TestMenderTokenSecretWarningSaysWhenItMatters(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef"}), true)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if _, err := bootstrap.MenderConfigFrom(cfg, slog.New(slog.NewTextHandler(&log, nil))); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"OTA_MENDER_TOKEN_SECRET is not set", "Harmless for one process in development", "every replica in production"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("warning %q lacks %q", log.String(), want)
		}
	}
	cfg.Mender.TokenSecret = strings.Repeat("s", 32)
	log.Reset()
	if _, err := bootstrap.MenderConfigFrom(cfg, slog.New(slog.NewTextHandler(&log, nil))); err != nil || log.Len() != 0 {
		t.Fatalf("with a secret: %v, log %q", err, log.String())
	}
}
