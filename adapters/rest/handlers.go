package rest

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Request bodies. Every field is a pointer so that an absent field can be
// told from a zero value; the application validates values.

type registerDeviceBody struct {
	DeviceID       *string `json:"device_id"`
	Model          *string `json:"model"`
	CurrentVersion *string `json:"current_version"`
	PublicKey      *string `json:"public_key"`
}

type publishFirmwareBody struct {
	Model            *string `json:"model"`
	Version          *string `json:"version"`
	URL              *string `json:"url"`
	SizeBytes        *int64  `json:"size_bytes"`
	SHA256           *string `json:"sha256"`
	SHA1             *string `json:"sha1"`
	MD5              *string `json:"md5"`
	Signature        *string `json:"signature"`
	ReleaseNotes     *string `json:"release_notes"`
	Mandatory        *bool   `json:"mandatory"`
	MinSourceVersion *string `json:"min_source_version"`
	ArtifactName     *string `json:"artifact_name"`
	// ArtifactID publishes an uploaded artifact instead of a URL: size and
	// checksums then come from it and may be left out.
	ArtifactID *string `json:"artifact_id"`
}

type startRolloutBody struct {
	FirmwareID              *string `json:"firmware_id"`
	Percentage              *int    `json:"percentage"`
	MaxAttempts             *int    `json:"max_attempts"`
	FailureThresholdPercent *int    `json:"failure_threshold_percent"`
	MinSample               *int    `json:"min_sample"`
	// Targeting: whom and when (targeting_handlers.go reads them).
	Selector           *rolloutSelector `json:"selector"`
	Stages             []stageBody      `json:"stages"`
	StartsAt           *string          `json:"starts_at"`
	Window             *windowBody      `json:"window"`
	TaskTimeoutSeconds *int64           `json:"task_timeout_seconds"`
	AllowDowngrade     *bool            `json:"allow_downgrade"`
}

type updateRolloutBody struct {
	Percentage *int    `json:"percentage"`
	Status     *string `json:"status"`
}

type checkBody struct {
	Model          *string           `json:"model"`
	CurrentVersion *string           `json:"current_version"`
	Attributes     map[string]string `json:"attributes"`
}

type eventBody struct {
	EventID      *string `json:"event_id"`
	Status       *string `json:"status"`
	Progress     *int    `json:"progress"`
	ErrorCode    *string `json:"error_code"`
	ErrorMessage *string `json:"error_message"`
}

// ---- admin ----

