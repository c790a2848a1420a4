package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

// TestPostgresTargetingStores holds the Postgres tag directory, rollout
// policy column and check view (migration 00040) to the targeting contract.
func TestPostgresTargetingStores(t *testing.T) {
	contract.RunTargetingStores(t, func(t *testing.T) contract.TargetingRepos {
		db, _ := testenv.PostgresDB(t)
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			t.Fatal(err)
		}
		return contract.TargetingRepos{
			Repos: contract.Repos{
				Devices: repos.Devices, Firmwares: repos.Firmwares, Rollouts: repos.Rollouts, Tasks: repos.Tasks,
			},
			Attributes: postgres.NewAttributeRepository(db),
			Directory:  postgres.NewDeviceDirectory(db),
		}
	})
}
