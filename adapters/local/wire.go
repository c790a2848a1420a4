package local

import (
	"github.com/google/wire"

	"github.com/ai-device/ota/ports"
)

// SystemSet provides the system clock and the UUID generator as
// ports.Clock and ports.IDGenerator, for every wiring (memory or Postgres).
var SystemSet = wire.NewSet(
	NewClock, wire.Bind(new(ports.Clock), new(Clock)),
	NewUUIDs, wire.Bind(new(ports.IDGenerator), new(UUIDs)),
)
