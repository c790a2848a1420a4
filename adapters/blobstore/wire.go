package blobstore

import (
	"context"

	"github.com/google/wire"

	"github.com/ai-device/ota/ports"
)

// StoreURL is OTA_ARTIFACT_STORE: the bucket the artifacts live in.
type StoreURL string

// ProviderSet provides the artifact store as ports.ArtifactBlobs; the
// injector supplies its StoreURL.
var ProviderSet = wire.NewSet(Provide, wire.Bind(new(ports.ArtifactBlobs), new(*Store)))

// Provide opens the store at start, so a bad URL or an unreachable
// directory stops otad before it takes traffic. The bucket lives as long
// as the process: closing it would free nothing a stopping process keeps.
func Provide(u StoreURL) (*Store, error) { return Open(context.Background(), string(u)) }
