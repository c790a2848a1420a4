package ddi

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/adapters/httpedge"
)

// artifactPath is hawkBit's artifact download route: the software module
// is the firmware (its id), the file the artifact's file name. The same
// route with ".MD5SUM" appended answers hawkBit's md5sum file.
const artifactPath = Prefix + "/softwaremodules/:module/artifacts/:file"

// md5sumSuffix names hawkBit's md5sum variant of an artifact route.
const md5sumSuffix = ".MD5SUM"

func (a *Adapter) mountArtifacts(add func(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc), mw ...echo.MiddlewareFunc) {
	if a.dl == nil {
		return
	}
	add(http.MethodGet, artifactPath, a.artifact, mw...)
	add(http.MethodHead, artifactPath, a.artifact, mw...)
}

// artifact serves a hosted firmware's file, or its md5sum file, to the
// authenticated device. The file name in the path must be the artifact's
// own: anything else (a path, "..", another name) names nothing, and no
// file is ever looked up by a name the caller sent.
func (a *Adapter) artifact(c echo.Context) error {
	ctx := c.Request().Context()
	fw, _ := domain.ParseUUID("module", httpedge.PathParam(c, "module"))
	file := httpedge.PathParam(c, "file")
	dev := authenticated(c).Device
	art, err := a.dl.Describe(ctx, dev, fw)
	if err != nil {
		return err
	}
	switch file {
	case art.FileName():
		dl, err := a.dl.Open(ctx, dev, fw)
		if err != nil {
			return err
		}
		return httpedge.ServeDownload(c, dl)
	case art.FileName() + md5sumSuffix:
		// hawkBit's md5sum file: "<md5>  <file name>\n", as md5sum(1) writes.
		c.Response().Header().Set("Content-Disposition", "attachment")
		return c.Blob(http.StatusOK, "text/plain; charset=utf-8", []byte(art.Digest().MD5+"  "+art.FileName()+"\n"))
	}
	return domain.ErrNotFound
}

// hostedArtifact describes a hosted firmware's artifact in a deployment:
// its name, digests and size from the artifact, and links to this
// adapter's artifact route under the public URL. ok is false for a
// firmware hosted elsewhere.
func (a *Adapter) hostedArtifact(c echo.Context, fw domain.Firmware) (artifactView, bool, error) {
	if fw.Spec().ArtifactID.IsZero() || a.dl == nil {
		return artifactView{}, false, nil
	}
	art, err := a.dl.Artifact(c.Request().Context(), fw)
	if errors.Is(err, domain.ErrNotFound) {
		return artifactView{}, false, nil
	}
	if err != nil {
		return artifactView{}, false, err
	}
	d := art.Digest()
	href := a.base(c) + "/softwaremodules/" + url.PathEscape(fw.ID().String()) + "/artifacts/" + url.PathEscape(art.FileName())
	links := map[string]link{"download-http": {href}, "md5sum-http": {href + md5sumSuffix}}
	if strings.HasPrefix(href, "https://") {
		links["download"], links["md5sum"] = link{href}, link{href + md5sumSuffix}
	}
	return artifactView{
		Filename: art.FileName(),
		Hashes:   hashesView{SHA1: d.SHA1, MD5: d.MD5, SHA256: d.SHA256},
		Size:     d.Size,
		Links:    links,
	}, true, nil
}

// withHosted replaces the chunk's artifact by the hosted one, when the
// task's firmware is hosted here.
func (a *Adapter) withHosted(c echo.Context, d *deploymentView, v ports.TaskView) error {
	art, ok, err := a.hostedArtifact(c, v.Firmware)
	if err != nil || !ok {
		return err
	}
	d.Deployment.Chunks[0].Artifacts = []artifactView{art}
	return nil
}
