package rest

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// The JSON views of adapters/rest/openapi.yaml. They are declared field by field, in the
// contract's order, rather than derived from domain types: the wire format
// is an API that must not move when the domain does. Optional strings that
// are empty render as null; times are RFC 3339 in UTC.

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := timestamp(t)
	return &s
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// taskFirmwareView is the firmware inside a task: what a device needs to
// download and verify the image.
type taskFirmwareView struct {
	ID           string  `json:"id"`
	Version      string  `json:"version"`
	URL          string  `json:"url"`
	SizeBytes    int64   `json:"size_bytes"`
	SHA256       string  `json:"sha256"`
	Signature    *string `json:"signature"`
	Mandatory    bool    `json:"mandatory"`
	ReleaseNotes *string `json:"release_notes"`
}

func newTaskFirmwareView(f domain.Firmware) taskFirmwareView {
	spec := f.Spec()
	return taskFirmwareView{
		ID: f.ID().String(), Version: spec.Version, URL: spec.URL, SizeBytes: spec.SizeBytes, SHA256: spec.SHA256,
		Signature: optString(spec.Signature), Mandatory: spec.Mandatory, ReleaseNotes: optString(spec.ReleaseNotes),
	}
}

// deviceTaskView is a task as its device sees it.
type deviceTaskView struct {
	ID        string           `json:"id"`
	Status    string           `json:"status"`
	Progress  int              `json:"progress"`
	Attempt   int              `json:"attempt"`
	CreatedAt string           `json:"created_at"`
	UpdatedAt string           `json:"updated_at"`
	Firmware  taskFirmwareView `json:"firmware"`
}

func newDeviceTaskView(v ports.TaskView) deviceTaskView {
	t := v.Task.Record()
	return deviceTaskView{
		ID: t.ID, Status: t.Status.String(), Progress: t.Progress, Attempt: t.Attempt,
		CreatedAt: timestamp(t.CreatedAt), UpdatedAt: timestamp(t.UpdatedAt),
		Firmware: newTaskFirmwareView(v.Firmware),
	}
}

// adminTaskView is a task as operators see it: the device view plus the
// ids that tie it to device, firmware and rollout, and why it ended.
type adminTaskView struct {
	ID           string           `json:"id"`
	ActionID     int64            `json:"action_id"`
	DeviceID     string           `json:"device_id"`
	FirmwareID   string           `json:"firmware_id"`
	RolloutID    string           `json:"rollout_id"`
	Status       string           `json:"status"`
	Progress     int              `json:"progress"`
	Attempt      int              `json:"attempt"`
	ErrorCode    *string          `json:"error_code"`
	ErrorMessage *string          `json:"error_message"`
	CreatedAt    string           `json:"created_at"`
	UpdatedAt    string           `json:"updated_at"`
	Firmware     taskFirmwareView `json:"firmware"`
}

func newAdminTaskView(v ports.TaskView) adminTaskView {
	t := v.Task.Record()
	return adminTaskView{
		ID: t.ID, ActionID: t.ActionID, DeviceID: t.DeviceID, FirmwareID: t.FirmwareID, RolloutID: t.RolloutID,
		Status: t.Status.String(), Progress: t.Progress, Attempt: t.Attempt,
		ErrorCode: optString(t.ErrorCode), ErrorMessage: optString(t.ErrorMessage),
		CreatedAt: timestamp(t.CreatedAt), UpdatedAt: timestamp(t.UpdatedAt),
		Firmware: newTaskFirmwareView(v.Firmware),
	}
}

// firmwareView is a published firmware.
type firmwareView struct {
	ID               string  `json:"id"`
	Model            string  `json:"model"`
	Version          string  `json:"version"`
	URL              string  `json:"url"`
	SizeBytes        int64   `json:"size_bytes"`
	SHA256           string  `json:"sha256"`
	SHA1             *string `json:"sha1"`
	MD5              *string `json:"md5"`
	Signature        *string `json:"signature"`
	ReleaseNotes     *string `json:"release_notes"`
	Mandatory        bool    `json:"mandatory"`
	MinSourceVersion *string `json:"min_source_version"`
	ArtifactName     *string `json:"artifact_name,omitempty"`
	ArtifactID       *string `json:"artifact_id,omitempty"`
	Status           string  `json:"status"`
	CreatedAt        string  `json:"created_at"`
	UpdatedAt        string  `json:"updated_at"`
}

