package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

// TestPostgresMenderStores holds the Postgres Mender repositories
// (migration 00030) to the Mender storage contract.
func TestPostgresMenderStores(t *testing.T) {
	contract.RunMenderStores(t, func(t *testing.T) contract.MenderRepos {
		db, _ := testenv.PostgresDB(t)
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			t.Fatal(err)
		}
		return contract.MenderRepos{
			Repos: contract.Repos{
				Devices: repos.Devices, Firmwares: repos.Firmwares, Rollouts: repos.Rollouts, Tasks: repos.Tasks,
			},
			Admissions: postgres.NewAdmissionRepository(db), Requests: postgres.NewAuthRequestRepository(db),
			Catalog: postgres.NewArtifactCatalogRepository(db), Logs: postgres.NewTaskLogRepository(db),
		}
	})
}
