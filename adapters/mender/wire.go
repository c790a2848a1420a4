package mender

import "github.com/google/wire"

// ProviderSet provides the Mender adapter; the injector supplies a
// Service and an AdmissionService of application/mender.
var ProviderSet = wire.NewSet(New)
