package contract_test

import (
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

// TestPostgresProtocols runs the device protocols' use cases on the
// Postgres stores.
func TestPostgresProtocols(t *testing.T) {
	contract.RunProtocols(t, func(t *testing.T) contract.ProtocolRepos {
		db, _ := testenv.PostgresDB(t)
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			t.Fatal(err)
		}
		return contract.ProtocolRepos{
			Repos: contract.Repos{
				Devices: repos.Devices, Firmwares: repos.Firmwares, Rollouts: repos.Rollouts, Tasks: repos.Tasks,
			},
			Attributes: repos.Attributes, Directory: repos.Directory, Actions: postgres.NewTaskActionRepository(db),
			Admissions: postgres.NewAdmissionRepository(db), Requests: postgres.NewAuthRequestRepository(db),
			Catalog: postgres.NewArtifactCatalogRepository(db), Logs: postgres.NewTaskLogRepository(db),
			Locker: local.NewLocker(2*time.Second, ports.NopLockMetrics{}), Clock: local.NewClock(), IDs: local.NewUUIDs(),
		}
	})
}
