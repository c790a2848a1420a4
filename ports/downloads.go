package ports

import (
	"context"

	"github.com/ai-device/ota/domain"
)

// Download is a hosted artifact a device may download, opened: either its
// bytes (Object, which the caller closes) or, when the store signs direct
// URLs and the service is configured to send devices there
// (OTA_ARTIFACT_REDIRECT=presigned), the URL to redirect to.
type Download struct {
	Artifact domain.Artifact
	Object   BlobObject
	Redirect string
}

// DownloadService serves hosted artifacts to devices (docs/DOMAIN.md,
// hosted downloads): it decides whether a device may download a firmware's
// image (domain.MayDownload), opens it, and signs links for agents that
// send no credentials.
type DownloadService interface {
	// Describe applies the rule to dev, an authenticated device, and
	// firmwareID, and reads the firmware's artifact without opening it.
	Describe(ctx context.Context, dev domain.Device, firmwareID domain.UUID) (domain.Artifact, error)
	// Open opens firmwareID's artifact for dev, an authenticated device.
	Open(ctx context.Context, dev domain.Device, firmwareID domain.UUID) (Download, error)
	// OpenLink opens the artifact a signed link names, after verifying
	// it (domain.ErrLinkInvalid, domain.ErrLinkExpired) and the rule.
	OpenLink(ctx context.Context, l domain.ArtifactLink) (Download, error)
	// Link signs a link to fw's artifact for dev, valid for the
	// configured time (OTA_ARTIFACT_LINK_TTL).
	Link(fw domain.Firmware, dev domain.DeviceID) domain.ArtifactLink
	// Artifact describes fw's hosted artifact (its file name and
	// digests), for the protocols that list it before the download.
	Artifact(ctx context.Context, fw domain.Firmware) (domain.Artifact, error)
}
