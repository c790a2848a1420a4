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
		return contract.Repos{
			Devices:   postgres.NewDeviceRepository(db),
			Firmwares: postgres.NewFirmwareRepository(db),
			Rollouts:  postgres.NewRolloutRepository(db),
			Tasks:     postgres.NewTaskRepository(db),
		}
	})
}
