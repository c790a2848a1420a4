// Package mender speaks Mender's device API (authentication, inventory,
// deployments), so that devices running mender-client use this service
// unchanged. It is a driving adapter beside adapters/rest and adapters/ddi,
// over the same use cases (application/mender's Service, which calls the device
// check and events): it only translates the protocol.
//
// Its routes are mounted on the HTTP edge's Echo server, so they share
// request ids, the access log, request metrics and the one error mapping
// (adapters/httpedge/errors.go). The device routes live under /api/devices;
// the operators' routes (pending devices, task logs) under /api/v1/admin,
// behind the admin token.
//
// A device authenticates by signing its request with its key pair; an
// admitted device gets a short-lived session token (a JWT) that it sends
// as a bearer token on every other call, verified without reading the
// store. The deployment id is the task id.
package mender

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/adapters/httpedge"
	menderapp "github.com/ai-device/ota/application/mender"
	"github.com/ai-device/ota/domain"
)

// Adapter serves Mender's device API and the admission routes.
type Adapter struct {
	svc   menderapp.Service
	admin menderapp.AdmissionService
	links Links
	now   func() time.Time
}

// New builds the Mender adapter over the Mender use cases; links signs
// the download links of hosted firmware.
func New(svc menderapp.Service, admin menderapp.AdmissionService, links Links) *Adapter {
	return &Adapter{svc: svc, admin: admin, links: links, now: time.Now}
}

// Route prefixes of Mender's device API.
const (
	AuthPath        = "/api/devices/v1/authentication/auth_requests"
	InventoryPath   = "/api/devices/v1/inventory/device/attributes"
	deploymentsV1   = "/api/devices/v1/deployments/device/deployments"
	NextV1Path      = deploymentsV1 + "/next"
	NextV2Path      = "/api/devices/v2/deployments/device/deployments/next"
	StatusPathShape = deploymentsV1 + "/:id/status"
	LogPathShape    = deploymentsV1 + "/:id/log"
)

// Mount registers the device routes through add (the HTTP edge's route
// registration, so they are logged and measured like its own).
func (a *Adapter) Mount(add func(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc)) {
	add(http.MethodPost, AuthPath, a.authenticate)
	mw := []echo.MiddlewareFunc{a.session}
	add(http.MethodPut, InventoryPath, a.inventory(true), mw...)
	add(http.MethodPatch, InventoryPath, a.inventory(false), mw...)
	add(http.MethodPost, NextV2Path, a.nextV2, mw...)
	add(http.MethodPost, NextV1Path, a.nextV1Post, mw...)
	add(http.MethodGet, NextV1Path, a.nextV1Get, mw...)
	add(http.MethodPut, StatusPathShape, a.status, mw...)
	add(http.MethodPut, LogPathShape, a.log, mw...)
}

// MountAdmin registers the operators' routes, relative to /api/v1/admin
// (the edge adds the prefix and the admin authentication).
func (a *Adapter) MountAdmin(add func(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc)) {
	add(http.MethodGet, "/devices/pending", a.listPending)
	add(http.MethodPost, "/devices/pending/:id/accept", a.accept)
	add(http.MethodPost, "/devices/pending/:id/reject", a.reject)
	add(http.MethodDelete, "/devices/pending/:id", a.deletePending)
	add(http.MethodGet, "/tasks/:id/log", a.taskLog)
	add(http.MethodPut, "/devices/:device_id/public_key", a.setKey)
}

// maxBody bounds a request body, as the REST API does (64 KiB). Bodies
// may come chunked, without Content-Length (mender-client's local proxy
// sends them so): the bound is enforced on what is read.
const maxBody = 64 << 10

// maxLogBody bounds a deployment log upload. A failed install's log is
// what its operator needs most, and mender-client sends the whole of it:
// refused at 64 KiB, a long one would be lost entirely. Its last lines are
// kept (domain.NewTaskLog), so the bound only caps what is read.
const maxLogBody = 4 << 20

// readBody reads the whole body within maxBody.
func readBody(c echo.Context) ([]byte, error) { return readBodyWithin(c, maxBody) }

// readBodyWithin reads the whole body within limit bytes.
func readBodyWithin(c echo.Context, limit int64) ([]byte, error) {
	req := c.Request()
	if req.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	if req.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, mbe
		}
		return nil, &domain.ValidationError{Field: "body", Reason: "could not be read"}
	}
	return body, nil
}

// decode reads a JSON body into v (one value; unknown fields ignored).
func decode(c echo.Context, v any, shape string) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	return decodeBytes(body, v, shape)
}

func decodeBytes(body []byte, v any, shape string) error {
	if err := json.Unmarshal(body, v); err != nil {
		return &domain.ValidationError{Field: "body", Reason: "must be " + shape + " as Mender's device API describes"}
	}
	return nil
}

// pathUUID parses the path parameter name as a UUID, once, at the edge.
// An id that is not a UUID names nothing: the zero UUID, which the use
// cases answer with domain.ErrNotFound without a read, after judging the
// request's body (so a bad body is still VALIDATION_FAILED).
func pathUUID(c echo.Context, name string) domain.UUID {
	id, _ := domain.ParseUUID(name, httpedge.PathParam(c, name))
	return id
}

// pathDeviceID parses the path parameter device_id, once, at the edge; an
// id that breaks the device id rule becomes the zero DeviceID, which the
// use cases answer with domain.ErrNotFound without a read.
func pathDeviceID(c echo.Context) domain.DeviceID {
	id, _ := domain.ParseDeviceID(httpedge.PathParam(c, "device_id"))
	return id
}

// ctxDevice is where the session middleware leaves the device id, typed
// by the session token's verification.
const ctxDevice = "mender.device"

func deviceOf(c echo.Context) domain.DeviceID {
	id, _ := c.Get(ctxDevice).(domain.DeviceID)
	return id
}

// session admits a request bearing a valid session token of the device's
// current token generation.
func (a *Adapter) session(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		values := c.Request().Header.Values("Authorization")
		if len(values) != 1 {
			return domain.ErrUnauthorized
		}
		scheme, token, ok := strings.Cut(values[0], " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return domain.ErrUnauthorized
		}
		id, err := a.svc.Session(c.Request().Context(), strings.TrimSpace(token))
		if err != nil {
			return err
		}
		c.Set(ctxDevice, id)
		return next(c)
	}
}
