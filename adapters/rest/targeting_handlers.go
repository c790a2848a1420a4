package rest

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Hands-off rollouts' request bodies: what a rollout may add to its percentage, and
// the operators' tags.

// rolloutSelector is the document's RolloutSelector, one schema for the
// start request and every rollout answer, so one type.
type rolloutSelector struct {
	TagsAll    []string          `json:"tags_all"`
	TagsAny    []string          `json:"tags_any"`
	Attributes map[string]string `json:"attributes"`
	Versions   *string           `json:"versions"`
}

type stageBody struct {
	Percentage     *int   `json:"percentage"`
	MinFinished    *int   `json:"min_finished"`
	SuccessPercent *int   `json:"success_percent"`
	SoakSeconds    *int64 `json:"soak_seconds"`
}

type windowBody struct {
	Daily    *string `json:"daily"`
	TimeZone *string `json:"time_zone"`
}

type setTagsBody struct {
	Tags []string `json:"tags"`
}

type bulkTagsBody struct {
	DeviceIDs []string `json:"device_ids"`
	Tags      []string `json:"tags"`
	Add       []string `json:"add"`
	Remove    []string `json:"remove"`
}

// maxSeconds bounds second counts before they become durations, so that
// no value overflows (the domain then applies the real limits, negative
// ones included).
const maxSeconds = 100 * 365 * 24 * 3600

func seconds(field string, p *int64) (*time.Duration, error) {
	if p == nil {
		return nil, nil
	}
	if *p < -maxSeconds || *p > maxSeconds {
		return nil, &domain.ValidationError{Field: field, Reason: "is out of range"}
	}
	d := time.Duration(*p) * time.Second
	return &d, nil
}

// policySpec adds the hands-off fields of a start-rollout body to spec.
func (b startRolloutBody) policySpec(spec *domain.RolloutSpec) error {
	if b.Selector != nil {
		if v := b.Selector.Versions; v != nil && *v == "" {
			// Absent or null means no range; an empty string is not a
			// range the domain could tell from no range, so it is refused
			// here rather than read as "every version".
			return &domain.ValidationError{Field: "selector.versions",
				Reason: "is empty: give a range such as >=1.2.0, or leave it out to select every version"}
		}
		spec.Selector = domain.SelectorSpec{TagsAll: b.Selector.TagsAll, TagsAny: b.Selector.TagsAny,
			Attributes: b.Selector.Attributes, Versions: deref(b.Selector.Versions)}
	}
	for i, st := range b.Stages {
		soak, err := seconds(fmt.Sprintf("stages[%d].soak_seconds", i), st.SoakSeconds)
		if err != nil {
			return err
		}
		spec.Stages = append(spec.Stages, domain.StageRequest{Percentage: st.Percentage, MinFinished: st.MinFinished,
			SuccessPercent: st.SuccessPercent, Soak: deref(soak)})
	}
	if b.StartsAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *b.StartsAt)
		if err != nil {
			return &domain.ValidationError{Field: "starts_at", Reason: "must be an RFC 3339 time such as 2026-01-02T03:04:05Z"}
		}
		spec.StartsAt = &t
	}
	if b.Window != nil {
		spec.Window = &domain.WindowSpec{Daily: deref(b.Window.Daily), TimeZone: deref(b.Window.TimeZone)}
	}
	timeout, err := seconds("task_timeout_seconds", b.TaskTimeoutSeconds)
	if err != nil {
		return err
	}
	spec.TaskTimeout = timeout
	spec.AllowDowngrade = deref(b.AllowDowngrade)
	return nil
}

func (s *server) setDeviceTags(c echo.Context) error {
	var b setTagsBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	if b.Tags == nil {
		return &domain.ValidationError{Field: "tags", Reason: "is required"}
	}
	id, ok := pathDeviceID(c)
	if !ok {
		return domain.ErrNotFound
	}
	tags, err := s.admin.SetDeviceTags(c.Request().Context(), actorOf(c), id, b.Tags)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, deviceTagsView{DeviceID: id.String(), Tags: tags})
}

