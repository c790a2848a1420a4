package memory

import (
	"github.com/ai-device/ota/ports"
	"github.com/google/wire"
)

// ProviderSet provides one Store and binds its repositories to the storage
// ports, for the OTA_STORE=memory wiring.
var ProviderSet = wire.NewSet(
	NewStore,
	NewDevices, wire.Bind(new(ports.DeviceRepository), new(*Devices)),
	NewFirmwares, wire.Bind(new(ports.FirmwareRepository), new(*Firmwares)),
	NewRollouts, wire.Bind(new(ports.RolloutRepository), new(*Rollouts)),
	NewTasks,
	NewArtifacts, wire.Bind(new(ports.ArtifactRepository), new(*Artifacts)),
)
