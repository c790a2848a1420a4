package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Option adds an optional part to the console.
type Option func(*Console)

// WithArtifacts lets operators upload images through the console: the
// firmware page gets an upload form, each upload a page showing what the
// file says about itself, and a firmware is published from it. Without
// it the console publishes firmware by URL only.
func WithArtifacts(svc ports.ArtifactService) Option {
	return func(c *Console) { c.artifacts = svc }
}

// uploadAnswer is the upload endpoint's JSON answer to the page's script:
// where to go next, or why not.
type uploadAnswer struct {
	ID       string `json:"id,omitempty"`
	Location string `json:"location,omitempty"`
	Error    string `json:"error,omitempty"`
}

// uploadArtifact receives the upload form's file from the page's script
// (XMLHttpRequest, so the page can show progress): the raw bytes as the
// body, the file name in ?filename=, the session's CSRF token in the
// X-CSRF-Token header. The body is handed to the upload use case as it
// arrives, unbounded here: the use case applies OTA_ARTIFACT_MAX_BYTES,
// hashes, inspects and stores, exactly as for the API, and the upload
// lasts as long as bytes keep arriving (httpedge.Upload, as the API's).
func (c *Console) uploadArtifact(w http.ResponseWriter, r *http.Request) {
	s, err := c.readSession(r)
	if errors.Is(err, errNoSession) {
		writeUploadAnswer(w, http.StatusUnauthorized, uploadAnswer{Error: "Your session has ended: sign in again, then upload."})
		return
	}
	if err != nil {
		d := httpedge.DescribeError(err)
		if d.RetryAfter > 0 {
			w.Header().Set("Retry-After", httpedge.RetryAfterSeconds(d.RetryAfter))
		}
		writeUploadAnswer(w, d.Status, uploadAnswer{Error: sentence(d.Message)})
		return
	}
	if !c.sessions.validCSRF(s, r.Header.Get("X-CSRF-Token")) {
		writeUploadAnswer(w, http.StatusForbidden, uploadAnswer{Error: "This form is out of date or did not come from this console. Reload the page and try again."})
		return
	}
	if !s.who.Can(domain.PermArtifactsWrite) {
		writeUploadAnswer(w, http.StatusForbidden, uploadAnswer{Error: "Your role may not upload images (it needs artifacts:write)."})
		return
	}
	upload := httpedge.NewUpload(w, r)
	body := upload.Track(upload.Body())
	a, _, err := c.artifacts.Upload(r.Context(), s.actor, ports.ArtifactUpload{
		FileName: r.URL.Query().Get("filename"), Body: body, SHA256: r.Header.Get("X-Checksum-Sha256"),
		Announced: max(r.ContentLength, 0),
	})
	if err = upload.Done(err, body); err != nil {
		if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
			return // the operator closed the page: nobody reads an answer
		}
		d := httpedge.DescribeError(err)
		if d.Internal {
			c.logger.ErrorContext(r.Context(), "console upload failed", "request_id", httpedge.RequestIDFrom(r.Context()),
				"error", err.Error())
		}
		writeUploadAnswer(w, d.Status, uploadAnswer{Error: sentence(d.Message)})
		return
	}
	id := a.ID().String()
	writeUploadAnswer(w, http.StatusOK, uploadAnswer{ID: id, Location: Prefix + "/artifacts/" + url.PathEscape(id)})
}

func writeUploadAnswer(w http.ResponseWriter, status int, a uploadAnswer) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}

// artifactData is what the artifact page shows: the stored file, what it
// says about itself, and the publish form pre-filled from that.
type artifactData struct {
	Artifact domain.Artifact
	Meta     domain.ArtifactMeta
	Digest   domain.ArtifactDigest
	Provides []provide
	Form     startForm
}

type provide struct{ Key, Value string }

// artifactPublishFields are the publish form's fields on the artifact
// page: size, checksums and artifact name come from the artifact.
var artifactPublishFields = []string{"model", "version", "signature", "release_notes", "mandatory", "min_source_version"}

func (c *Console) artifactPage(w http.ResponseWriter, r *http.Request, s session) {
	a, err := c.artifacts.GetArtifact(r.Context(), pathUUID(r, "id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.showArtifact(w, r, s, http.StatusOK, a, prefill(a.Meta()))
}

// prefill is the publish form as the file suggests it, for the operator
// to check and change: a Mender artifact's first device type is the model
// its devices report; the version is the file's own (sw-description's, or
// the Mender artifact's software version), else the artifact name. The
// service judges what is submitted, as for any publish.
func prefill(m domain.ArtifactMeta) startForm {
	f := startForm{Values: map[string]string{}, Errors: map[string]string{}}
	if m.Format == domain.ArtifactMender && len(m.DeviceTypes) > 0 {
		f.Values["model"] = m.DeviceTypes[0]
	}
	f.Values["version"] = m.Version
	if f.Values["version"] == "" {
		f.Values["version"] = m.ArtifactName
	}
	f.Values["release_notes"] = m.Description
	return f
}

func (c *Console) showArtifact(w http.ResponseWriter, r *http.Request, s session, status int, a domain.Artifact, form startForm) {
	d := artifactData{Artifact: a, Meta: a.Meta(), Digest: a.Digest(), Form: form}
	for k, v := range d.Meta.Provides {
		d.Provides = append(d.Provides, provide{k, v})
	}
	slices.SortFunc(d.Provides, func(a, b provide) int { return strings.Compare(a.Key, b.Key) })
	p := c.base(s, "Uploaded file", "firmwares")
	p.Data = d
	c.render(w, r, status, "artifact", p)
}

// publishArtifact publishes a firmware whose image is the artifact: the
// same PublishFirmware as the API's, with artifact_id instead of a URL.
func (c *Console) publishArtifact(w http.ResponseWriter, r *http.Request, s session) {
	id := pathUUID(r, "id")
	a, err := c.artifacts.GetArtifact(r.Context(), id)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	form := postedForm(r, artifactPublishFields)
	v := func(name string) string { return strings.TrimSpace(r.PostFormValue(name)) }
	fw, err := c.admin.PublishFirmware(r.Context(), s.actor, domain.FirmwareSpec{
		Model: v("model"), Version: v("version"), ArtifactID: a.ID(), Signature: v("signature"),
		ReleaseNotes: r.PostFormValue("release_notes"), Mandatory: r.PostFormValue("mandatory") != "",
		MinSourceVersion: v("min_source_version"),
	})
	if err != nil {
		status := c.fieldError(r, err, form.Errors, &form.Error, artifactPublishFields...)
		c.showArtifact(w, r, s, status, a, form)
		return
	}
	http.Redirect(w, r, Prefix+"/firmwares?model="+url.QueryEscape(fw.Model())+"&done=published", http.StatusSeeOther)
}
