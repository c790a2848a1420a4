package httpedge

import (
	"context"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// HeaderRequestID carries the request id on requests and on every response.
const HeaderRequestID = "X-Request-ID"

// maxRequestIDLen bounds a caller-supplied request id; a longer one is replaced.
const maxRequestIDLen = 128

// Keys of values kept on the echo.Context.
const (
	ctxRequestID = "ota.request_id"
	ctxErrorCode = "ota.error_code"
)

type requestIDKey struct{}

// RequestIDFrom returns the request id stored in a request's context by the
// HTTP edge ("" outside a request), so that deeper layers can put it in
// their own log lines and tie them to the access log and error response.
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// SaneRequestID accepts a caller's id only if it is 1–128 printable ASCII
// characters: anything else could forge log lines or bloat them.
func SaneRequestID(id string) bool {
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

// RequestID adopts the caller's X-Request-ID when sane, or makes a new one,
// and sets it on the response before anything else can answer.
func RequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		id := req.Header.Get(HeaderRequestID)
		if !SaneRequestID(id) {
			id = uuid.NewString()
		}
		c.Set(ctxRequestID, id)
		c.Response().Header().Set(HeaderRequestID, id)
		c.SetRequest(req.WithContext(context.WithValue(req.Context(), requestIDKey{}, id)))
		return next(c)
	}
}

// RequestIDOf returns the request id RequestID set on c ("" before it).
func RequestIDOf(c echo.Context) string {
	id, _ := c.Get(ctxRequestID).(string)
	return id
}
