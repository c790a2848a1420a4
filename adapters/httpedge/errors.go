package httpedge

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
)

// Error codes of the product contract (docs/ERRORS.md). Clients switch
// on the code, never on the message, so the codes are a stable API.
const (
	CodeMalformedJSON        = "MALFORMED_JSON"
	CodeValidationFailed     = "VALIDATION_FAILED"
	CodeUnauthorized         = "UNAUTHORIZED"
	CodeForbidden            = "FORBIDDEN"
	CodeNotFound             = "NOT_FOUND"
	CodeMethodNotAllowed     = "METHOD_NOT_ALLOWED"
	CodeDeviceExists         = "DEVICE_EXISTS"
	CodeUserExists           = "USER_EXISTS"
	CodeFirmwareExists       = "FIRMWARE_EXISTS"
	CodeFirmwareRevoked      = "FIRMWARE_REVOKED"
	CodeModelMismatch        = "MODEL_MISMATCH"
	CodeInvalidTransition    = "INVALID_TRANSITION"
	CodeTaskFinished         = "TASK_FINISHED"
	CodeIdempotencyConflict  = "IDEMPOTENCY_CONFLICT"
	CodePayloadTooLarge      = "PAYLOAD_TOO_LARGE"
	CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
	CodeRateLimited          = "RATE_LIMITED"
	CodeServiceBusy          = "SERVICE_BUSY"
	CodeInternal             = "INTERNAL"
)

// Codes of hosted artifacts (docs/ERRORS.md).
const (
	CodeArtifactTooLarge   = "ARTIFACT_TOO_LARGE"
	CodeChecksumMismatch   = "CHECKSUM_MISMATCH"
	CodeArtifactUnreadable = "ARTIFACT_UNREADABLE"
	CodeArtifactInUse      = "ARTIFACT_IN_USE"
	CodeUploadIncomplete   = "UPLOAD_INCOMPLETE"
)

// CodeFirmwareNotDeliverable (409) says the firmware lacks what a device
// protocol needs to deliver it (sha1, for hawkBit's DDI agents).
const CodeFirmwareNotDeliverable = "FIRMWARE_NOT_DELIVERABLE"

// Codes of a download's conditional and range requests (docs/ERRORS.md).
const (
	CodeRangeNotSatisfiable = "RANGE_NOT_SATISFIABLE"
	CodePreconditionFailed  = "PRECONDITION_FAILED"
)

// ErrorBody is the JSON shape of every error response:
// {"error": {"code", "message", "request_id"}}. It is exported so that
// tests of other packages can decode error responses without redeclaring it.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
}

// apiError is an error raised by the edge itself (bad body, bad media type,
// bad credentials header) with its final status, code and caller-safe message.
type apiError struct {
	status  int
	code    string
	message string
}

// Error is the message shown to the caller.
func (e *apiError) Error() string { return e.message }

// NewError is an error raised by an edge itself, with its final status,
// code and caller-safe message.
func NewError(status int, code, message string) error {
	return &apiError{status: status, code: code, message: message}
}

// Malformed is 400 MALFORMED_JSON with a caller-safe message.
func Malformed(msg string) error {
	return &apiError{status: http.StatusBadRequest, code: CodeMalformedJSON, message: msg}
}

// TooLarge is 413 PAYLOAD_TOO_LARGE, for a body over the limit.
func TooLarge() error {
	r := tooLarge()
	return &apiError{status: r.status, code: r.code, message: r.message}
}

// UnsupportedMedia is 415 UNSUPPORTED_MEDIA_TYPE, for a body that is not JSON.
func UnsupportedMedia() error {
	r := unsupportedMedia()
	return &apiError{status: r.status, code: r.code, message: r.message}
}

// retryAfterError may be implemented by ErrServiceBusy / ErrRateLimited
// errors that know how long the caller should wait; without it the answer
// says 1 second.
type retryAfterError interface {
	RetryAfter() time.Duration
}

// reply is what an error becomes on the wire.
type reply struct {
	status     int
	code       string
	message    string
	retryAfter time.Duration // > 0: send Retry-After
	internal   bool          // log the cause: nothing the caller did explains it
}

