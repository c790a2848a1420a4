package bootstrap

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/ai-device/ota/adapters/console"
	"github.com/ai-device/ota/domain"
)

// OIDCSettings are the console's single sign-on (OTA_OIDC_*): all of
// issuer, client id and secret, or none of them (no single sign-on).
type OIDCSettings struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// RoleClaim names the ID token claim holding the role
	// (OTA_OIDC_ROLE_CLAIM, default console.DefaultRoleClaim).
	RoleClaim string
	// DefaultRole is given to a user whose claim names no role
	// (OTA_OIDC_DEFAULT_ROLE); "": such a user is refused.
	DefaultRole domain.Role
}

// Enabled reports whether single sign-on is configured.
func (s OIDCSettings) Enabled() bool { return s.Issuer != "" }

// oidcDiscoveryTimeout bounds reading the provider's discovery document at
// start.
const oidcDiscoveryTimeout = 15 * time.Second

// loadOIDCConfig reads the OTA_OIDC_* variables into cfg, reporting bad
// values through bad. The issuer, client id and secret come together or
// not at all: a partial setting is a mistake, refused at start rather
// than a sign-in button that fails.
func loadOIDCConfig(cfg *Config, getenv func(string) string, bad func(name, format string, args ...any)) {
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	o := OIDCSettings{Issuer: get("OTA_OIDC_ISSUER"), ClientID: get("OTA_OIDC_CLIENT_ID"),
		ClientSecret: get("OTA_OIDC_CLIENT_SECRET"), RoleClaim: get("OTA_OIDC_ROLE_CLAIM")}
	defaultRole := get("OTA_OIDC_DEFAULT_ROLE")
	if o.Issuer == "" && o.ClientID == "" && o.ClientSecret == "" {
		if o.RoleClaim != "" || defaultRole != "" {
			bad("OTA_OIDC_ISSUER", "is required when OTA_OIDC_ROLE_CLAIM or OTA_OIDC_DEFAULT_ROLE is set")
		}
		return
	}
	for name, v := range map[string]string{"OTA_OIDC_ISSUER": o.Issuer, "OTA_OIDC_CLIENT_ID": o.ClientID, "OTA_OIDC_CLIENT_SECRET": o.ClientSecret} {
		if v == "" {
			bad(name, "is required with the other OTA_OIDC_ISSUER, OTA_OIDC_CLIENT_ID and OTA_OIDC_CLIENT_SECRET (set all three, or none)")
		}
	}
	if u, err := url.Parse(o.Issuer); o.Issuer != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "") {
		bad("OTA_OIDC_ISSUER", "%q must be the provider's http(s) issuer URL", o.Issuer)
	}
	if o.RoleClaim == "" {
		o.RoleClaim = console.DefaultRoleClaim
	}
	if defaultRole != "" {
		r, err := domain.ParseRole(defaultRole)
		if err != nil {
			bad("OTA_OIDC_DEFAULT_ROLE", "%q must be viewer, releaser, rollout_manager, device_admin or admin (or unset)", defaultRole)
		}
		o.DefaultRole = r
	}
	cfg.OIDC = o
}

// newOIDC discovers the configured provider (nil when single sign-on is
// off). The provider must answer at start: the service fails with the
// reason rather than serve a console whose sign-in cannot work.
func newOIDC(cfg Config) (*console.OIDC, error) {
	if !cfg.OIDC.Enabled() {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), oidcDiscoveryTimeout)
	defer cancel()
	o, err := console.NewOIDC(ctx, console.OIDCConfig{Issuer: cfg.OIDC.Issuer, ClientID: cfg.OIDC.ClientID,
		ClientSecret: cfg.OIDC.ClientSecret, RedirectURL: cfg.PublicURL + console.CallbackPath,
		RoleClaim: cfg.OIDC.RoleClaim, DefaultRole: cfg.OIDC.DefaultRole})
	if err != nil {
		return nil, fmt.Errorf("OTA_OIDC_ISSUER: the identity provider did not answer its discovery document: %w", err)
	}
	return o, nil
}
