package bootstrap

import (
	"crypto/rand"
	"log/slog"
	"time"

	"github.com/google/wire"

	"github.com/ai-device/ota/adapters/mender"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// DownloadSettings are the OTA_ARTIFACT_* settings of hosted downloads.
type DownloadSettings struct {
	// LinkKey signs download links (OTA_ARTIFACT_LINK_KEY); empty: a
	// random key per process.
	LinkKey string
	// LinkTTL is how long a signed link is valid (OTA_ARTIFACT_LINK_TTL).
	LinkTTL time.Duration
	// Presigned redirects devices to a presigned store URL
	// (OTA_ARTIFACT_REDIRECT=presigned) instead of serving the bytes.
	Presigned bool
}

// minLinkKeyLen is the shortest OTA_ARTIFACT_LINK_KEY: an HMAC-SHA256 key
// shorter than the hash is weaker than it need be.
const minLinkKeyLen = 32

// loadDownloadConfig reads the OTA_ARTIFACT_LINK_* and
// OTA_ARTIFACT_REDIRECT variables into cfg.
func loadDownloadConfig(cfg *Config, get func(name, def string) string, getenv func(string) string,
	bad func(name, format string, args ...any), duration func(name, def string, min, max time.Duration) time.Duration) {
	d := &cfg.Downloads
	d.LinkKey = getenv("OTA_ARTIFACT_LINK_KEY")
	if d.LinkKey != "" && len(d.LinkKey) < minLinkKeyLen {
		bad("OTA_ARTIFACT_LINK_KEY", "must be at least %d characters (or unset for a random per-process key)", minLinkKeyLen)
	}
	d.LinkTTL = duration("OTA_ARTIFACT_LINK_TTL", application.DefaultArtifactLinkTTL.String(), time.Minute, 7*24*time.Hour)
	switch v := get("OTA_ARTIFACT_REDIRECT", "proxy"); v {
	case "proxy":
	case "presigned":
		d.Presigned = true
	default:
		bad("OTA_ARTIFACT_REDIRECT", "%q must be proxy or presigned", v)
	}
}

// DownloadConfigFrom extracts the download use case's settings. Without
// OTA_ARTIFACT_LINK_KEY a random key is made, and the warning says what
// that costs: links signed by one replica are refused by the others and
// after a restart (mender-client then fails the download and retries the
// deployment, which hands it a new link).
func DownloadConfigFrom(cfg Config, logger *slog.Logger) (application.DownloadConfig, error) {
	secret := []byte(cfg.Downloads.LinkKey)
	if len(secret) == 0 {
		secret = make([]byte, minLinkKeyLen)
		if _, err := rand.Read(secret); err != nil {
			return application.DownloadConfig{}, err
		}
		logger.Warn("OTA_ARTIFACT_LINK_KEY is not set: download links are signed with a random per-process key; " +
			"replicas will not accept each other's links, nor this process after a restart. " +
			"Harmless for one process in development; set the same key on every replica in production")
	}
	key, err := domain.NewLinkKey(secret)
	if err != nil {
		return application.DownloadConfig{}, err
	}
	return application.DownloadConfig{LinkKey: key, LinkTTL: cfg.Downloads.LinkTTL, Presigned: cfg.Downloads.Presigned}, nil
}

// MenderLinksFrom lets the Mender adapter hand out signed links under the
// public URL.
func MenderLinksFrom(cfg Config, dl ports.DownloadService) mender.Links {
	return mender.Links{Downloads: dl, PublicURL: cfg.PublicURL}
}

// DownloadPortsFrom gives the download use case the ports it reads.
func DownloadPortsFrom(f ports.FirmwareRepository, d ports.DeviceRepository, a ports.ArtifactRepository,
	b ports.ArtifactBlobs, c ports.Clock) application.DownloadPorts {
	return application.DownloadPorts{Firmwares: f, Devices: d, Artifacts: a, Blobs: b, Clock: c}
}

// DownloadSet provides hosted downloads to the HTTP adapters: the
// download use case over the artifact store ArtifactSet opens.
var DownloadSet = wire.NewSet(
	DownloadConfigFrom,
	DownloadPortsFrom,
	application.NewDownloads, wire.Bind(new(ports.DownloadService), new(*application.Downloads)),
	MenderLinksFrom,
)