// Caller-safe messages for sentinel errors. The error's own text is never
// sent for these: it may carry wrapping context from deeper layers (table
// names, adapter names), which the contract keeps off the wire.
var sentinelReplies = []struct {
	err   error
	reply reply
}{
	{domain.ErrUnauthorized, reply{status: http.StatusUnauthorized, code: CodeUnauthorized, message: "missing or invalid credentials"}},
	{domain.ErrForbidden, reply{status: http.StatusForbidden, code: CodeForbidden, message: "these credentials do not give access to this resource"}},
	{domain.ErrNotFound, reply{status: http.StatusNotFound, code: CodeNotFound, message: "resource not found"}},
	{domain.ErrDeviceExists, reply{status: http.StatusConflict, code: CodeDeviceExists, message: "a device with this id is already registered"}},
	{domain.ErrUserExists, reply{status: http.StatusConflict, code: CodeUserExists, message: "an account with this username already exists"}},
	{domain.ErrArtifactNameTaken, reply{status: http.StatusConflict, code: CodeFirmwareExists, message: "another firmware of this model has this artifact_name"}},
	{domain.ErrFirmwareExists, reply{status: http.StatusConflict, code: CodeFirmwareExists, message: "firmware with this model and version is already published"}},
	{domain.ErrFirmwareRevoked, reply{status: http.StatusConflict, code: CodeFirmwareRevoked, message: "the firmware is revoked"}},
	{domain.ErrFirmwareGone, reply{status: http.StatusGone, code: CodeFirmwareGone, message: "the firmware was revoked: its image is no longer downloadable"}},
	{domain.ErrLinkInvalid, reply{status: http.StatusForbidden, code: CodeLinkInvalid, message: "the download link is not valid"}},
	{domain.ErrLinkExpired, reply{status: http.StatusForbidden, code: CodeLinkExpired, message: "the download link has expired: ask for the deployment again"}},
	{domain.ErrModelMismatch, reply{status: http.StatusConflict, code: CodeModelMismatch, message: "model does not match the registered model"}},
	{domain.ErrInvalidTransition, reply{status: http.StatusConflict, code: CodeInvalidTransition, message: "the requested state change is not allowed"}},
	{domain.ErrTaskFinished, reply{status: http.StatusConflict, code: CodeTaskFinished, message: "the task is finished"}},
	{domain.ErrRequestKeyConflict, reply{status: http.StatusConflict, code: CodeIdempotencyConflict, message: "this Idempotency-Key was used with another request: send a new key with a new request"}},
	{domain.ErrIdempotencyConflict, reply{status: http.StatusConflict, code: CodeIdempotencyConflict, message: "event id reused with a different body"}},
	{domain.ErrNotDeliverable, reply{status: http.StatusConflict, code: CodeFirmwareNotDeliverable, message: "the firmware cannot be delivered over this protocol"}},
	{domain.ErrArtifactInUse, reply{status: http.StatusConflict, code: CodeArtifactInUse, message: "a firmware refers to this artifact, which is kept while any does"}},
	{domain.ErrArtifactTooLarge, reply{status: http.StatusRequestEntityTooLarge, code: CodeArtifactTooLarge, message: "the upload is larger than the service accepts (OTA_ARTIFACT_MAX_BYTES); nothing was kept"}},
	{domain.ErrChecksumMismatch, reply{status: http.StatusUnprocessableEntity, code: CodeChecksumMismatch, message: "the upload does not match its declared sha256; nothing was kept"}},
}

// busy is the SERVICE_BUSY answer: 503 with the wait err suggests, so that
// every kind of busy tells the client alike when to retry.
func busy(err error, message string) reply {
	return reply{status: http.StatusServiceUnavailable, code: CodeServiceBusy, message: message, retryAfter: retryAfter(err)}
}

// classify maps any error a handler or middleware returns to its reply.
// It is the only place that knows which error is which status.
func classify(err error) reply {
	var (
		ae  *apiError
		mbe *http.MaxBytesError
		he  *echo.HTTPError
		ve  *domain.ValidationError
		fe  *domain.ArtifactFormatError
	)
	switch {
	case errors.As(err, &ae):
		return reply{status: ae.status, code: ae.code, message: ae.message}
	case errors.As(err, &mbe):
		return tooLarge()
	case errors.Is(err, domain.ErrArtifactStoreFull):
		return busy(err, "the artifact store is full; nothing was kept: retry once space is freed")
	case errors.Is(err, domain.ErrArtifactStoreUnavailable):
		return busy(err, "the artifact store is unavailable; nothing was kept: retry later")
	case errors.Is(err, domain.ErrServiceBusy):
		return busy(err, "the service is busy, retry later")
	case errors.Is(err, domain.ErrRateLimited):
		return reply{status: http.StatusTooManyRequests, code: CodeRateLimited,
			message: "too many requests, retry later", retryAfter: retryAfter(err)}
	case errors.As(err, &ve):
		return reply{status: http.StatusBadRequest, code: CodeValidationFailed, message: ve.Error()}
	case errors.Is(err, domain.ErrValidation):
		return reply{status: http.StatusBadRequest, code: CodeValidationFailed, message: "the request is invalid"}
	case errors.As(err, &he):
		return fromEcho(he)
	case errors.As(err, &fe):
		// The reason names what is wrong in the file, for its owner to fix.
		return reply{status: http.StatusUnprocessableEntity, code: CodeArtifactUnreadable, message: fe.Error()}
	case errors.Is(err, domain.ErrArtifactUnreadable):
		return reply{status: http.StatusUnprocessableEntity, code: CodeArtifactUnreadable, message: "the file cannot be read as the format it claims"}
	}
	for _, s := range sentinelReplies {
		if errors.Is(err, s.err) {
			r := s.reply
			// A TransitionError's text explains the refusal in words
			// written for the caller ("cannot go back from installing to
			// downloading"); anything else keeps the fixed message.
			var te *domain.TransitionError
			if errors.As(err, &te) && errors.Is(te.Kind, s.err) {
				r.message = te.Error()
			}
			return r
		}
	}
	return reply{status: http.StatusInternalServerError, code: CodeInternal, message: "internal error", internal: true}
}

