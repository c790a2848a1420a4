package bootstrap_test

import (
	"net"
	"strings"
	"testing"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/bootstrap"
	"github.com/ai-device/ota/domain"
)

const testAdminToken = "0123456789abcdef"

// Single sign-on is off by default; set, it takes the issuer, client id
// and secret together, the default role claim, and a default role only
// when it names a role.
func TestLoadConfigOIDC(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": testAdminToken}), true)
	if err != nil || cfg.OIDC.Enabled() {
		t.Fatalf("default: %+v %v, want single sign-on off", cfg.OIDC, err)
	}
	full := map[string]string{"OTA_ADMIN_TOKEN": testAdminToken, "OTA_OIDC_ISSUER": "https://id.example",
		"OTA_OIDC_CLIENT_ID": "ota", "OTA_OIDC_CLIENT_SECRET": "s3cret"}
	cfg, err = bootstrap.LoadConfig(env(full), true)
	if err != nil || !cfg.OIDC.Enabled() || cfg.OIDC.RoleClaim != "ota_role" || cfg.OIDC.DefaultRole != "" {
		t.Fatalf("configured: %+v %v", cfg.OIDC, err)
	}
	full["OTA_OIDC_DEFAULT_ROLE"], full["OTA_OIDC_ROLE_CLAIM"] = "viewer", "groups"
	cfg, err = bootstrap.LoadConfig(env(full), true)
	if err != nil || cfg.OIDC.DefaultRole != domain.RoleViewer || cfg.OIDC.RoleClaim != "groups" {
		t.Fatalf("with a default role: %+v %v", cfg.OIDC, err)
	}

	set := func(issuer, id, secret string) map[string]string {
		return map[string]string{"OTA_OIDC_ISSUER": issuer, "OTA_OIDC_CLIENT_ID": id, "OTA_OIDC_CLIENT_SECRET": secret}
	}
	withDefault := set("https://id.example", "ota", "s")
	withDefault["OTA_OIDC_DEFAULT_ROLE"] = "root"
	for _, c := range []struct {
		name string
		vars map[string]string
	}{
		{"OTA_OIDC_CLIENT_SECRET", set("https://id.example", "ota", "")},
		{"OTA_OIDC_CLIENT_ID", set("https://id.example", "", "s")},
		{"OTA_OIDC_ISSUER", set("", "ota", "s")},
		{"OTA_OIDC_ISSUER", set("id.example", "ota", "s")},
		{"OTA_OIDC_ISSUER", map[string]string{"OTA_OIDC_DEFAULT_ROLE": "viewer"}},
		{"OTA_OIDC_DEFAULT_ROLE", withDefault},
	} {
		c.vars["OTA_ADMIN_TOKEN"] = testAdminToken
		_, err := bootstrap.LoadConfig(env(c.vars), true)
		if err == nil || !strings.Contains(err.Error(), c.name+":") {
			t.Errorf("%v: got %v, want an error naming %s", c.vars, err, c.name)
		}
	}
}

// A provider that does not answer its discovery document stops the start,
// with the variable named.
func TestConsoleRefusesToStartWithoutTheProvider(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": testAdminToken, "OTA_OIDC_ISSUER": issuer,
		"OTA_OIDC_CLIENT_ID": "ota", "OTA_OIDC_CLIENT_SECRET": "s3cret"}), true)
	if err != nil {
		t.Fatal(err)
	}
	con, err := bootstrap.NewConsole(cfg, bootstrap.NewSignInLimiter(cfg), nil, nil, nil, nil, nil, nil, local.Clock{}, nil)
	if err == nil || con != nil || !strings.Contains(err.Error(), "OTA_OIDC_ISSUER") {
		t.Fatalf("NewConsole with an unreachable provider: %v", err)
	}
}