func newFirmwareView(f domain.Firmware) firmwareView {
	spec := f.Spec()
	return firmwareView{
		ID: f.ID().String(), Model: spec.Model, Version: spec.Version, URL: spec.URL, SizeBytes: spec.SizeBytes,
		SHA256: spec.SHA256, SHA1: optString(spec.SHA1), MD5: optString(spec.MD5),
		Signature: optString(spec.Signature), ReleaseNotes: optString(spec.ReleaseNotes),
		Mandatory: spec.Mandatory, MinSourceVersion: optString(spec.MinSourceVersion),
		ArtifactName: optString(spec.ArtifactName), ArtifactID: optString(spec.ArtifactID.String()),
		Status: f.Status().String(), CreatedAt: timestamp(f.CreatedAt()), UpdatedAt: timestamp(f.UpdatedAt()),
	}
}

// rolloutView is a rollout; Stats is set only on GET.
type rolloutView struct {
	ID                      string         `json:"id"`
	FirmwareID              string         `json:"firmware_id"`
	Percentage              int            `json:"percentage"`
	MaxAttempts             int            `json:"max_attempts"`
	FailureThresholdPercent *int           `json:"failure_threshold_percent"`
	MinSample               int            `json:"min_sample"`
	Status                  string         `json:"status"`
	PausedReason            *string        `json:"paused_reason"`
	CreatedAt               string         `json:"created_at"`
	UpdatedAt               string         `json:"updated_at"`
	Stats                   *taskStatsView `json:"stats,omitempty"`
	// Hands-off rollouts (targeting_handlers.go).
	Selector           rolloutSelector  `json:"selector"`
	Stages             []stageView      `json:"stages"`
	Stage              *int             `json:"stage"`
	GateMetAt          *string          `json:"gate_met_at"`
	StageHistory       []stageEventView `json:"stage_history"`
	StageStats         *taskStatsView   `json:"stage_stats,omitempty"`
	StartsAt           *string          `json:"starts_at"`
	Window             *windowView      `json:"window"`
	TaskTimeoutSeconds int64            `json:"task_timeout_seconds"`
	AllowDowngrade     bool             `json:"allow_downgrade"`
}

type taskStatsView struct {
	Pending     int `json:"pending"`
	Downloading int `json:"downloading"`
	Downloaded  int `json:"downloaded"`
	Installing  int `json:"installing"`
	Succeeded   int `json:"succeeded"`
	Failed      int `json:"failed"`
	Cancelled   int `json:"cancelled"`
}

func newRolloutView(r domain.Rollout) rolloutView {
	rec := r.Record()
	var threshold *int
	if rec.FailureThresholdPercent != nil {
		t := *rec.FailureThresholdPercent
		threshold = &t
	}
	out := rolloutView{
		ID: rec.ID, FirmwareID: rec.FirmwareID, Percentage: rec.Percentage, MaxAttempts: rec.MaxAttempts,
		FailureThresholdPercent: threshold, MinSample: rec.MinSample, Status: rec.Status.String(),
		PausedReason: optString(rec.PausedReason.String()),
		CreatedAt:    timestamp(rec.CreatedAt), UpdatedAt: timestamp(rec.UpdatedAt),
	}
	addPolicy(&out, rec)
	return out
}

func newTaskStatsView(s domain.TaskStats) *taskStatsView {
	return &taskStatsView{
		Pending: s.Pending, Downloading: s.Downloading, Downloaded: s.Downloaded, Installing: s.Installing,
		Succeeded: s.Succeeded, Failed: s.Failed, Cancelled: s.Cancelled,
	}
}

func newRolloutStatsView(v ports.RolloutView) rolloutView {
	out := newRolloutView(v.Rollout)
	out.Stats = newTaskStatsView(v.Stats)
	if v.StageStats != nil {
		out.StageStats = newTaskStatsView(*v.StageStats)
	}
	return out
}

// registrationView answers a device registration; the token is shown once.
type registrationView struct {
	DeviceID  string `json:"device_id"`
	Model     string `json:"model"`
	Token     string `json:"token"`
	CreatedAt string `json:"created_at"`
}

