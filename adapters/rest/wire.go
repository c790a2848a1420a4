package rest

import "github.com/google/wire"

// ProviderSet provides the HTTP edge (*echo.Echo) to the bootstrap's wire
// injector. The injector supplies Config, the two use-case services, the
// []ports.HealthCheck for /readyz, an httpedge.RequestObserver, the metrics
// http.Handler and the *slog.Logger.
var ProviderSet = wire.NewSet(NewServer)
