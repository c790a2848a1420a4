package rest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
)

// HeaderRequestID carries the request id on requests and on every response.
const HeaderRequestID = "X-Request-ID"

// maxRequestIDLen bounds a caller-supplied request id; a longer one is replaced.
const maxRequestIDLen = 128

// Keys of values kept on the echo.Context.
const (
	ctxRequestID = "ota.request_id"
	ctxErrorCode = "ota.error_code"
	ctxDevice    = "ota.device" // the authenticated device (ports.AuthenticatedDevice)
)

type requestIDKey struct{}

// RequestIDFrom returns the request id stored in a request's context by the
// HTTP edge ("" outside a request), so that deeper layers can put it in
// their own log lines and tie them to the access log and error response.
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// saneRequestID accepts a caller's id only if it is 1–128 printable ASCII
// characters: anything else could forge log lines or bloat them.
func saneRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// requestID adopts the caller's X-Request-ID when sane, or makes a new one,
// and sets it on the response before anything else can answer.
func (s *server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		id := req.Header.Get(HeaderRequestID)
		if !saneRequestID(id) {
			id = uuid.NewString()
		}
		c.Set(ctxRequestID, id)
		c.Response().Header().Set(HeaderRequestID, id)
		c.SetRequest(req.WithContext(context.WithValue(req.Context(), requestIDKey{}, id)))
		return next(c)
	}
}

func requestIDOf(c echo.Context) string {
	id, _ := c.Get(ctxRequestID).(string)
	return id
}

// accessLog writes the response for any error (through the error handler,
// so the final status is known), then logs one line and records one
// observation per request. It logs path parameters that identify the
// subject (device_id, task_id) and never a header: the Authorization
// header carries secrets.
func (s *server) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		d := time.Since(start)
		req := c.Request()
		route := s.routeLabel(c)
		status := c.Response().Status
		s.obs.ObserveRequest(methodLabel(req.Method), route, status, d)
		level := slog.LevelInfo
		if status >= http.StatusInternalServerError {
			level = slog.LevelWarn
		}
		if !s.logger.Enabled(req.Context(), level) {
			return nil // no line, so nothing to build (OTA_LOG_LEVEL above info)
		}

		attrs := make([]slog.Attr, 0, 9)
		attrs = append(attrs,
			slog.String("method", req.Method),
			slog.String("route", route),
			slog.Int("status", status),
			slog.Float64("duration_ms", float64(d.Microseconds())/1000),
			slog.String("request_id", requestIDOf(c)),
		)
		if route != UnmatchedRoute {
			for _, name := range []string{"device_id", "task_id"} {
				if v := pathParam(c, name); v != "" {
					attrs = append(attrs, slog.String(name, v))
				}
			}
		}
		if code, ok := c.Get(ctxErrorCode).(string); ok {
			attrs = append(attrs, slog.String("error_code", code))
		}
		s.logger.LogAttrs(req.Context(), level, "http request", attrs...)
		return nil
	}
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

// answerHeaders sets, before anything can answer, the headers every
// answer carries: X-Content-Type-Options: nosniff, so that a browser never
// reads a JSON body (which may echo a caller's text) as HTML or script,
// and Cache-Control: no-store, so that no browser or proxy keeps an
// answer — several carry tokens (a device's registration and token
// rotation, Mender's auth answers), the rest are live state. A handler
// that means to be cached (a console asset) sets its own Cache-Control.
func answerHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set(echo.HeaderXContentTypeOptions, "nosniff")
		h.Set(echo.HeaderCacheControl, "no-store")
		return next(c)
	}
}

// recoverPanics turns a handler panic into an internal error, so the caller
// gets the usual 500 body and the stack goes to the log, not the wire.
func recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
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
}

// rawPathRouting makes Echo always route on the escaped path. Go leaves
// URL.RawPath empty when the escaping is the default one, and Echo then
// routes on the decoded path: "%2564ev" would arrive as "%64ev" and be
// decoded a second time by pathParam into "dev". With RawPath always set,
// parameters always arrive as written and are decoded exactly once.
func rawPathRouting(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := c.Request().URL
		u.RawPath = u.EscapedPath()
		return next(c)
	}
}

