// Package rest is the service's REST API (adapters/rest/openapi.yaml), built on Echo v4.
//
// It turns requests into calls on the use-case ports (ports.DeviceService,
// ports.AdminService) and their results into the JSON views of the product
// contract: routing, authentication, body decoding and the JSON views. The
// plumbing it shares with the console, DDI and Mender (request ids, access
// log, panic recovery, the one mapping of errors to statuses) lives in
// adapters/httpedge.
package rest

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/adapters/httpedge"
)

// DefaultBodyLimit is the largest request body accepted (docs/ERRORS.md: 64 KiB).
// Every documented body is far smaller; the limit bounds the memory one
// request can pin.
const DefaultBodyLimit int64 = 64 << 10

// DefaultReadyTimeout bounds each /readyz probe, so a hung dependency makes
// the probe fail fast instead of stalling the orchestrator's health check.
const DefaultReadyTimeout = 2 * time.Second

// APIPrefix is the base path of the versioned API.
const APIPrefix = "/api/v1"

// AdminToken is the operators' shared secret (OTA_ADMIN_TOKEN). It is a
// distinct type so that it is never confused with a device token, and it
// redacts itself when printed or logged so it cannot leak through a log
// line or an error message by accident.
type AdminToken string

// String redacts the token; convert with string(t) where the value is needed.
func (t AdminToken) String() string { return "[redacted]" }

// GoString redacts the token under %#v too.
func (t AdminToken) GoString() string { return "[redacted]" }

// LogValue redacts the token in structured logs.
func (t AdminToken) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// Config tunes the HTTP edge. The zero value of each optional field takes
// its default.
type Config struct {
	// AdminToken authenticates operators on /api/v1/admin. When empty, every
	// admin request is refused: an unset secret must never mean "open".
	AdminToken AdminToken
	// BodyLimit is the largest accepted request body in bytes
	// (DefaultBodyLimit when 0 or negative).
	BodyLimit int64
	// ReadyTimeout bounds each readiness probe (DefaultReadyTimeout when 0
	// or negative).
	ReadyTimeout time.Duration
	// Mounts add the routes of other device protocols (adapters/ddi), so
	// that they share this server's request ids, access log, metrics and
	// error mapping.
	Mounts []httpedge.Mount
	// AdminMounts add operator routes of other adapters (adapters/mender's
	// pending devices) under /api/v1/admin, behind the admin token.
	AdminMounts []httpedge.Mount
}

