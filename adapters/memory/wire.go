package memory

import (
	"github.com/ai-device/ota/ports"
	"github.com/google/wire"
)

// ProviderSet provides one Store and binds its repositories to the storage
// ports, for the OTA_STORE=memory wiring; the task store (*Tasks) is
// provided as it is, for the injector to hand each use case the methods
// it declares. It leaves out the clock and id
// generator (SystemSet), which the Postgres wiring needs as well, so that a
// graph can take both sets only where it wants them.
var ProviderSet = wire.NewSet(
	NewStore,
	NewDevices, wire.Bind(new(ports.DeviceRepository), new(*Devices)),
	NewFirmwares, wire.Bind(new(ports.FirmwareRepository), new(*Firmwares)),
	NewRollouts, wire.Bind(new(ports.RolloutRepository), new(*Rollouts)),
	NewTasks,
)

// SystemSet provides the system clock and the UUID generator as
// ports.Clock and ports.IDGenerator. They belong to no store, so every
// wiring (memory or Postgres) can use them.
var SystemSet = wire.NewSet(
	NewClock, wire.Bind(new(ports.Clock), new(Clock)),
	NewUUIDs, wire.Bind(new(ports.IDGenerator), new(UUIDs)),
)
