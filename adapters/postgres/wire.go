package postgres

import (
	"github.com/google/wire"

	"github.com/ai-device/ota/ports"
)

// RepositorySet provides every Postgres repository bound to its port, and
// the readiness probe, from a *sqlx.DB the injector already has. Use it when
// the pool is opened elsewhere (for instance to migrate before serving).
//
// The probe is provided as *HealthCheck, not bound to ports.HealthCheck:
// the injector collects several probes (Postgres, Redis), and one binding
// of the interface would hide the others.
var RepositorySet = wire.NewSet(
	NewDeviceRepository,
	wire.Bind(new(ports.DeviceRepository), new(*DeviceRepository)),
	NewFirmwareRepository,
	wire.Bind(new(ports.FirmwareRepository), new(*FirmwareRepository)),
	NewRolloutRepository,
	wire.Bind(new(ports.RolloutRepository), new(*RolloutRepository)),
	NewTaskRepository,
	wire.Bind(new(ports.TaskRepository), new(*TaskRepository)),
	NewHealthCheck,
)

// ProviderSet is RepositorySet plus Open: given a Config, the injector gets
// the pool (closed by wire's cleanup) and every repository bound to its
// port.
var ProviderSet = wire.NewSet(Open, RepositorySet)
