package redislock

import (
	"github.com/google/wire"

	"github.com/ai-device/ota/ports"
)

// ProviderSet builds a *Locker from a Config and a ports.LockMetrics and
// offers it as the ports.Locker, so the composition root never names this
// package's concrete type. The cleanup New returns closes the Redis client.
var ProviderSet = wire.NewSet(New, wire.Bind(new(ports.Locker), new(*Locker)))
