package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

// TestPostgresFleet holds the Postgres fleet reader to the fleet contract,
// each suite on its own database cloned from the migrated template.
func TestPostgresFleet(t *testing.T) {
	contract.RunFleet(t, func(t *testing.T) contract.FleetRepos {
		db, _ := testenv.PostgresDB(t)
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			t.Fatal(err)
		}
		fleet, err := postgres.NewFleetReader(db)
		if err != nil {
			t.Fatal(err)
		}
		return contract.FleetRepos{
			Repos: contract.Repos{Devices: repos.Devices, Firmwares: repos.Firmwares, Rollouts: repos.Rollouts, Tasks: repos.Tasks},
			Fleet: fleet,
		}
	})
}