// tokenView answers a token rotation.
type tokenView struct {
	DeviceID string `json:"device_id"`
	Model    string `json:"model"`
	Token    string `json:"token"`
}

// deviceView is a device with its active task (an admin task, or null).
type deviceView struct {
	DeviceID       string         `json:"device_id"`
	Model          string         `json:"model"`
	CurrentVersion *string        `json:"current_version"`
	LastSeenAt     *string        `json:"last_seen_at"`
	ActiveTask     *adminTaskView `json:"active_task"`
	// Tags are the operators' labels; Attributes what the device reported.
	Tags       []string          `json:"tags"`
	Attributes map[string]string `json:"attributes"`
}

func newDeviceView(v ports.DeviceView) deviceView {
	d := v.Device
	out := deviceView{
		DeviceID: d.ID().String(), Model: d.Model(), CurrentVersion: optString(d.CurrentVersion().String()),
		LastSeenAt: optTime(d.LastSeenAt()), Tags: nonNil(v.Tags), Attributes: v.Attributes.Values(),
	}
	if v.ActiveTask != nil {
		t := newAdminTaskView(*v.ActiveTask)
		out.ActiveTask = &t
	}
	return out
}

// checkView answers a device's poll.
type checkView struct {
	UpdateAvailable  bool            `json:"update_available"`
	Task             *deviceTaskView `json:"task"`
	PollAfterSeconds int64           `json:"poll_after_seconds"`
}

// newCheckView renders the task, if any, with taskView (the server's
// taskForDevice, which knows where hosted images are served).
func newCheckView(r ports.CheckResult, taskView func(ports.TaskView) deviceTaskView) checkView {
	out := checkView{PollAfterSeconds: wholeSeconds(r.PollAfter)}
	if r.Task != nil {
		t := taskView(*r.Task)
		out.Task = &t
		out.UpdateAvailable = true
	}
	return out
}

// wholeSeconds rounds a poll hint up: a device told 0 for a sub-second hint
// would poll in a tight loop.
func wholeSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// pageView is one page of a listing with a cursor; Next is null on the
// last page.
type pageView[V any] struct {
	Items []V     `json:"items"`
	Next  *string `json:"next"`
}

// newPageView renders one page: every paged listing of the contract (tasks,
// devices, deliveries, audit records) is this one shape, so the rule that
// the last page's cursor is null, not "", is kept here once.
func newPageView[T, V any](items []T, next string, view func(T) V) pageView[V] {
	return pageView[V]{Items: viewsOf(items, view), Next: optString(next)}
}

// newTaskPageView is one page of the admin task listing.
func newTaskPageView(p ports.TaskPage) pageView[adminTaskView] {
	return newPageView(p.Items, p.Next, newAdminTaskView)
}

// taskEventView is one stored event of a task's history.
type taskEventView struct {
	EventID      string  `json:"event_id"`
	Status       string  `json:"status"`
	Progress     *int    `json:"progress"`
	ErrorCode    *string `json:"error_code"`
	ErrorMessage *string `json:"error_message"`
	At           string  `json:"at"`
}

func newTaskEventView(e ports.TaskEvent) taskEventView {
	v := taskEventView{EventID: e.Event.ID(), Status: e.Event.Status().String(), At: timestamp(e.At),
		ErrorCode: optString(e.Event.ErrorCode()), ErrorMessage: optString(e.Event.ErrorMessage())}
	if p, ok := e.Event.Progress(); ok {
		v.Progress = &p
	}
	return v
}

// viewsOf renders each item with view: a listing's items, never nil (an
// empty listing is [] in JSON, not null).
func viewsOf[T, V any](items []T, view func(T) V) []V {
	out := make([]V, 0, len(items))
	for _, it := range items {
		out = append(out, view(it))
	}
	return out
}

// itemsOf answers a listing that has no cursor: every item through view,
// under "items" (never null). Every such listing of the contract is this
// one shape, so it is answered here rather than by a type per listing.
func itemsOf[T, V any](c echo.Context, items []T, view func(T) V) error {
	return c.JSON(http.StatusOK, map[string]any{"items": viewsOf(items, view)})
}