func tooLarge() reply {
	return reply{status: http.StatusRequestEntityTooLarge, code: CodePayloadTooLarge, message: "request body is too large"}
}

// fromEcho maps the errors Echo raises itself (router 404/405, and any
// HTTPError a middleware returns).
func fromEcho(he *echo.HTTPError) reply {
	switch he.Code {
	case http.StatusNotFound:
		return reply{status: http.StatusNotFound, code: CodeNotFound, message: "resource not found"}
	case http.StatusMethodNotAllowed:
		return reply{status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed, message: "method not allowed on this resource"}
	case http.StatusRequestEntityTooLarge:
		return tooLarge()
	case http.StatusUnsupportedMediaType:
		return unsupportedMedia()
	case http.StatusBadRequest:
		return reply{status: http.StatusBadRequest, code: CodeValidationFailed, message: "the request is invalid"}
	case http.StatusUnauthorized:
		return sentinelReplies[0].reply
	case http.StatusForbidden:
		return sentinelReplies[1].reply
	case http.StatusTooManyRequests:
		return reply{status: http.StatusTooManyRequests, code: CodeRateLimited, message: "too many requests, retry later", retryAfter: time.Second}
	case http.StatusServiceUnavailable:
		return reply{status: http.StatusServiceUnavailable, code: CodeServiceBusy, message: "the service is busy, retry later", retryAfter: time.Second}
	}
	return reply{status: http.StatusInternalServerError, code: CodeInternal, message: "internal error", internal: true}
}

func unsupportedMedia() reply {
	return reply{status: http.StatusUnsupportedMediaType, code: CodeUnsupportedMediaType, message: "request body must be application/json"}
}

func retryAfter(err error) time.Duration {
	var ra retryAfterError
	if errors.As(err, &ra) && ra.RetryAfter() > 0 {
		return ra.RetryAfter()
	}
	return time.Second
}

// RetryAfterSeconds renders a wait as Retry-After says it: whole seconds,
// rounded up, at least 1 — for every edge that answers a wait its own way
// (the console's pages and upload).
func RetryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

// StatusClientClosedRequest is what a request whose caller hung up before
// the answer is recorded as (nginx's convention); no client ever reads it.
const StatusClientClosedRequest = 499

// HandleError is Echo's HTTPErrorHandler: the one place where errors become
// HTTP answers. Internal errors are logged with the request id, and the
// caller gets only a generic message and that id to quote.
func (e *Edge) HandleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	r := classify(err)
	id := RequestIDOf(c)
	if r.internal && c.Request().Context().Err() != nil {
		// The caller hung up and its cancellation surfaced as an error
		// (context canceled, or Postgres cancelling the statement). Nothing
		// failed on our side: record it as nginx's 499, not as a 500.
		c.Set(ctxErrorCode, "CLIENT_CLOSED_REQUEST")
		e.logger.InfoContext(c.Request().Context(), "client closed request",
			"request_id", id, "method", c.Request().Method, "route", e.RouteLabel(c))
		_ = c.NoContent(StatusClientClosedRequest)
		return
	}
	c.Set(ctxErrorCode, r.code)
	if r.internal {
		e.logger.ErrorContext(c.Request().Context(), "internal error",
			"request_id", id, "method", c.Request().Method, "route", e.RouteLabel(c), "error", err.Error())
	}
	h := c.Response().Header()
	if r.retryAfter > 0 {
		h.Set("Retry-After", RetryAfterSeconds(r.retryAfter))
	}
	if r.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="ota"`)
	}
	body := ErrorBody{Error: ErrorDetail{Code: r.code, Message: r.message, RequestID: id}}
	if werr := c.JSON(r.status, body); werr != nil {
		e.logger.WarnContext(c.Request().Context(), "writing error response failed",
			"request_id", id, "error", werr.Error())
	}
}
