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
	Mounts []Mount
	// AdminMounts add operator routes of other adapters (adapters/mender's
	// pending devices) under /api/v1/admin, behind the admin token.
	AdminMounts []Mount
}

// Mount registers another protocol's routes through add.
type Mount func(add func(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc))

func (c Config) withDefaults() Config {
	if c.BodyLimit <= 0 {
		c.BodyLimit = DefaultBodyLimit
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	return c
}

// RequestObserver receives one observation per HTTP request, for the
// request duration histogram. route is Echo's route template (such as
// "/api/v1/devices/:device_id/ota/check"), never the raw URL, and method
// is one of HTTP's nine methods or OtherMethod, so that the metric's label
// set stays bounded; requests that match no route are reported as
// UnmatchedRoute.
type RequestObserver interface {
	ObserveRequest(method, route string, code int, d time.Duration)
}

// UnmatchedRoute is the route label of requests that matched no route
// (404). A 405 (a known path, an unknown method) keeps the path's route
// template, so the log says which resource was called the wrong way.
const UnmatchedRoute = "unmatched"

type nopObserver struct{}

// ObserveRequest discards the observation.
func (nopObserver) ObserveRequest(string, string, int, time.Duration) {}

// server holds the dependencies the handlers share.
type server struct {
	cfg     Config
	devices ports.DeviceService
	admin   ports.AdminService
	checks  []ports.HealthCheck
	obs     RequestObserver
	metrics http.Handler
	logger  *slog.Logger
	routes  map[routeKey]bool // every registered route
	ext     extensions        // set by Options (fleet_handlers.go)
	// adminHash is the admin token's hash, computed once: deviceAuth
	// compares every device request's token with it, and hashing the admin
	// token again per request was a SHA-256 and two allocations per check.
	adminHash domain.TokenHash
}

// routeKey names a registered route. A struct key, not "METHOD path":
// looking a route up per request then concatenates nothing.
type routeKey struct{ method, path string }

// NewServer builds the Echo instance serving the whole HTTP surface: the
// /api/v1 device and admin calls, /healthz, /readyz (running every check),
// /metrics (metricsHandler) and /openapi.yaml. It only wires routes and
// middleware; the caller owns the listener and the shutdown.
//
// obs may be nil (no request metrics), metricsHandler may be nil (/metrics
// answers 404) and logger may be nil (logs are discarded). Options add the
// fleet views (WithFleet) and other adapters' pages (WithMount).
func NewServer(cfg Config, devices ports.DeviceService, admin ports.AdminService, checks []ports.HealthCheck,
	obs RequestObserver, metricsHandler http.Handler, logger *slog.Logger, opts ...Option) *echo.Echo {
	if obs == nil {
		obs = nopObserver{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &server{
		cfg: cfg.withDefaults(), devices: devices, admin: admin, checks: checks,
		obs: obs, metrics: metricsHandler, logger: logger, routes: map[routeKey]bool{},
	}
	if s.cfg.AdminToken != "" {
		s.adminHash = domain.HashToken(string(s.cfg.AdminToken))
	}
	for _, o := range opts {
		o(&s.ext)
	}

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	// Outermost first: the request id must exist before anything can fail,
	// the access log must see the final status, and a panic must become an
	// error the access log and error handler can report. The answer
	// headers are set before any handler or error can answer.
	e.Pre(rawPathRouting)
	e.Use(s.requestID, answerHeaders, s.accessLog, recoverPanics)

	s.add(e, http.MethodGet, "/healthz", s.healthz)
	s.add(e, http.MethodGet, "/readyz", s.readyz)
	s.add(e, http.MethodGet, "/metrics", s.serveMetrics)
	s.add(e, http.MethodGet, "/openapi.yaml", serveOpenAPI)

	adminMW := []echo.MiddlewareFunc{s.adminAuth, knownFieldsOnly}
	a := APIPrefix + "/admin"
	s.add(e, http.MethodPost, a+"/devices", s.registerDevice, adminMW...)
	s.add(e, http.MethodPost, a+"/devices/:device_id/token", s.rotateDeviceToken, adminMW...)
	s.add(e, http.MethodGet, a+"/devices/:device_id", s.getDevice, adminMW...)
	s.add(e, http.MethodGet, a+"/devices", s.listDevices, adminMW...)
	s.add(e, http.MethodPut, a+"/devices/:device_id/tags", s.setDeviceTags, adminMW...)
	s.add(e, http.MethodPost, a+"/devices/tags", s.bulkTagDevices, adminMW...)
	s.add(e, http.MethodPost, a+"/firmwares", s.publishFirmware, adminMW...)
	s.add(e, http.MethodGet, a+"/firmwares", s.listFirmwares, adminMW...)
	s.add(e, http.MethodPost, a+"/firmwares/:id/revoke", s.revokeFirmware, adminMW...)
	s.add(e, http.MethodPost, a+"/rollouts", s.startRollout, adminMW...)
	s.add(e, http.MethodPatch, a+"/rollouts/:id", s.updateRollout, adminMW...)
	s.add(e, http.MethodGet, a+"/rollouts/:id", s.getRollout, adminMW...)
	s.add(e, http.MethodGet, a+"/tasks", s.listTasks, adminMW...)
	s.add(e, http.MethodGet, a+"/tasks/:task_id/events", s.taskEvents, adminMW...)
	s.addFleetRoutes(e, adminMW...)
	s.addMounts(e)

	deviceMW := []echo.MiddlewareFunc{s.deviceAuth}
	d := APIPrefix + "/devices/:device_id/ota"
	s.add(e, http.MethodPost, d+"/check", s.check, deviceMW...)
	s.add(e, http.MethodGet, d+"/tasks/:task_id", s.getTask, deviceMW...)
	s.add(e, http.MethodPost, d+"/tasks/:task_id/events", s.reportEvent, deviceMW...)
	for _, mount := range s.cfg.AdminMounts {
		mount(func(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
			s.add(e, method, a+path, h, append(append([]echo.MiddlewareFunc{}, adminMW...), m...)...)
		})
	}
	for _, mount := range s.cfg.Mounts {
		mount(func(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
			s.add(e, method, path, h, m...)
		})
	}
	return e
}

// add registers a route and remembers it, so that the access log and the
// metrics can tell a matched route from the router's 404/405 fallbacks.
// Middleware is attached per route rather than per group: Echo gives a
// group with middleware catch-all routes, which would turn unknown admin
// paths into 401s and hide the 404/405 distinction. The route's middleware
// wraps h once, here, first listed outermost as Echo would: Echo's own
// e.Add(…, m...) re-applies it on every request, a closure per middleware
// per request.
func (s *server) add(e *echo.Echo, method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	for i := len(m) - 1; i >= 0; i-- {
		h = m[i](h)
	}
	e.Add(method, path, h)
	s.routes[routeKey{method, path}] = true
}

// routeLabel is the bounded route name of a request for logs and metrics.
func (s *server) routeLabel(c echo.Context) string {
	p := c.Path()
	if s.routes[routeKey{c.Request().Method, p}] {
		return p
	}
	// Echo's router answers 405 only on a registered path: it leaves that
	// route's template in Path and the allowed methods in the context.
	if _, ok := c.Get(echo.ContextKeyHeaderAllow).(string); ok && p != "" {
		return p
	}
	return UnmatchedRoute
}

func (s *server) serveMetrics(c echo.Context) error {
	if s.metrics == nil {
		return echo.ErrNotFound
	}
	s.metrics.ServeHTTP(c.Response(), c.Request())
	return nil
}
