package mender

import (
	"strings"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/adapters/httpedge"
)

// Links hands mender-client links to hosted artifacts. mender-client
// sends no credentials when it downloads source.uri, so the link is
// signed (domain.ArtifactLink): for one device, one firmware, until it
// expires.
type Links struct {
	// Downloads signs the links; nil: hosted firmware is not offered a
	// link (its source.uri is empty).
	Downloads ports.DownloadService
	// PublicURL (OTA_PUBLIC_URL) starts every link, never a request's
	// Host header.
	PublicURL string
}

// source is where a device downloads fw: a signed link to the hosted
// artifact, valid until the link expires, or the operator's URL (which
// does not expire here; sourceTTL is said).
func (a *Adapter) source(fw domain.Firmware, dev domain.DeviceID) source {
	spec := fw.Spec()
	if spec.ArtifactID.IsZero() || a.links.Downloads == nil {
		return source{URI: spec.URL, Expire: a.now().Add(sourceTTL).UTC().Format(time.RFC3339)}
	}
	l := a.links.Downloads.Link(fw, dev)
	return source{URI: httpedge.SignedLinkURL(strings.TrimRight(a.links.PublicURL, "/"), l), Expire: l.Expires.UTC().Format(time.RFC3339)}
}
