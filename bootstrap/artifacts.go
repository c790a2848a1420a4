package bootstrap

import (
	"context"
	"net/url"
	"strconv"

	"github.com/google/wire"

	"github.com/ai-device/ota/adapters/blobstore"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Defaults of the artifact store (docs/CONFIGURATION.md).
const (
	// DefaultArtifactStore is a directory under the working directory, so
	// `make run` keeps uploads with nothing else set up.
	DefaultArtifactStore = "file://./var/artifacts"
	// DefaultArtifactMaxBytes is 4 GiB: a full root file-system image.
	DefaultArtifactMaxBytes = int64(4) << 30
	maxArtifactMaxBytes     = int64(1) << 40
)

// ArtifactStoreURLFrom names the artifact store.
func ArtifactStoreURLFrom(cfg Config) blobstore.StoreURL {
	return blobstore.StoreURL(cfg.ArtifactStore)
}

// loadArtifactConfig reads OTA_ARTIFACT_STORE and OTA_ARTIFACT_MAX_BYTES
// into cfg, reporting bad values through bad.
func loadArtifactConfig(cfg *Config, get func(name, def string) string, bad func(name, format string, args ...any)) {
	cfg.ArtifactStore = get("OTA_ARTIFACT_STORE", DefaultArtifactStore)
	if u, err := url.Parse(cfg.ArtifactStore); err != nil || (u.Scheme != "file" && u.Scheme != "s3") ||
		(u.Scheme == "s3" && u.Host == "") || (u.Scheme == "file" && u.Host == "" && u.Path == "") {
		bad("OTA_ARTIFACT_STORE", "must be a file:///directory (or file://./relative) or s3://bucket?… URL")
	}
	raw := get("OTA_ARTIFACT_MAX_BYTES", strconv.FormatInt(DefaultArtifactMaxBytes, 10))
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 1 || n > maxArtifactMaxBytes {
		bad("OTA_ARTIFACT_MAX_BYTES", "%q must be a whole number of bytes from 1 to %d", raw, maxArtifactMaxBytes)
	}
	cfg.ArtifactMaxBytes = n
}

// ArtifactSet provides hosted artifacts: the blob store named by
// OTA_ARTIFACT_STORE, the upload, listing and deletion use cases, and the
// artifact reader firmware publication uses. The store sets provide the
// ports.ArtifactRepository.
var ArtifactSet = wire.NewSet(
	blobstore.ProviderSet,
	ArtifactStoreURLFrom,
	ArtifactMaxBytesFrom,
	NewArtifactInspector,
	application.NewArtifacts, wire.Bind(new(ports.ArtifactService), new(*application.Artifacts)),
	ArtifactReaderFrom,
)

// ArtifactMaxBytesFrom bounds one upload.
func ArtifactMaxBytesFrom(cfg Config) application.ArtifactMaxBytes {
	return application.ArtifactMaxBytes(cfg.ArtifactMaxBytes)
}

// ArtifactReaderFrom is the artifact repository as firmware publication
// reads it.
func ArtifactReaderFrom(r ports.ArtifactRepository) application.ArtifactReader { return r }

// rawInspector reads every upload as an opaque image. It stands in until
// the .mender / .swu reader (adapters/artifactfile) is wired here in its
// place.
type rawInspector struct{}

func (rawInspector) Inspect(context.Context, string, ports.BlobObject) (domain.ArtifactMeta, error) {
	return domain.ArtifactMeta{Format: domain.ArtifactRaw}, nil
}

// NewArtifactInspector is what reads an upload's own metadata.
func NewArtifactInspector() application.ArtifactInspector { return rawInspector{} }
