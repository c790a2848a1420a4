package httpedge

import (
	"context"
	"net/http"

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

// requestIDHeaderKey is HeaderRequestID in Go's canonical form ("X-Request-Id"),
// the key header maps hold it under: looking it up or setting it by that
// key canonicalises nothing per request.
var requestIDHeaderKey = http.CanonicalHeaderKey(HeaderRequestID)

// adoptRequestID adopts the caller's X-Request-ID when sane, or makes a new
// one, and sets it on the response before anything else can answer.
func adoptRequestID(c echo.Context) {
	req := c.Request()
	var id string
	if v := req.Header[requestIDHeaderKey]; len(v) > 0 {
		id = v[0]
	}
	if !SaneRequestID(id) {
		id = uuid.NewString()
	}
	c.Set(ctxRequestID, id)
	c.Response().Header()[requestIDHeaderKey] = []string{id}
	c.SetRequest(req.WithContext(context.WithValue(req.Context(), requestIDKey{}, id)))
}

// RequestIDOf returns the request id adoptRequestID set on c ("" before it).
func RequestIDOf(c echo.Context) string {
	id, _ := c.Get(ctxRequestID).(string)
	return id
}
