package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

// TestPostgresRepositories holds the Postgres repositories to the
// repository contract. Each suite gets its own database cloned from the
// migrated template (skipped when no Postgres is configured and no Docker
// engine answers; see testenv.PostgresDB).
func TestPostgresRepositories(t *testing.T) {
	contract.RunRepositories(t, func(t *testing.T) contract.Repos {
		db, _ := testenv.PostgresDB(t)
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			t.Fatal(err)
		}
		return contract.Repos{
			Devices:   repos.Devices,
			Firmwares: repos.Firmwares,
			Rollouts:  repos.Rollouts,
			Tasks:     repos.Tasks,
		}
	})
}
