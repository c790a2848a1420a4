package ddi

import "github.com/google/wire"

// ProviderSet provides the DDI adapter; the injector supplies its Config
// and a ports.DDIService.
var ProviderSet = wire.NewSet(New)
