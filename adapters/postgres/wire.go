package postgres

import (
	"github.com/google/wire"
	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/ports"
)

// RepositorySet provides every Postgres repository bound to its port (the
// task store as *TaskRepository, for the injector to hand each use case
// the methods it declares), and the readiness probe, from a *sqlx.DB the injector already has. Use it when
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
	NewHealthCheck,
)

// ProviderSet is RepositorySet plus Open: given a Config, the injector gets
// the pool (closed by wire's cleanup) and every repository bound to its
// port.
var ProviderSet = wire.NewSet(Open, RepositorySet)

// ServingSet is the production wiring of the repositories on a pool: the
// device repository behind the write-behind of checks (WriteBehindDevices),
// firmware and rollouts behind the catalog cache (CatalogCache), tasks
// with the check's read on the read replica when ReadReplicaConfig names one
// (OpenReadReplica). The injector supplies a *sqlx.DB, a WriteBehindConfig,
// a CatalogCacheConfig, a ReadReplicaConfig and a *slog.Logger; wire's cleanup stops the
// write-behind (flushing it) and the cache's listener before the pool
// closes.
var ServingSet = wire.NewSet(
	NewDeviceRepository,
	NewWriteBehindDevices,
	wire.Bind(new(ports.DeviceRepository), new(*WriteBehindDevices)),
	NewFirmwareRepository,
	NewRolloutRepository,
	NewCatalogCache,
	CachedFirmwaresOf,
	wire.Bind(new(ports.FirmwareRepository), new(*CachedFirmwares)),
	CachedRolloutsOf,
	wire.Bind(new(ports.RolloutRepository), new(*CachedRollouts)),
	OpenReadReplica,
	NewServingTaskRepository,
	NewHealthCheck,
)

// CachedFirmwaresOf is the cache's firmware repository (a wire provider).
func CachedFirmwaresOf(c *CatalogCache) *CachedFirmwares { return c.Firmwares() }

// CachedRolloutsOf is the cache's rollout repository (a wire provider).
func CachedRolloutsOf(c *CatalogCache) *CachedRollouts { return c.Rollouts() }

// Repositories are the repositories the core use cases need, on one pool.
type Repositories struct {
	Devices    *DeviceRepository
	Firmwares  *FirmwareRepository
	Rollouts   *RolloutRepository
	Tasks      *TaskRepository
	Attributes *AttributeRepository
	Directory  *DeviceDirectory
}

// NewRepositories builds every repository on db (tests and tools; the
// service is wired with RepositorySet).
func NewRepositories(db *sqlx.DB) (Repositories, error) {
	var r Repositories
	var err error
	if r.Devices, err = NewDeviceRepository(db); err != nil {
		return Repositories{}, err
	}
	if r.Firmwares, err = NewFirmwareRepository(db); err != nil {
		return Repositories{}, err
	}
	if r.Rollouts, err = NewRolloutRepository(db); err != nil {
		return Repositories{}, err
	}
	if r.Tasks, err = NewTaskRepository(db); err != nil {
		return Repositories{}, err
	}
	r.Attributes, r.Directory = NewAttributeRepository(db), NewDeviceDirectory(db)
	return r, nil
}
