package bootstrap_test

import (
	"strings"
	"testing"

	"github.com/ai-device/ota/bootstrap"
)

func TestLoadConfigArtifacts(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef"}), true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ArtifactStore != "file://./var/artifacts" || cfg.ArtifactMaxBytes != 4<<30 {
		t.Errorf("defaults: store %q, max %d", cfg.ArtifactStore, cfg.ArtifactMaxBytes)
	}
	for _, ok := range []string{"file:///srv/ota", "file://./data", "s3://ota-artifacts?region=eu-west-1&endpoint=http://127.0.0.1:8333&use_path_style=true"} {
		if _, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef", "OTA_ARTIFACT_STORE": ok}), true); err != nil {
			t.Errorf("OTA_ARTIFACT_STORE=%s refused: %v", ok, err)
		}
	}
	for name, v := range map[string]string{
		"OTA_ARTIFACT_STORE":     "gs://bucket",
		"OTA_ARTIFACT_MAX_BYTES": "4GiB",
	} {
		_, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef", name: v}), true)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: %v, want an error naming it", name, v, err)
		}
	}
	for _, bad := range []string{"s3://", "file://", "/srv/ota", "0"} {
		name := "OTA_ARTIFACT_STORE"
		if bad == "0" {
			name = "OTA_ARTIFACT_MAX_BYTES"
		}
		if _, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef", name: bad}), true); err == nil {
			t.Errorf("%s=%q accepted", name, bad)
		}
	}
}
