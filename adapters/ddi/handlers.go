package ddi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	ddiapp "github.com/ai-device/ota/application/ddi"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Response bodies, shaped as hawkBit's DDI documentation shows them.

type link struct {
	Href string `json:"href"`
}

type pollView struct {
	Config struct {
		Polling struct {
			Sleep string `json:"sleep"`
		} `json:"polling"`
	} `json:"config"`
	Links map[string]link `json:"_links"`
}

type hashesView struct {
	SHA1   string `json:"sha1"`
	MD5    string `json:"md5,omitempty"`
	SHA256 string `json:"sha256"`
}

type artifactView struct {
	Filename string          `json:"filename"`
	Hashes   hashesView      `json:"hashes"`
	Size     int64           `json:"size"`
	Links    map[string]link `json:"_links"`
}

type chunkView struct {
	Part      string         `json:"part"`
	Version   string         `json:"version"`
	Name      string         `json:"name"`
	Artifacts []artifactView `json:"artifacts"`
}

type deploymentView struct {
	ID         string `json:"id"`
	Deployment struct {
		Download          string      `json:"download"`
		Update            string      `json:"update"`
		MaintenanceWindow string      `json:"maintenanceWindow,omitempty"`
		Chunks            []chunkView `json:"chunks"`
	} `json:"deployment"`
}

type cancelView struct {
	ID           string `json:"id"`
	CancelAction struct {
		StopID string `json:"stopId"`
	} `json:"cancelAction"`
}

// Request bodies: only what is read; hawkBit agents send more ("id",
// "time", "timestamp"), which is ignored.

type feedbackBody struct {
	Status *struct {
		Execution *string `json:"execution"`
		Result    *struct {
			Finished *string `json:"finished"`
			Progress *struct {
				Cnt *int `json:"cnt"`
				Of  *int `json:"of"`
			} `json:"progress"`
		} `json:"result"`
		Details []string `json:"details"`
	} `json:"status"`
}

type configDataBody struct {
	Mode *string           `json:"mode"`
	Data map[string]string `json:"data"`
}

// maxBody bounds a request body, as the REST API does (64 KiB).
const maxBody = 64 << 10

// decode reads a JSON body: application/json (or no content type), at most
// maxBody bytes, one value. Errors map through the edge's error handler.
func decode(c echo.Context, v any) error {
	if ct := c.Request().Header.Get(echo.HeaderContentType); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != echo.MIMEApplicationJSON {
			return echo.ErrUnsupportedMediaType
		}
	}
	body := http.MaxBytesReader(c.Response(), c.Request().Body, maxBody)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return mbe
		}
		return &domain.ValidationError{Field: "body", Reason: "must be one JSON object as hawkBit's DDI API describes"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &domain.ValidationError{Field: "body", Reason: "must be one JSON object"}
	}
	return nil
}

func (a *Adapter) poll(c echo.Context) error {
	p, err := a.svc.Poll(c.Request().Context(), authenticated(c))
	if err != nil {
		return err
	}
	var v pollView
	v.Config.Polling.Sleep = sleep(p.PollAfter)
	v.Links = map[string]link{}
	root := a.base(c)
	// hawkBit answers a pending cancel instead of the deployment: the
	// agent must confirm it first (SWUpdate looks for cancelAction first).
	switch {
	case p.Cancel != nil:
		v.Links["cancelAction"] = link{root + "/cancelAction/" + strconv.FormatInt(p.Cancel.ActionID(), 10)}
	case p.Deployment != nil:
		v.Links["deploymentBase"] = link{root + "/deploymentBase/" + strconv.FormatInt(p.Deployment.Task.ActionID(), 10)}
	}
	if p.WantConfigData {
		v.Links["configData"] = link{root + "/configData"}
	}
	return c.JSON(http.StatusOK, v)
}

// newDeploymentView renders a task as hawkBit's deploymentBase: one chunk
// (part "os") with one artifact, the firmware image. Mandatory firmware is
// "forced", other firmware "attempt". When the task's rollout has a
// maintenance window, deployment.maintenanceWindow says whether it is open
// ("available") or not ("unavailable", and then "update": "skip": the
// agent may download but must not install), as hawkBit answers.
func newDeploymentView(v ports.TaskView, window ddiapp.Window) deploymentView {
	spec := v.Firmware.Spec()
	var d deploymentView
	d.ID = strconv.FormatInt(v.Task.ActionID(), 10)
	d.Deployment.Download, d.Deployment.Update = "attempt", "attempt"
	if spec.Mandatory {
		d.Deployment.Download, d.Deployment.Update = "forced", "forced"
	}
	switch window {
	case ddiapp.WindowAvailable:
		d.Deployment.MaintenanceWindow = "available"
	case ddiapp.WindowUnavailable:
		d.Deployment.MaintenanceWindow, d.Deployment.Update = "unavailable", "skip"
	}
	links := map[string]link{"download-http": {spec.URL}}
	if strings.HasPrefix(spec.URL, "https://") {
		links["download"] = link{spec.URL}
	}
	d.Deployment.Chunks = []chunkView{{
		Part: "os", Version: spec.Version, Name: spec.Model,
		Artifacts: []artifactView{{
			Filename: filename(spec),
			Hashes:   hashesView{SHA1: spec.SHA1, MD5: spec.MD5, SHA256: spec.SHA256},
			Size:     spec.SizeBytes,
			Links:    links,
		}},
	}}
	return d
}