func (s *server) bulkTagDevices(c echo.Context) error {
	var b bulkTagsBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	out, err := s.admin.ChangeDeviceTags(c.Request().Context(), actorOf(c), ports.TagChange{DeviceIDs: b.DeviceIDs, Set: b.Tags, Add: b.Add, Remove: b.Remove})
	if err != nil {
		return err
	}
	view := bulkTagsView{Items: make([]deviceTagsView, 0, len(out))}
	seen := map[string]bool{}
	for _, id := range b.DeviceIDs {
		if !seen[id] {
			seen[id] = true
			view.Items = append(view.Items, deviceTagsView{DeviceID: id, Tags: out[id]})
		}
	}
	return c.JSON(http.StatusOK, view)
}

func (s *server) listDevices(c echo.Context) error {
	q := ports.DeviceQuery{}
	if err := queryParams(c, []queryField{
		{"model", &q.Model}, {"version", &q.Version}, {"seen_before", &q.SeenBefore}, {"limit", &q.Limit}, {"after", &q.After},
	}); err != nil {
		return err
	}
	var err error
	if q.Tags, err = queryValues(c, "tag"); err != nil {
		return err
	}
	if q.Attributes, err = queryValues(c, "attribute"); err != nil {
		return err
	}
	page, err := s.admin.ListDevices(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newPageView(page.Items, page.Next, newListedDeviceView))
}

// newListedDeviceView is a device of the listing, which carries no active
// task.
func newListedDeviceView(l ports.DeviceListing) deviceView {
	return newDeviceView(ports.DeviceView{Device: l.Device, Tags: l.Tags, Attributes: l.Attributes})
}

// deviceTagsView is a device's tags after a change.
type deviceTagsView struct {
	DeviceID string   `json:"device_id"`
	Tags     []string `json:"tags"`
}

type bulkTagsView struct {
	Items []deviceTagsView `json:"items"`
}

// Rollout policy views.

type stageView struct {
	Percentage     int   `json:"percentage"`
	MinFinished    int   `json:"min_finished"`
	SuccessPercent int   `json:"success_percent"`
	SoakSeconds    int64 `json:"soak_seconds"`
}

type stageEventView struct {
	Stage      int     `json:"stage"`
	Percentage int     `json:"percentage"`
	StartedAt  string  `json:"started_at"`
	EndedAt    *string `json:"ended_at"`
	Outcome    *string `json:"outcome"`
	Reason     *string `json:"reason"`
}

type windowView struct {
	Daily    string `json:"daily"`
	TimeZone string `json:"time_zone"`
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// addPolicy fills the hands-off fields of a rollout view.
func addPolicy(out *rolloutView, rec domain.RolloutRecord) {
	attrs := rec.Selector.Attributes
	if attrs == nil {
		attrs = map[string]string{}
	}
	out.Selector = rolloutSelector{TagsAll: nonNil(rec.Selector.TagsAll), TagsAny: nonNil(rec.Selector.TagsAny),
		Attributes: attrs, Versions: optString(rec.Selector.Versions)}
	out.Stages = []stageView{}
	for _, s := range rec.Stages {
		out.Stages = append(out.Stages, stageView{Percentage: s.Percentage, MinFinished: s.MinFinished,
			SuccessPercent: s.SuccessPercent, SoakSeconds: int64(s.Soak / time.Second)})
	}
	if len(rec.Stages) > 0 {
		st := rec.Stage
		out.Stage = &st
		out.GateMetAt = optTime(rec.GateMetAt)
	}
	out.StageHistory = []stageEventView{}
	for _, e := range rec.History {
		out.StageHistory = append(out.StageHistory, stageEventView{Stage: e.Stage, Percentage: e.Percentage,
			StartedAt: timestamp(e.StartedAt), EndedAt: optTime(e.EndedAt), Outcome: optString(e.Outcome.String()), Reason: optString(e.Reason)})
	}
	out.StartsAt = optTime(rec.StartsAt)
	if rec.Window != nil {
		out.Window = &windowView{Daily: rec.Window.Daily, TimeZone: rec.Window.TimeZone}
	}
	timeout := rec.TaskTimeout
	if timeout <= 0 {
		timeout = domain.DefaultTaskTimeout
	}
	out.TaskTimeoutSeconds = int64(timeout / time.Second)
	out.AllowDowngrade = rec.AllowDowngrade
}
