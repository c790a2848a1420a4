package ddi

import "github.com/google/wire"

// ProviderSet provides the DDI adapter; the injector supplies its Config
// and an application/ddi Service.
var ProviderSet = wire.NewSet(New)
