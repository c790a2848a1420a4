package rest

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"

	"github.com/ai-device/ota/adapters/httpedge"
)

// pathUUID parses the path parameter name as a UUID, once, at the edge.
// An id that is not a UUID names no resource: it becomes the zero UUID,
// which every store answers with domain.ErrNotFound. Passing it on (rather
// than answering 404 here) keeps the order in which a use case reports its
// errors: a bad body is still VALIDATION_FAILED before the id is looked up.
func pathUUID(c echo.Context, name string) domain.UUID {
	id, _ := domain.ParseUUID(name, httpedge.PathParam(c, name))
	return id
}

// pathDeviceID parses the path parameter device_id, once, at the edge. ok
// is false for an id that breaks the device id rule: no such device can
// exist, and the handler answers NOT_FOUND, as a store answered that id
// before ids were typed, without asking the service.
func pathDeviceID(c echo.Context) (id domain.DeviceID, ok bool) {
	id, err := domain.ParseDeviceID(httpedge.PathParam(c, "device_id"))
	return id, err == nil
}

// pathTaskID parses the path parameter task_id as a UUID, once, at the
// edge. An id that is not a UUID names no task: the zero UUID, which the
// device use cases answer with domain.ErrNotFound without a read — after
// judging the request's body, so a bad event is still VALIDATION_FAILED.
func pathTaskID(c echo.Context) domain.UUID {
	return pathUUID(c, "task_id")
}

// ctxDevice keeps the authenticated device (ports.AuthenticatedDevice) on
// the echo.Context.
const ctxDevice = "ota.device"

// maxTokenLen bounds a presented bearer token; real ones are far shorter.
const maxTokenLen = 1024

func unauthorized(msg string) error {
	return httpedge.NewError(http.StatusUnauthorized, httpedge.CodeUnauthorized, msg)
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
		if dev.ID().String() != httpedge.PathParam(c, "device_id") {
			return domain.ErrForbidden
		}
		c.Set(ctxDevice, dev)
		return next(c)
	}
}
