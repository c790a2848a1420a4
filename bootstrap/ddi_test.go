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

// TestPublicURL: OTA_PUBLIC_URL is what the DDI links start with; unset,
// it is made from OTA_HTTP_ADDR (never from a request), and a value that
// is no absolute http(s) URL stops the start.
func TestPublicURL(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "http://localhost:8080"},
		{map[string]string{"OTA_HTTP_ADDR": "0.0.0.0:9000"}, "http://localhost:9000"},
		{map[string]string{"OTA_HTTP_ADDR": "10.0.0.5:9000"}, "http://10.0.0.5:9000"},
		{map[string]string{"OTA_PUBLIC_URL": "https://ota.example.com/fleet/"}, "https://ota.example.com/fleet"},
		// A scheme is case-insensitive: kept lowercase, as links and the
		// console's Secure cookies read it.
		{map[string]string{"OTA_PUBLIC_URL": "HTTPS://ota.example.com/Fleet"}, "https://ota.example.com/Fleet"},
	} {
		c.env["OTA_ADMIN_TOKEN"] = "0123456789abcdef"
		cfg, err := bootstrap.LoadConfig(env(c.env), true)
		if err != nil || cfg.PublicURL != c.want {
			t.Errorf("%v: public URL %q (%v), want %q", c.env, cfg.PublicURL, err, c.want)
		}
		if got := bootstrap.DDIConfigFrom(cfg).PublicURL; got != c.want {
			t.Errorf("%v: the DDI adapter gets %q, want %q", c.env, got, c.want)
		}
	}
	for _, bad := range []string{"ota.example.com", "ftp://ota.example.com", "https://", "https://u:p@ota.example.com", "https://ota.example.com/?x=1", "https://ota.example.com/#top"} {
		_, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef", "OTA_PUBLIC_URL": bad}), true)
		if err == nil || !strings.Contains(err.Error(), "OTA_PUBLIC_URL") {
			t.Errorf("OTA_PUBLIC_URL=%q: %v, want an error naming the variable", bad, err)
		}
	}
}
