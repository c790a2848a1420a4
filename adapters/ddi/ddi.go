// Package ddi speaks Eclipse hawkBit's Direct Device Integration (DDI) API,
// so that devices running SWUpdate's suricatta or rauc-hawkbit-updater can
// use this service unchanged. It is a second driving adapter beside
// adapters/rest, over the same use cases (application/ddi's Service, which calls the
// device check and events): it only translates the protocol.
//
// Its routes are mounted on the HTTP edge's Echo server (httpedge.Mount),
// so they share request ids, the access log, request metrics and the one
// error mapping (adapters/httpedge/errors.go). Every route lives under
// /{tenant}/controller/v1/{controllerId}; the tenant is configurable
// (OTA_DDI_TENANT) and any other is 404. The controller id is the device id.
package ddi

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/adapters/httpedge"
	ddiapp "github.com/ai-device/ota/application/ddi"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// DefaultTenant is hawkBit's default tenant name, which agents send unless
// configured otherwise.
const DefaultTenant = "DEFAULT"

// GatewayToken is the shared secret of OTA_DDI_GATEWAY_TOKEN, valid for
// every registered device. It redacts itself when printed or logged.
type GatewayToken string

// String redacts the token.
func (GatewayToken) String() string { return "[redacted]" }

// GoString redacts the token under %#v too.
func (GatewayToken) GoString() string { return "[redacted]" }

// LogValue redacts the token in structured logs.
func (GatewayToken) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// Config tunes the DDI adapter.
type Config struct {
	// Tenant is the one tenant name served (DefaultTenant when empty);
	// compared case-insensitively, as hawkBit does.
	Tenant string
	// GatewayToken, when set, authenticates "Authorization: GatewayToken
	// <token>" for every registered device. Empty turns gateway auth off.
	GatewayToken GatewayToken
	// PublicURL is the absolute URL devices reach the service at
	// (OTA_PUBLIC_URL): every _links href starts with it. It is
	// configured, never taken from a request's Host header, which the
	// caller chooses: links built from it would send an agent — and its
	// token — wherever a forged request said.
	PublicURL string
}

// Adapter serves the DDI routes.
type Adapter struct {
	cfg Config
	svc ddiapp.Service
	dl  ports.DownloadService // nil: no hosted artifacts
}

// New builds the DDI adapter over the DDI use cases, and the download use
// case for hosted artifacts (nil: none are served).
func New(cfg Config, svc ddiapp.Service, dl ports.DownloadService) *Adapter {
	if cfg.Tenant == "" {
		cfg.Tenant = DefaultTenant
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	return &Adapter{cfg: cfg, svc: svc, dl: dl}
}

// Prefix is the route template every DDI route starts with.
const Prefix = "/:tenant/controller/v1/:device_id"

// Mount registers the DDI routes through add (the HTTP edge's route
// registration, so they are logged and measured like its own).
func (a *Adapter) Mount(add func(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc)) {
	mw := []echo.MiddlewareFunc{a.authenticate}
	add(http.MethodGet, Prefix, a.poll, mw...)
	add(http.MethodGet, Prefix+"/deploymentBase/:action_id", a.deploymentBase, mw...)
	add(http.MethodPost, Prefix+"/deploymentBase/:action_id/feedback", a.deploymentFeedback, mw...)
	add(http.MethodGet, Prefix+"/installedBase/:action_id", a.installedBase, mw...)
	add(http.MethodGet, Prefix+"/cancelAction/:action_id", a.cancelAction, mw...)
	add(http.MethodPost, Prefix+"/cancelAction/:action_id/feedback", a.cancelFeedback, mw...)
	add(http.MethodPut, Prefix+"/configData", a.configData, mw...)
	a.mountArtifacts(add, mw...)
}

func deviceID(c echo.Context) string { return httpedge.PathParam(c, "device_id") }

// actionID reads the numeric action id; anything else names no action.
func actionID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(httpedge.PathParam(c, "action_id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("action %q: %w", httpedge.PathParam(c, "action_id"), domain.ErrNotFound)
	}
	return id, nil
}

// maxTokenLen bounds a presented token; real ones are far shorter.
const maxTokenLen = 1024

// authenticate checks the tenant (404 for any other, as for an unknown
// route) and the credentials: "TargetToken <device token>" — the same
// per-device token as the REST API — or "GatewayToken <token>", compared in
// constant time and valid for every registered device (an unknown device
// is then 404, as hawkBit answers).
func (a *Adapter) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !strings.EqualFold(httpedge.PathParam(c, "tenant"), a.cfg.Tenant) {
			return echo.ErrNotFound
		}
		values := c.Request().Header.Values("Authorization")
		if len(values) != 1 {
			return domain.ErrUnauthorized
		}
		scheme, token, ok := strings.Cut(values[0], " ")
		token = strings.TrimSpace(token)
		if !ok || token == "" || len(token) > maxTokenLen {
			return domain.ErrUnauthorized
		}
		ctx := c.Request().Context()
		// The controller id is parsed here, once. One that breaks the
		// device id rule becomes the zero DeviceID: no target token is
		// that device's (FORBIDDEN, as for any other device's path), and
		// no device is known by it (NOT_FOUND without a read).
		id, _ := domain.ParseDeviceID(deviceID(c))
		var (
			dev ports.AuthenticatedDevice
			err error
		)
		switch {
		case strings.EqualFold(scheme, "TargetToken"):
			dev, err = a.svc.AuthenticateTarget(ctx, token, id)
		case strings.EqualFold(scheme, "GatewayToken"):
			if a.cfg.GatewayToken == "" || subtle.ConstantTimeCompare([]byte(token), []byte(a.cfg.GatewayToken)) != 1 {
				return domain.ErrUnauthorized
			}
			dev, err = a.svc.KnownDevice(ctx, id)
		default:
			return domain.ErrUnauthorized
		}
		if err != nil {
			return err
		}
		c.Set(deviceKey, dev)
		return next(c)
	}
}

// deviceKey is where authenticate leaves the device it read (with its task
// state), so that the handler's use case does not read it again.
const deviceKey = "ddi.device"

// authenticated is the device authenticate read.
func authenticated(c echo.Context) ports.AuthenticatedDevice {
	dev, _ := c.Get(deviceKey).(ports.AuthenticatedDevice)
	return dev
}

// base is the absolute URL of the device's DDI root under the configured
// public URL: agents follow the _links hrefs verbatim (SWUpdate appends
// "/feedback" to the cancelAction href, so hrefs carry no query).
func (a *Adapter) base(c echo.Context) string {
	return a.cfg.PublicURL + "/" + url.PathEscape(httpedge.PathParam(c, "tenant")) +
		"/controller/v1/" + url.PathEscape(deviceID(c))
}

// sleep renders a poll interval as hawkBit's HH:MM:SS. Agents parse it
// with strptime's %H (0–23), so it is capped at 23:59:59.
func sleep(d time.Duration) string {
	s := int64(d / time.Second)
	if s < 1 {
		s = 1
	}
	if maxS := int64(24*3600 - 1); s > maxS {
		s = maxS
	}
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}