// filename is the artifact's name: the URL's last segment when it is a
// .swu, else {model}-{version}.swu (SWUpdate skips artifacts whose name
// does not end in .swu).
func filename(spec domain.FirmwareSpec) string {
	u := spec.URL
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	if name := path.Base(u); strings.HasSuffix(name, ".swu") && len(name) > len(".swu") {
		return name
	}
	return spec.Model + "-" + spec.Version + ".swu"
}

func (a *Adapter) deploymentBase(c echo.Context) error {
	id, err := actionID(c)
	if err != nil {
		return err
	}
	d, err := a.svc.Deployment(c.Request().Context(), authenticated(c), id)
	if err != nil {
		return err
	}
	return a.answerDeployment(c, d.TaskView, d.Window)
}

func (a *Adapter) installedBase(c echo.Context) error {
	id, err := actionID(c)
	if err != nil {
		return err
	}
	v, err := a.svc.InstalledBase(c.Request().Context(), authenticated(c).ID(), id)
	if err != nil {
		return err
	}
	return a.answerDeployment(c, v, ddiapp.NoWindow)
}

// answerDeployment answers a task as a deployment: the deployment base and
// the installed base read alike, the hosted artifact's links included.
func (a *Adapter) answerDeployment(c echo.Context, v ports.TaskView, w ddiapp.Window) error {
	d := newDeploymentView(v, w)
	if err := a.withHosted(c, &d, v); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// feedback reads a feedback body; status.execution is required.
func feedback(c echo.Context) (ddiapp.Feedback, error) {
	var b feedbackBody
	if err := decode(c, &b); err != nil {
		return ddiapp.Feedback{}, err
	}
	if b.Status == nil || b.Status.Execution == nil {
		return ddiapp.Feedback{}, &domain.ValidationError{Field: "status.execution", Reason: "is required"}
	}
	fb := ddiapp.Feedback{Execution: *b.Status.Execution, Finished: "none", Details: b.Status.Details}
	if r := b.Status.Result; r != nil {
		if r.Finished != nil {
			fb.Finished = *r.Finished
		}
		if p := r.Progress; p != nil && p.Cnt != nil && p.Of != nil {
			fb.Progress = &ddiapp.Progress{Cnt: *p.Cnt, Of: *p.Of}
		}
	}
	return fb, nil
}

// deploymentFeedback applies a device's feedback on an action.
func (a *Adapter) deploymentFeedback(c echo.Context) error {
	return answerFeedback(c, func(ctx context.Context, deviceID domain.DeviceID, actionID int64, fb ddiapp.Feedback) error {
		_, err := a.svc.DeploymentFeedback(ctx, deviceID, actionID, fb)
		return err
	})
}

// answerFeedback reads an action's id and feedback, hands them to apply,
// and answers exactly 200 with no body on success: SWUpdate treats any
// other 2xx as a failure and resends forever.
func answerFeedback(c echo.Context, apply func(ctx context.Context, deviceID domain.DeviceID, actionID int64, fb ddiapp.Feedback) error) error {
	id, err := actionID(c)
	if err != nil {
		return err
	}
	fb, err := feedback(c)
	if err != nil {
		return err
	}
	if err := apply(c.Request().Context(), authenticated(c).ID(), id, fb); err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

func (a *Adapter) cancelAction(c echo.Context) error {
	id, err := actionID(c)
	if err != nil {
		return err
	}
	n, err := a.svc.CancelAction(c.Request().Context(), authenticated(c).ID(), id)
	if err != nil {
		return err
	}
	var v cancelView
	v.ID = strconv.FormatInt(n.Task().ActionID(), 10)
	v.CancelAction.StopID = v.ID
	return c.JSON(http.StatusOK, v)
}

// cancelFeedback records the device's answer to a cancel.
func (a *Adapter) cancelFeedback(c echo.Context) error {
	return answerFeedback(c, func(ctx context.Context, deviceID domain.DeviceID, actionID int64, fb ddiapp.Feedback) error {
		_, err := a.svc.CancelFeedback(ctx, deviceID, actionID, fb)
		return err
	})
}

func (a *Adapter) configData(c echo.Context) error {
	var b configDataBody
	if err := decode(c, &b); err != nil {
		return err
	}
	if b.Data == nil {
		return &domain.ValidationError{Field: "data", Reason: "is required: an object of string attributes"}
	}
	mode := ""
	if b.Mode != nil {
		mode = *b.Mode
	}
	if _, err := a.svc.ConfigData(c.Request().Context(), authenticated(c).ID(), mode, b.Data); err != nil {
		return fmt.Errorf("configData: %w", err)
	}
	return c.NoContent(http.StatusOK)
}