func (s *server) registerDevice(c echo.Context) error {
	var b registerDeviceBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	if err := required(has("device_id", b.DeviceID), has("model", b.Model)); err != nil {
		return err
	}
	cred, err := s.admin.RegisterDevice(c.Request().Context(), actorOf(c), ports.RegisterDevice{
		DeviceID: *b.DeviceID, Model: *b.Model, CurrentVersion: deref(b.CurrentVersion),
		PublicKey: deref(b.PublicKey),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, registrationView{
		DeviceID: cred.Device.ID().String(), Model: cred.Device.Model(), Token: cred.Token,
		CreatedAt: timestamp(cred.Device.CreatedAt()),
	})
}

func (s *server) rotateDeviceToken(c echo.Context) error {
	if err := s.acceptEmptyBody(c); err != nil {
		return err
	}
	id, ok := pathDeviceID(c)
	if !ok {
		return domain.ErrNotFound
	}
	cred, err := s.admin.RotateDeviceToken(c.Request().Context(), actorOf(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, tokenView{DeviceID: cred.Device.ID().String(), Model: cred.Device.Model(), Token: cred.Token})
}

func (s *server) getDevice(c echo.Context) error {
	id, ok := pathDeviceID(c)
	if !ok {
		return domain.ErrNotFound
	}
	v, err := s.admin.GetDevice(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newDeviceView(v))
}

func (s *server) publishFirmware(c echo.Context) error {
	var b publishFirmwareBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	var artifactID domain.UUID
	if b.ArtifactID != nil {
		id, err := domain.ParseUUID("artifact_id", *b.ArtifactID)
		if err != nil {
			return err
		}
		artifactID = id
		if err := required(has("model", b.Model), has("version", b.Version)); err != nil {
			return err
		}
	} else if err := required(has("model", b.Model), has("version", b.Version), has("url", b.URL),
		has("size_bytes", b.SizeBytes), has("sha256", b.SHA256)); err != nil {
		return err
	}
	fw, err := s.admin.PublishFirmware(c.Request().Context(), actorOf(c), domain.FirmwareSpec{
		Model: *b.Model, Version: *b.Version, URL: deref(b.URL), SizeBytes: deref(b.SizeBytes), SHA256: deref(b.SHA256),
		ArtifactID: artifactID,
		SHA1:       deref(b.SHA1), MD5: deref(b.MD5), Signature: deref(b.Signature),
		ReleaseNotes: deref(b.ReleaseNotes), Mandatory: deref(b.Mandatory),
		MinSourceVersion: deref(b.MinSourceVersion),
		ArtifactName:     deref(b.ArtifactName),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, newFirmwareView(fw))
}

func (s *server) listFirmwares(c echo.Context) error {
	model, err := queryParam(c, "model")
	if err != nil {
		return err
	}
	list, err := s.admin.ListFirmwares(c.Request().Context(), model)
	if err != nil {
		return err
	}
	return itemsOf(c, list, newFirmwareView)
}

func (s *server) revokeFirmware(c echo.Context) error {
	if err := s.acceptEmptyBody(c); err != nil {
		return err
	}
	fw, err := s.admin.RevokeFirmware(c.Request().Context(), actorOf(c), pathUUID(c, "id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newFirmwareView(fw))
}

func (s *server) startRollout(c echo.Context) error {
	var b startRolloutBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	// Syntax only: the use case reads the firmware id and the domain
	// judges the policy (NewRollout), as for the console's form.
	spec := domain.RolloutSpec{
		Percentage: deref(b.Percentage), NoPercentage: b.Percentage == nil, MaxAttempts: b.MaxAttempts,
		FailureThresholdPercent: b.FailureThresholdPercent, MinSample: b.MinSample,
	}
	if err := b.policySpec(&spec); err != nil {
		return err
	}
	keys := c.Request().Header.Values("Idempotency-Key")
	if len(keys) > 1 {
		return &domain.ValidationError{Field: "Idempotency-Key", Reason: "must be given once"}
	}
	r, err := s.admin.StartRollout(c.Request().Context(), actorOf(c),
		ports.StartRollout{FirmwareID: deref(b.FirmwareID), Spec: spec, RequestKey: strings.Join(keys, "")})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, newRolloutView(r))
}

func (s *server) updateRollout(c echo.Context) error {
	var b updateRolloutBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	r, err := s.admin.UpdateRollout(c.Request().Context(), actorOf(c), pathUUID(c, "id"),
		ports.RolloutChange{Percentage: b.Percentage, Status: b.Status})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newRolloutView(r))
}

func (s *server) getRollout(c echo.Context) error {
	v, err := s.admin.GetRollout(c.Request().Context(), pathUUID(c, "id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newRolloutStatsView(v))
}

func (s *server) listTasks(c echo.Context) error {
	var q ports.TaskQuery
	if err := queryParams(c, []queryField{
		{"device_id", &q.DeviceID}, {"rollout_id", &q.RolloutID}, {"status", &q.Status},
		{"limit", &q.Limit}, {"after", &q.After},
	}); err != nil {
		return err
	}
	page, err := s.admin.ListTasks(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newTaskPageView(page))
}

// taskEvents answers a task's status history (its stored events, oldest
// first, bounded by application.MaxTaskEvents).
func (s *server) taskEvents(c echo.Context) error {
	evs, err := s.admin.TaskEvents(c.Request().Context(), pathUUID(c, "task_id"))
	if err != nil {
		return err
	}
	return itemsOf(c, evs, newTaskEventView)
}

// queryParam returns a query parameter as given (the application checks
// its value), refusing bytes that are not UTF-8: percent-decoding can make
// them, and they must not reach a log line or a database as-is.
func queryParam(c echo.Context, name string) (string, error) {
	if err := escapedQuery(c, name); err != nil {
		return "", err
	}
	v := c.QueryParam(name)
	if err := utf8Query(name, v); err != nil {
		return "", err
	}
	return v, nil
}

// queryValues returns every value of a repeated query parameter (nil when
// it is absent), refusing them as queryParam does.
func queryValues(c echo.Context, name string) ([]string, error) {
	if err := escapedQuery(c, name); err != nil {
		return nil, err
	}
	vs := c.QueryParams()[name]
	for _, v := range vs {
		if err := utf8Query(name, v); err != nil {
			return nil, err
		}
	}
	return vs, nil
}

// escapedQuery refuses the parameter name when the query's parser would
// drop it (httpedge.QueryPairError).
func escapedQuery(c echo.Context, name string) error {
	return httpedge.QueryPairError(c.Request().URL.RawQuery, name)
}

// utf8Query is the one refusal of a query value that is not UTF-8, for
// single and repeated parameters alike.
func utf8Query(name, v string) error {
	if !utf8.ValidString(v) {
		return &domain.ValidationError{Field: name, Reason: "must be valid UTF-8"}
	}
	return nil
}

// queryField is a query parameter and the string it is read into.
type queryField struct {
	name string
	dst  *string
}

// queryParams reads each field's parameter with queryParam, in order:
// the first that is not UTF-8 is the error.
func queryParams(c echo.Context, fields []queryField) error {
	for _, f := range fields {
		v, err := queryParam(c, f.name)
		if err != nil {
			return err
		}
		*f.dst = v
	}
	return nil
}

// ---- devices ----

// authDevice is the device the request authenticated as; deviceAuth has
// checked that it is the one in the path.
func authDevice(c echo.Context) ports.AuthenticatedDevice {
	d, _ := c.Get(ctxDevice).(ports.AuthenticatedDevice)
	return d
}

func (s *server) check(c echo.Context) error {
	var b checkBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	if err := required(has("model", b.Model), has("current_version", b.CurrentVersion)); err != nil {
		return err
	}
	res, err := s.devices.Check(c.Request().Context(), ports.CheckRequest{
		Device: authDevice(c), Model: *b.Model, CurrentVersion: *b.CurrentVersion, Attributes: b.Attributes,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newCheckView(res, s.taskForDevice))
}

func (s *server) getTask(c echo.Context) error {
	id := pathTaskID(c)
	if id.IsZero() {
		return domain.ErrNotFound // no body to judge first: answered here
	}
	v, err := s.devices.GetTask(c.Request().Context(), authDevice(c).ID(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.taskForDevice(v))
}

func (s *server) reportEvent(c echo.Context) error {
	var b eventBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	if err := required(has("event_id", b.EventID), has("status", b.Status)); err != nil {
		return err
	}
	v, err := s.devices.ReportEvent(c.Request().Context(), authDevice(c).ID(), pathTaskID(c), ports.EventRequest{
		EventID: *b.EventID, Status: *b.Status, Progress: b.Progress,
		ErrorCode: deref(b.ErrorCode), ErrorMessage: deref(b.ErrorMessage),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.taskForDevice(v))
}
