package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

// TestPostgresDDIStores holds the Postgres attribute and task-action
// repositories (migration 00010) to the DDI storage contract.
func TestPostgresDDIStores(t *testing.T) {
	contract.RunDDIStores(t, func(t *testing.T) contract.DDIRepos {
		db, _ := testenv.PostgresDB(t)
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			t.Fatal(err)
		}
		return contract.DDIRepos{
			Repos: contract.Repos{
				Devices: repos.Devices, Firmwares: repos.Firmwares, Rollouts: repos.Rollouts, Tasks: repos.Tasks,
			},
			Attributes: postgres.NewAttributeRepository(db),
			Actions:    postgres.NewTaskActionRepository(db),
		}
	})
}
