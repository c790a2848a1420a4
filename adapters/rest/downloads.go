package rest

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/adapters/httpedge"
)

// WithDownloads serves hosted artifacts to devices: a firmware's image to
// its device with the device's token, and signed links (for agents that
// send no credentials) to anyone holding one. publicURL (OTA_PUBLIC_URL)
// starts the url a check answers for a hosted firmware.
func WithDownloads(dl ports.DownloadService, publicURL string) Option {
	return func(x *extensions) {
		x.downloads = dl
		x.publicURL = strings.TrimRight(publicURL, "/")
	}
}

// artifactPath is the device route of a firmware's hosted image, below
// the device routes (so deviceAuth admits only the device in the path).
const artifactPath = "/firmwares/:firmware_id/artifact"

// addDownloadRoutes serves a device its image among the device routes,
// and a signed link (no credentials) at the root.
func (s *server) addDownloadRoutes(device, root httpedge.AddRoute) {
	if s.ext.downloads == nil {
		return
	}
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		device(m, artifactPath, s.downloadArtifact)
		root(m, httpedge.SignedLinkPath, s.downloadByLink)
	}
}

func (s *server) downloadArtifact(c echo.Context) error {
	dl, err := s.ext.downloads.Open(c.Request().Context(), authDevice(c).Device, pathUUID(c, "firmware_id"))
	if err != nil {
		return err
	}
	return httpedge.ServeDownload(c, dl)
}

func (s *server) downloadByLink(c echo.Context) error {
	l, err := httpedge.ParseSignedLink(c)
	if err != nil {
		return err
	}
	dl, err := s.ext.downloads.OpenLink(c.Request().Context(), l)
	if err != nil {
		return err
	}
	return httpedge.ServeDownload(c, dl)
}

// taskForDevice is a task as its device sees it, in every answer that
// hands a device its task (the check, the task, an event's answer): the
// firmware's url points at the device route of its hosted image when the
// firmware is hosted here (its row has no url).
func (s *server) taskForDevice(t ports.TaskView) deviceTaskView {
	v := newDeviceTaskView(t)
	if t.Firmware.Spec().ArtifactID.IsZero() || s.ext.downloads == nil {
		return v
	}
	v.Firmware.URL = s.ext.publicURL + APIPrefix + "/devices/" + url.PathEscape(t.Task.DeviceID().String()) +
		"/ota/firmwares/" + url.PathEscape(t.Firmware.ID().String()) + "/artifact"
	return v
}
