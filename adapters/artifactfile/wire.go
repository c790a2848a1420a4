package artifactfile

import "github.com/google/wire"

// ProviderSet provides the Inspector; the upload use case's injector binds
// it to the inspector port that use case declares.
var ProviderSet = wire.NewSet(wire.Value(Inspector{}))
