// Package httpedge is the plumbing every driving adapter served over HTTP
// shares (the REST API in adapters/rest, the console, DDI and Mender), so
// that they answer alike and no adapter imports another: Mount, request
// ids, the access log and request metrics, panic recovery, the answer
// headers, and the one mapping of errors to statuses (errors.go).
package httpedge

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"
)

// AddRoute registers a route with its own middleware (first listed
// outermost) in a group the caller chose: a prefix and the group's
// middleware, which run before the route's own (the REST server's admin
// routes, for one).
type AddRoute = func(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc)

// Mount registers another protocol's routes through add.
type Mount func(add AddRoute)

// Group is Add for the routes under prefix, each behind mw and then its
// own middleware.
func (ed *Edge) Group(e *echo.Echo, prefix string, mw ...echo.MiddlewareFunc) AddRoute {
	return func(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
		ed.Add(e, method, prefix+path, h, append(append([]echo.MiddlewareFunc{}, mw...), m...)...)
	}
}

// RequestObserver is told when each HTTP request starts (RequestStarted:
// the requests in flight) and receives one observation as it ends, for
// the request duration histogram. route is Echo's route template (such as
// "/api/v1/devices/:device_id/ota/check"), never the raw URL, and method
// is one of HTTP's nine methods or OtherMethod, so that the metric's label
// set stays bounded; requests that match no route are reported as
// UnmatchedRoute.
type RequestObserver interface {
	RequestStarted()
	ObserveRequest(method, route string, code int, d time.Duration)
}

// UnmatchedRoute is the route label of requests that matched no route
// (404). A 405 (a known path, an unknown method) keeps the path's route
// template, so the log says which resource was called the wrong way.
const UnmatchedRoute = "unmatched"

type nopObserver struct{}

// RequestStarted discards the start.
func (nopObserver) RequestStarted() {}

// ObserveRequest discards the observation.
func (nopObserver) ObserveRequest(string, string, int, time.Duration) {}

// Edge holds what the shared middleware and error handler need: the
// logger, the request observer and the registered routes, so that logs and
// metrics can tell a matched route from the router's 404/405 fallbacks.
type Edge struct {
	logger *slog.Logger
	obs    RequestObserver
	routes map[routeKey]bool // every registered route
}

// routeKey names a registered route. A struct key, not "METHOD path":
// looking a route up per request then concatenates nothing.
type routeKey struct{ method, path string }