// pathParam returns a path parameter, percent-decoded exactly once (see
// rawPathRouting), so "%41" and "A" name the same device.
func pathParam(c echo.Context, name string) string {
	v := c.Param(name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// pathUUID parses the path parameter name as a UUID, once, at the edge.
// An id that is not a UUID names no resource: it becomes the zero UUID,
// which every store answers with domain.ErrNotFound. Passing it on (rather
// than answering 404 here) keeps the order in which a use case reports its
// errors: a bad body is still VALIDATION_FAILED before the id is looked up.
func pathUUID(c echo.Context, name string) domain.UUID {
	id, _ := domain.ParseUUID(name, pathParam(c, name))
	return id
}

// pathDeviceID parses the path parameter device_id, once, at the edge. ok
// is false for an id that breaks the device id rule: no such device can
// exist, and the handler answers NOT_FOUND, as a store answered that id
// before ids were typed, without asking the service.
func pathDeviceID(c echo.Context) (id domain.DeviceID, ok bool) {
	id, err := domain.ParseDeviceID(pathParam(c, "device_id"))
	return id, err == nil
}

// pathTaskID parses the path parameter task_id as a UUID, once, at the
// edge. An id that is not a UUID names no task: the zero UUID, which the
// device use cases answer with domain.ErrNotFound without a read — after
// judging the request's body, so a bad event is still VALIDATION_FAILED.
func pathTaskID(c echo.Context) domain.UUID {
	return pathUUID(c, "task_id")
}

// maxTokenLen bounds a presented bearer token; real ones are far shorter.
const maxTokenLen = 1024

func unauthorized(msg string) error {
	return &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized, message: msg}
}

// bearerToken extracts the token of a single "Authorization: Bearer <token>"
// header. Anything else (no header, several, another scheme, an empty or
// oversized token, spaces or control characters inside) is refused.
func bearerToken(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return "", unauthorized("missing Authorization header")
	}
	const bad = "the Authorization header must be \"Bearer <token>\""
	if len(values) > 1 {
		return "", unauthorized(bad)
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || len(token) > maxTokenLen {
		return "", unauthorized(bad)
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= 0x20 || token[i] >= 0x7f {
			return "", unauthorized(bad)
		}
	}
	return token, nil
}

// adminAuth admits a request bearing the admin token, compared in constant
// time. An unset admin token admits nobody.
func (s *server) adminAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		token, err := bearerToken(c.Request())
		if err != nil {
			return err
		}
		if s.cfg.AdminToken == "" || !domain.HashToken(token).Matches(s.adminHash) {
			return domain.ErrUnauthorized
		}
		return next(c)
	}
}

// deviceAuth admits a request bearing a device token whose device is the
// one in the path, and keeps what authentication returned (the device and
// its task state, read in one round trip) for the handler to pass on. A
// valid token for another device — or for a device id that does not exist
// — is FORBIDDEN, the same answer either way, so the response does not
// reveal which device ids are registered. The admin token is not a device
// token and gets 401.
func (s *server) deviceAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		token, err := bearerToken(c.Request())
		if err != nil {
			return err
		}
		if s.cfg.AdminToken != "" && domain.HashToken(token).Matches(s.adminHash) {
			// Same answer as any wrong token: the reply must not confirm
			// that a guess is the admin token.
			return domain.ErrUnauthorized
		}
		dev, err := s.devices.AuthenticateDevice(c.Request().Context(), token)
		switch {
		case errors.Is(err, domain.ErrNotFound), errors.Is(err, domain.ErrValidation):
			// No device has this token, however the service phrases it.
			return domain.ErrUnauthorized
		case err != nil:
			return err
		}
		// The authenticated device's id is typed; the path's is compared as
		// written (any other string, well-formed or not, is FORBIDDEN).
		if dev.ID().String() != pathParam(c, "device_id") {
			return domain.ErrForbidden
		}
		c.Set(ctxDevice, dev)
		return next(c)
	}
}
