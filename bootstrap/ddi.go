package bootstrap

import (
	"net"
	"net/url"
	"strings"

	"github.com/google/wire"

	"github.com/ai-device/ota/adapters/ddi"
	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/postgres"
	ddiapp "github.com/ai-device/ota/application/ddi"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// DDISet provides hawkBit's Direct Device Integration: its use cases over
// the device service, and the adapter whose routes the HTTP edge mounts.
// The store sets provide the attribute and task-action ports.
var DDISet = wire.NewSet(
	ddi.ProviderSet,
	DDIConfigFrom,
	DDIVersionAttributeFrom,
	ddiapp.New, wire.Bind(new(ddiapp.Service), new(*ddiapp.UseCases)),
)

// DDIMemoryStores are the in-process attribute and task-action repositories.
var DDIMemoryStores = wire.NewSet(
	memory.NewAttributes, wire.Bind(new(ports.DeviceAttributes), new(*memory.Attributes)),
	memory.NewTaskActions, wire.Bind(new(ddiapp.TaskActions), new(*memory.TaskActions)),
)

// DDIPostgresStores are the Postgres attribute and task-action repositories.
var DDIPostgresStores = wire.NewSet(
	postgres.NewAttributeRepository, wire.Bind(new(ports.DeviceAttributes), new(*postgres.AttributeRepository)),
	postgres.NewTaskActionRepository, wire.Bind(new(ddiapp.TaskActions), new(*postgres.TaskActionRepository)),
)

// DDIConfigFrom extracts the DDI adapter's settings.
func DDIConfigFrom(cfg Config) ddi.Config {
	return ddi.Config{Tenant: cfg.DDITenant, GatewayToken: ddi.GatewayToken(cfg.DDIGatewayToken), PublicURL: cfg.PublicURL}
}

// DDIVersionAttributeFrom names the configData attribute carrying a
// device's running version.
func DDIVersionAttributeFrom(cfg Config) ddiapp.VersionAttribute {
	return ddiapp.VersionAttribute(cfg.DDIVersionAttribute)
}

// ddiMounts are the DDI routes the HTTP edge mounts.
func ddiMounts(d *ddi.Adapter) []httpedge.Mount {
	if d == nil {
		return nil
	}
	return []httpedge.Mount{d.Mount}
}

// loadDDIConfig reads the OTA_DDI_* variables into cfg, reporting bad
// values through bad.
func loadDDIConfig(cfg *Config, get func(name, def string) string, getenv func(string) string, bad func(name, format string, args ...any)) {
	cfg.DDITenant = get("OTA_DDI_TENANT", ddi.DefaultTenant)
	if domain.ValidateIdentifier("tenant", cfg.DDITenant) != nil {
		bad("OTA_DDI_TENANT", "must be 1–64 characters of [A-Za-z0-9._:-]")
	}
	cfg.DDIGatewayToken = getenv("OTA_DDI_GATEWAY_TOKEN")
	if cfg.DDIGatewayToken != "" && (len(cfg.DDIGatewayToken) < minAdminTokenLen || strings.ContainsAny(cfg.DDIGatewayToken, " \t\r\n")) {
		bad("OTA_DDI_GATEWAY_TOKEN", "must be at least %d characters without spaces (or unset to turn gateway tokens off)", minAdminTokenLen)
	}
	cfg.DDIVersionAttribute = get("OTA_DDI_VERSION_ATTRIBUTE", "sw_version")
	if len(cfg.DDIVersionAttribute) > domain.MaxAttributeKeyLen {
		bad("OTA_DDI_VERSION_ATTRIBUTE", "must be at most %d characters", domain.MaxAttributeKeyLen)
	}
	cfg.PublicURL = strings.TrimRight(getenv("OTA_PUBLIC_URL"), "/")
	if strings.TrimSpace(cfg.PublicURL) == "" {
		cfg.PublicURL = defaultPublicURL(cfg.HTTPAddr)
	} else if u, err := url.Parse(cfg.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || strings.ContainsAny(cfg.PublicURL, "?# \t\r\n") {
		bad("OTA_PUBLIC_URL", "must be an absolute http or https URL (a path prefix allowed), without credentials, query or fragment")
	} else {
		// Schemes are case-insensitive: "HTTPS://" is https, for the links
		// made from it and for the console's Secure cookies alike.
		cfg.PublicURL = u.Scheme + cfg.PublicURL[len(u.Scheme):]
	}
}

// defaultPublicURL is the public URL when OTA_PUBLIC_URL is unset: plain
// http on OTA_HTTP_ADDR, with "localhost" for a listener on every
// interface. Only agents on the same host can follow such links: behind a
// load balancer or on another host name, OTA_PUBLIC_URL must be set.
func defaultPublicURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://localhost"
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}
