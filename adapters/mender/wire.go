package mender

import "github.com/google/wire"

// ProviderSet provides the Mender adapter; the injector supplies a
// ports.MenderService and a ports.AdmissionService.
var ProviderSet = wire.NewSet(New)
