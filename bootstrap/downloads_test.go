package bootstrap_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/bootstrap"
)

// TestDownloadConfig: defaults, values read, and each bad value refused by
// name (never echoing a key).
func TestDownloadConfig(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef"}), true)
	if d := cfg.Downloads; err != nil || d.LinkKey != "" || d.LinkTTL != time.Hour || d.Presigned {
		t.Fatalf("defaults: %v %+v", err, d)
	}
	cfg, err = bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef",
		"OTA_ARTIFACT_LINK_KEY": strings.Repeat("k", 32), "OTA_ARTIFACT_LINK_TTL": "10m", "OTA_ARTIFACT_REDIRECT": "presigned"}), true)
	if d := cfg.Downloads; err != nil || d.LinkKey != strings.Repeat("k", 32) || d.LinkTTL != 10*time.Minute || !d.Presigned {
		t.Fatalf("settings: %v %+v", err, d)
	}
	for name, value := range map[string]string{
		"OTA_ARTIFACT_LINK_KEY": "short-link-key",
		"OTA_ARTIFACT_LINK_TTL": "10s",
		"OTA_ARTIFACT_REDIRECT": "s3",
	} {
		_, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef", name: value}), true)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v, want an error naming the variable", name, value, err)
		}
		if err != nil && name == "OTA_ARTIFACT_LINK_KEY" && strings.Contains(err.Error(), value) {
			t.Errorf("the error shows the key: %v", err)
		}
	}
}

// TestDownloadLinkKeyWarning: without OTA_ARTIFACT_LINK_KEY the links are
// signed with a random key, and the start says what that costs.
func TestDownloadLinkKeyWarning(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef"}), true)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	dc, err := bootstrap.DownloadConfigFrom(cfg, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil || dc.LinkKey.IsZero() {
		t.Fatalf("no key made: %v", err)
	}
	for _, want := range []string{"OTA_ARTIFACT_LINK_KEY is not set", "replicas will not accept each other's links"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("warning %q lacks %q", log.String(), want)
		}
	}
	cfg.Downloads.LinkKey = strings.Repeat("k", 32)
	log.Reset()
	if _, err := bootstrap.DownloadConfigFrom(cfg, slog.New(slog.NewTextHandler(&log, nil))); err != nil || log.Len() != 0 {
		t.Fatalf("with a key: %v, log %q", err, log.String())
	}
}
