package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// DownloadFirmwares reads the firmware a download names.
type DownloadFirmwares interface {
	Get(ctx context.Context, id domain.UUID) (domain.Firmware, error)
}

// DownloadDevices reads the device a signed link names: the link carries
// no credentials, so its device is read to apply the rule to its model.
type DownloadDevices interface {
	Get(ctx context.Context, id domain.DeviceID) (domain.Device, error)
}

// DownloadArtifacts reads a hosted artifact's row (file name, digests).
type DownloadArtifacts interface {
	Get(ctx context.Context, id domain.UUID) (domain.Artifact, error)
}

// DownloadPorts are what the download use case reads.
type DownloadPorts struct {
	Firmwares DownloadFirmwares
	Devices   DownloadDevices
	Artifacts DownloadArtifacts
	Blobs     ports.ArtifactBlobs
	Clock     ports.Clock
}

// Defaults of DownloadConfig.
const (
	DefaultArtifactLinkTTL = time.Hour
	// presignTTL bounds a presigned store URL a device is redirected to:
	// it follows the redirect at once, and a resume asks the service
	// again (which applies the rule again).
	presignTTL = 15 * time.Minute
)

// DownloadConfig tunes the download use case.
type DownloadConfig struct {
	// LinkKey signs the links of agents that send no credentials
	// (OTA_ARTIFACT_LINK_KEY).
	LinkKey domain.LinkKey
	// LinkTTL is how long a signed link is valid (OTA_ARTIFACT_LINK_TTL).
	LinkTTL time.Duration
	// Presigned sends devices to a presigned URL of the store instead of
	// serving the bytes, when the store signs URLs
	// (OTA_ARTIFACT_REDIRECT=presigned).
	Presigned bool
}

// Downloads implements ports.DownloadService.
type Downloads struct {
	p   DownloadPorts
	cfg DownloadConfig
}

var _ ports.DownloadService = (*Downloads)(nil)

// NewDownloads builds the download use case.
func NewDownloads(p DownloadPorts, cfg DownloadConfig) (*Downloads, error) {
	if p.Firmwares == nil || p.Devices == nil || p.Artifacts == nil || p.Blobs == nil || p.Clock == nil {
		return nil, errors.New("application: every download dependency is required")
	}
	if cfg.LinkKey.IsZero() {
		return nil, errors.New("application: downloads need a link key")
	}
	if cfg.LinkTTL <= 0 {
		cfg.LinkTTL = DefaultArtifactLinkTTL
	}
	return &Downloads{p: p, cfg: cfg}, nil
}

// Describe applies domain.MayDownload to an authenticated device and reads
// the firmware's artifact.
func (d *Downloads) Describe(ctx context.Context, dev domain.Device, firmwareID domain.UUID) (domain.Artifact, error) {
	fw, err := d.permitted(ctx, dev, firmwareID)
	if err != nil {
		return domain.Artifact{}, err
	}
	return d.Artifact(ctx, fw)
}

// Open applies domain.MayDownload to an authenticated device and opens the
// firmware's artifact.
func (d *Downloads) Open(ctx context.Context, dev domain.Device, firmwareID domain.UUID) (ports.Download, error) {
	fw, err := d.permitted(ctx, dev, firmwareID)
	if err != nil {
		return ports.Download{}, err
	}
	return d.open(ctx, fw)
}

// permitted reads the firmware and applies the rule.
func (d *Downloads) permitted(ctx context.Context, dev domain.Device, firmwareID domain.UUID) (domain.Firmware, error) {
	if firmwareID.IsZero() {
		return domain.Firmware{}, domain.ErrNotFound
	}
	fw, err := d.p.Firmwares.Get(ctx, firmwareID)
	if err != nil {
		return domain.Firmware{}, err
	}
	if err := domain.MayDownload(dev, fw); err != nil {
		return domain.Firmware{}, err
	}
	return fw, nil
}

// OpenLink verifies a signed link, then applies the same rule as Open to
// the device and firmware it names: a link signed before a revocation is
// refused after it.
func (d *Downloads) OpenLink(ctx context.Context, l domain.ArtifactLink) (ports.Download, error) {
	if err := d.cfg.LinkKey.Verify(l, d.p.Clock.Now()); err != nil {
		return ports.Download{}, err
	}
	fw, err := d.p.Firmwares.Get(ctx, l.FirmwareID)
	if err != nil {
		return ports.Download{}, err
	}
	if fw.Spec().ArtifactID != l.ArtifactID {
		// The firmware now names another artifact than the one signed for.
		return ports.Download{}, domain.ErrNotFound
	}
	dev, err := d.p.Devices.Get(ctx, l.DeviceID)
	if err != nil {
		return ports.Download{}, err
	}
	if err := domain.MayDownload(dev, fw); err != nil {
		return ports.Download{}, err
	}
	return d.open(ctx, fw)
}

// Link signs a link to fw's artifact for dev, valid for LinkTTL.
func (d *Downloads) Link(fw domain.Firmware, dev domain.DeviceID) domain.ArtifactLink {
	return d.cfg.LinkKey.Sign(fw, dev, d.p.Clock.Now().Add(d.cfg.LinkTTL))
}

// Artifact reads fw's hosted artifact.
func (d *Downloads) Artifact(ctx context.Context, fw domain.Firmware) (domain.Artifact, error) {
	id := fw.Spec().ArtifactID
	if id.IsZero() {
		return domain.Artifact{}, domain.ErrNotFound
	}
	return d.p.Artifacts.Get(ctx, id)
}

// open reads the artifact's row and opens its bytes, or presigns them.
func (d *Downloads) open(ctx context.Context, fw domain.Firmware) (ports.Download, error) {
	a, err := d.Artifact(ctx, fw)
	if err != nil {
		return ports.Download{}, err
	}
	if d.cfg.Presigned {
		u, err := d.p.Blobs.Presign(ctx, a.StorageKey(), presignTTL)
		switch {
		case err == nil:
			return ports.Download{Artifact: a, Redirect: u}, nil
		case !errors.Is(err, ports.ErrPresignUnsupported):
			return ports.Download{}, fmt.Errorf("presign artifact %s: %w", a.ID(), err)
		}
	}
	obj, err := d.p.Blobs.Open(ctx, a.StorageKey())
	if err != nil {
		return ports.Download{}, fmt.Errorf("open artifact %s: %w", a.ID(), err)
	}
	return ports.Download{Artifact: a, Object: obj}, nil
}