// New builds an Edge. obs may be nil (no request metrics) and logger may be
// nil (logs are discarded).
func New(obs RequestObserver, logger *slog.Logger) *Edge {
	if obs == nil {
		obs = nopObserver{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Edge{logger: logger, obs: obs, routes: map[routeKey]bool{}}
}

// Add registers a route and remembers it, so that the access log and the
// metrics can tell a matched route from the router's 404/405 fallbacks.
// Middleware is attached per route rather than per group: Echo gives a
// group with middleware catch-all routes, which would turn unknown admin
// paths into 401s and hide the 404/405 distinction. The route's middleware
// wraps h once, here, first listed outermost as Echo would: Echo's own
// e.Add(…, m...) re-applies it on every request, a closure per middleware
// per request.
func (ed *Edge) Add(e *echo.Echo, method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	for i := len(m) - 1; i >= 0; i-- {
		h = m[i](h)
	}
	e.Add(method, path, h)
	ed.routes[routeKey{method, path}] = true
}

// RouteLabel is the bounded route name of a request for logs and metrics.
func (ed *Edge) RouteLabel(c echo.Context) string {
	p := c.Path()
	if ed.routes[routeKey{c.Request().Method, p}] {
		return p
	}
	// Echo's router answers 405 only on a registered path: it leaves that
	// route's template in Path and the allowed methods in the context.
	if _, ok := c.Get(echo.ContextKeyHeaderAllow).(string); ok && p != "" {
		return p
	}
	return UnmatchedRoute
}

// Serve is the edge's whole per-request plumbing, outermost first, as one
// middleware installed before routing (echo.Echo.Pre), so that everything
// it does also covers the router's own 404 and 405 answers:
//
//   - routeRawPath: Echo routes on the escaped path;
//   - adoptRequestID: the request id exists before anything can fail;
//   - setAnswerHeaders: set before any handler or error can answer;
//   - the access log and the request metrics (logRequest), which see the
//     final status, after any error has been answered;
//   - recoverPanics: a panic becomes an error the access log and the error
//     handler report.
//
// One closure rather than one middleware per step: Echo applies its
// middleware anew on every request, a closure per middleware per request
// (five on every device check); the steps are plain functions called in
// order.
func (e *Edge) Serve(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		routeRawPath(c)
		adoptRequestID(c)
		setAnswerHeaders(c)
		e.obs.RequestStarted()
		start := time.Now()
		if err := recoverPanics(next, c); err != nil {
			c.Error(err)
		}
		e.logRequest(c, time.Since(start))
		return nil
	}
}

// logRequest logs one line and records one observation for a request whose
// answer is written. It logs path parameters that identify the subject
// (device_id, task_id) and never a header: the Authorization header
// carries secrets.
func (e *Edge) logRequest(c echo.Context, d time.Duration) {
	req := c.Request()
	route := e.RouteLabel(c)
	status := c.Response().Status
	e.obs.ObserveRequest(methodLabel(req.Method), route, status, d)
	level := slog.LevelInfo
	if status >= http.StatusInternalServerError {
		level = slog.LevelWarn
	}
	if !e.logger.Enabled(req.Context(), level) {
		return // no line, so nothing to build (OTA_LOG_LEVEL above info)
	}

	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs,
		slog.String("method", req.Method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.String("request_id", RequestIDOf(c)),
	)
	if route != UnmatchedRoute {
		for _, name := range []string{"device_id", "task_id"} {
			if v := PathParam(c, name); v != "" {
				attrs = append(attrs, slog.String(name, v))
			}
		}
	}
	if code, ok := c.Get(ctxErrorCode).(string); ok {
		attrs = append(attrs, slog.String("error_code", code))
	}
	e.logger.LogAttrs(req.Context(), level, "http request", attrs...)
}

// knownMethods are the request methods a metric names as they are.
var knownMethods = map[string]string{
	http.MethodGet: http.MethodGet, http.MethodHead: http.MethodHead, http.MethodPost: http.MethodPost,
	http.MethodPut: http.MethodPut, http.MethodPatch: http.MethodPatch, http.MethodDelete: http.MethodDelete,
	http.MethodConnect: http.MethodConnect, http.MethodOptions: http.MethodOptions, http.MethodTrace: http.MethodTrace,
}

// OtherMethod is the method label of every request whose method is not
// one of HTTP's nine (RFC 9110 and PATCH).
const OtherMethod = "other"

// methodLabel is the bounded method name of a request for metrics. Any
// token is a valid method on the wire, so a caller sending made-up methods
// would otherwise add a label set per method to /metrics, without limit.
func methodLabel(m string) string {
	if known, ok := knownMethods[m]; ok {
		return known
	}
	return OtherMethod
}

// Answer header values, shared by every answer: a header map holds a
// []string per key, and Header.Set would allocate a new one per request.
// Nothing writes into a header's slice in place (Set replaces it, Add
// appends to a full slice, which copies), so sharing them is safe.
var (
	nosniff = []string{"nosniff"}
	noStore = []string{"no-store"}
)

// setAnswerHeaders sets, before anything can answer, the headers every
// answer carries: X-Content-Type-Options: nosniff, so that a browser never
// reads a JSON body (which may echo a caller's text) as HTML or script,
// and Cache-Control: no-store, so that no browser or proxy keeps an
// answer — several carry tokens (a device's registration and token
// rotation, Mender's auth answers), the rest are live state. A handler
// that means to be cached (a console asset) sets its own Cache-Control.
func setAnswerHeaders(c echo.Context) {
	h := c.Response().Header()
	h[echo.HeaderXContentTypeOptions] = nosniff
	h[echo.HeaderCacheControl] = noStore
}

// recoverPanics runs next, turning a handler panic into an internal error,
// so the caller gets the usual 500 body and the stack goes to the log, not
// the wire.
func recoverPanics(next echo.HandlerFunc, c echo.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return next(c)
}

// routeRawPath makes Echo always route on the escaped path. Go leaves
// URL.RawPath empty when the escaping is the default one, and Echo then
// routes on the decoded path: "%2564ev" would arrive as "%64ev" and be
// decoded a second time by PathParam into "dev". With RawPath always set,
// parameters always arrive as written and are decoded exactly once.
func routeRawPath(c echo.Context) {
	u := c.Request().URL
	u.RawPath = u.EscapedPath()
}

// PathParam returns a path parameter, percent-decoded exactly once (see
// routeRawPath), so "%41" and "A" name the same device.
func PathParam(c echo.Context, name string) string {
	v := c.Param(name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}