func (c Config) withDefaults() Config {
	if c.BodyLimit <= 0 {
		c.BodyLimit = DefaultBodyLimit
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	return c
}

// server holds the dependencies the handlers share.
type server struct {
	cfg     Config
	devices ports.DeviceService
	admin   ports.AdminService
	checks  []ports.HealthCheck
	metrics http.Handler
	logger  *slog.Logger
	edge    *httpedge.Edge // registered routes, access log, error answers
	ext     extensions     // set by Options (fleet_handlers.go)
	// adminHash is the admin token's hash, computed once: deviceAuth
	// compares every device request's token with it, and hashing the admin
	// token again per request was a SHA-256 and two allocations per check.
	adminHash domain.TokenHash
	// accounts authenticates operators (the accounts service, or the root
	// token alone without WithAccounts); perms is adminPermissions by
	// routeShape.
	accounts authenticator
	perms    map[string]domain.Permission
}

// NewServer builds the Echo instance serving the whole HTTP surface: the
// /api/v1 device and admin calls, /healthz, /readyz (running every check),
// /metrics (metricsHandler) and /openapi.yaml. It only wires routes and
// middleware; the caller owns the listener and the shutdown.
//
// obs may be nil (no request metrics), metricsHandler may be nil (/metrics
// answers 404) and logger may be nil (logs are discarded). Options add the
// fleet views (WithFleet) and other adapters' pages (WithMount).
func NewServer(cfg Config, devices ports.DeviceService, admin ports.AdminService, checks []ports.HealthCheck,
	obs httpedge.RequestObserver, metricsHandler http.Handler, logger *slog.Logger, opts ...Option) *echo.Echo {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &server{
		cfg: cfg.withDefaults(), devices: devices, admin: admin, checks: checks,
		metrics: metricsHandler, logger: logger, edge: httpedge.New(obs, logger),
	}
	if s.cfg.AdminToken != "" {
		s.adminHash = domain.HashToken(string(s.cfg.AdminToken))
	}
	for _, o := range opts {
		o(&s.ext)
	}
	s.accounts, s.perms = rootOnly{s.adminHash}, permissionsByShape
	if s.ext.accounts != nil {
		s.accounts = s.ext.accounts
	}

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.edge.HandleError
	// Before routing, so that the router's own 404 and 405 answers get the
	// request id, the answer headers and their access line too.
	e.Pre(s.edge.Serve)

	// Each group's prefix and middleware are stated once, here: every
	// operator route, the API's own, its options' and other adapters'
	// (AdminMounts), is under /admin behind adminAuth and knownFieldsOnly.
	rootRoute := s.edge.Group(e, "")
	adminRoute := s.edge.Group(e, APIPrefix+"/admin", s.adminAuth, knownFieldsOnly)
	deviceRoute := s.edge.Group(e, APIPrefix+"/devices/:device_id/ota", s.deviceAuth)

	rootRoute(http.MethodGet, "/healthz", s.healthz)
	rootRoute(http.MethodGet, "/readyz", s.readyz)
	rootRoute(http.MethodGet, "/metrics", s.serveMetrics)
	rootRoute(http.MethodGet, "/openapi.yaml", serveOpenAPI)

	adminRoute(http.MethodPost, "/devices", s.registerDevice)
	adminRoute(http.MethodPost, "/devices/:device_id/token", s.rotateDeviceToken)
	adminRoute(http.MethodGet, "/devices/:device_id", s.getDevice)
	adminRoute(http.MethodGet, "/devices", s.listDevices)
	adminRoute(http.MethodPut, "/devices/:device_id/tags", s.setDeviceTags)
	adminRoute(http.MethodPost, "/devices/tags", s.bulkTagDevices)
	adminRoute(http.MethodPost, "/firmwares", s.publishFirmware)
	adminRoute(http.MethodGet, "/firmwares", s.listFirmwares)
	adminRoute(http.MethodPost, "/firmwares/:id/revoke", s.revokeFirmware)
	adminRoute(http.MethodPost, "/rollouts", s.startRollout)
	adminRoute(http.MethodPatch, "/rollouts/:id", s.updateRollout)
	adminRoute(http.MethodGet, "/rollouts/:id", s.getRollout)
	adminRoute(http.MethodGet, "/tasks", s.listTasks)
	adminRoute(http.MethodGet, "/tasks/:task_id/events", s.taskEvents)
	s.addFleetRoutes(adminRoute)
	s.addArtifactRoutes(adminRoute)
	s.addAccountRoutes(adminRoute)
	s.addAuditRoutes(adminRoute)
	s.addWebhookRoutes(adminRoute)
	s.addMounts(rootRoute)

	deviceRoute(http.MethodPost, "/check", s.check)
	deviceRoute(http.MethodGet, "/tasks/:task_id", s.getTask)
	deviceRoute(http.MethodPost, "/tasks/:task_id/events", s.reportEvent)
	s.addDownloadRoutes(deviceRoute, rootRoute)
	for _, mount := range s.cfg.AdminMounts {
		mount(adminRoute)
	}
	for _, mount := range s.cfg.Mounts {
		mount(rootRoute)
	}
	checkAdminRoutes(e, s.perms)
	return e
}

func (s *server) serveMetrics(c echo.Context) error {
	if s.metrics == nil {
		return echo.ErrNotFound
	}
	s.metrics.ServeHTTP(c.Response(), c.Request())
	return nil
}
