package rest

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// WithArtifacts serves hosted artifacts under /api/v1/admin/artifacts:
// upload (raw or multipart, streamed), list, get, delete.
func WithArtifacts(a ports.ArtifactService) Option {
	return func(x *extensions) { x.artifacts = a }
}

func (s *server) addArtifactRoutes(admin httpedge.AddRoute) {
	if s.ext.artifacts == nil {
		return
	}
	a := "/artifacts"
	admin(http.MethodPost, a, s.uploadArtifact)
	admin(http.MethodGet, a, s.listArtifacts)
	admin(http.MethodGet, a+"/:id", s.getArtifact)
	admin(http.MethodDelete, a+"/:id", s.deleteArtifact)
}

// uploadArtifact streams the body to the artifact service. It does not go
// through readBody's 64 KiB limit: OTA_ARTIFACT_MAX_BYTES bounds it, in
// the use case, while the bytes stream. A raw body is named by
// ?filename= or Content-Disposition and may declare its sha256 in
// X-Checksum-Sha256 or ?sha256=; a multipart/form-data body carries a
// "file" part (named by its filename) and optionally a "sha256" field
// before it. The multipart body is read part by part as it arrives
// (mime/multipart over the request body), never parsed into memory or
// temporary files as ParseMultipartForm would.
func (s *server) uploadArtifact(c echo.Context) error {
	req := c.Request()
	upload := httpedge.NewUpload(c.Response(), req)
	raw := upload.Body()
	var (
		up  ports.ArtifactUpload
		err error
	)
	ct, params, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if ct == "multipart/form-data" {
		up, err = multipartUpload(multipart.NewReader(raw, params["boundary"]))
	} else {
		up, err = rawUpload(c, raw)
	}
	if err != nil {
		return err
	}
	body := upload.Track(up.Body)
	up.Body = body
	a, created, err := s.ext.artifacts.Upload(req.Context(), actorOf(c), up)
	if err := upload.Done(err, body); err != nil {
		return err
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK // the same content was uploaded before
	}
	return c.JSON(status, newArtifactView(a))
}

func rawUpload(c echo.Context, body io.Reader) (ports.ArtifactUpload, error) {
	name, err := queryParam(c, "filename")
	if err != nil {
		return ports.ArtifactUpload{}, err
	}
	if name == "" {
		name = dispositionFileName(c.Request().Header.Get("Content-Disposition"))
	}
	sum := c.Request().Header.Get("X-Checksum-Sha256")
	if sum == "" {
		if sum, err = queryParam(c, "sha256"); err != nil {
			return ports.ArtifactUpload{}, err
		}
	}
	return ports.ArtifactUpload{FileName: name, Body: body, SHA256: sum, Announced: max(c.Request().ContentLength, 0)}, nil
}

// multipartUpload reads the fields before the "file" part and returns the
// upload reading that part. Any other field is refused, as on every admin
// route: a misspelt "sha256" silently dropped would skip the check. The
// file is the last part: its body ends only where the multipart body
// does (lastPart), so a field sent after it — a sha256 the stream has
// passed — is refused too, not dropped.
func multipartUpload(mr *multipart.Reader) (ports.ArtifactUpload, error) {
	var up ports.ArtifactUpload
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return up, &domain.ValidationError{Field: "file", Reason: "is required (a multipart part named file)"}
		}
		if err != nil {
			return up, httpedge.NewError(http.StatusBadRequest, httpedge.CodeValidationFailed, "the multipart body cannot be read")
		}
		switch part.FormName() {
		case "sha256":
			b, err := io.ReadAll(io.LimitReader(part, 129))
			if err != nil || len(b) > 128 {
				return up, &domain.ValidationError{Field: "sha256", Reason: "must be 64 hex characters"}
			}
			up.SHA256 = strings.TrimSpace(string(b))
		case "file":
			// The name as sent: Part.FileName would cut a path down to
			// its last element, turning "../x" into "x" unseen.
			up.FileName = dispositionFileName(part.Header.Get("Content-Disposition"))
			up.Body = &lastPart{part: part, mr: mr}
			return up, nil
		default:
			return up, &domain.ValidationError{Field: part.FormName(), Reason: "is not a field of an upload (file, sha256)"}
		}
	}
}

// lastPart reads the file part and, at its end, makes sure the multipart
// body ends there: a part after it fails the read with a validation
// error, so the use case stores nothing and the edge answers it
// (httpedge.Upload.Done) rather than UPLOAD_INCOMPLETE.
type lastPart struct {
	part io.Reader
	mr   *multipart.Reader
}

func (l *lastPart) Read(p []byte) (int, error) {
	n, err := l.part.Read(p)
	if !errors.Is(err, io.EOF) {
		return n, err
	}
	next, err := l.mr.NextPart()
	switch {
	case errors.Is(err, io.EOF):
		return n, io.EOF
	case err != nil:
		return n, err
	}
	return n, &domain.ValidationError{Field: next.FormName(), Reason: "must come before the file part: the file is the last part of an upload"}
}

// dispositionFileName is the filename parameter of a Content-Disposition
// header, as sent (RFC 2231 encoding decoded), or "".
func dispositionFileName(h string) string {
	if h == "" {
		return ""
	}
	_, params, err := mime.ParseMediaType(h)
	if err != nil {
		return ""
	}
	return params["filename"]
}

func (s *server) listArtifacts(c echo.Context) error {
	list, err := s.ext.artifacts.ListArtifacts(c.Request().Context())
	if err != nil {
		return err
	}
	return itemsOf(c, list, newArtifactView)
}

func (s *server) getArtifact(c echo.Context) error {
	a, err := s.ext.artifacts.GetArtifact(c.Request().Context(), pathUUID(c, "id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newArtifactView(a))
}

func (s *server) deleteArtifact(c echo.Context) error {
	if err := s.ext.artifacts.DeleteArtifact(c.Request().Context(), actorOf(c), pathUUID(c, "id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// artifactView is an artifact: what the service computed of its bytes,
// and what the file says about itself (meta), to pre-fill a firmware.
type artifactView struct {
	ID        string           `json:"id"`
	FileName  string           `json:"file_name"`
	SizeBytes int64            `json:"size_bytes"`
	SHA256    string           `json:"sha256"`
	SHA1      string           `json:"sha1"`
	MD5       string           `json:"md5"`
	Format    string           `json:"format"`
	Meta      artifactMetaView `json:"meta"`
	CreatedAt string           `json:"created_at"`
}

type artifactMetaView struct {
	ArtifactName string            `json:"artifact_name,omitempty"`
	DeviceTypes  []string          `json:"device_types,omitempty"`
	PayloadType  string            `json:"payload_type,omitempty"`
	Provides     map[string]string `json:"provides,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
}

func newArtifactView(a domain.Artifact) artifactView {
	d, m := a.Digest(), a.Meta()
	return artifactView{
		ID: a.ID().String(), FileName: a.FileName(), SizeBytes: d.Size, SHA256: d.SHA256, SHA1: d.SHA1, MD5: d.MD5,
		Format: m.Format.String(), CreatedAt: timestamp(a.CreatedAt()),
		Meta: artifactMetaView{ArtifactName: m.ArtifactName, DeviceTypes: m.DeviceTypes, PayloadType: m.PayloadType,
			Provides: m.Provides, Version: m.Version, Description: m.Description},
	}
}
