package bootstrap_test

import (
	"strings"
	"testing"

	"github.com/ai-device/ota/bootstrap"
)

func TestDDIConfig(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef"}), true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DDITenant != "DEFAULT" || cfg.DDIGatewayToken != "" || cfg.DDIVersionAttribute != "sw_version" {
		t.Fatalf("DDI defaults: tenant=%q gateway set=%v attribute=%q", cfg.DDITenant, cfg.DDIGatewayToken != "", cfg.DDIVersionAttribute)
	}
	cfg, err = bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef",
		"OTA_DDI_TENANT": "fleet-1", "OTA_DDI_GATEWAY_TOKEN": "gateway-0123456789", "OTA_DDI_VERSION_ATTRIBUTE": "fw"}), true)
	if err != nil || cfg.DDITenant != "fleet-1" || cfg.DDIGatewayToken != "gateway-0123456789" || cfg.DDIVersionAttribute != "fw" {
		t.Fatalf("DDI settings: %v %q %q", err, cfg.DDITenant, cfg.DDIVersionAttribute)
	}
	for name, value := range map[string]string{
		"OTA_DDI_TENANT":            "two words",
		"OTA_DDI_GATEWAY_TOKEN":     "short",
		"OTA_DDI_VERSION_ATTRIBUTE": strings.Repeat("a", 129),
	} {
		_, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef", name: value}), true)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v, want an error naming the variable", name, value, err)
		}
		if err != nil && name == "OTA_DDI_GATEWAY_TOKEN" && strings.Contains(err.Error(), value) {
			t.Errorf("the error shows the gateway token: %v", err)
		}
	}
}
