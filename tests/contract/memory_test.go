package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/tests/contract"
)

// TestMemoryRepositories holds the in-process repositories to the same
// contract as the Postgres ones. All suites share one store, as they share
// one database there, so the test also shows that their data stays apart.
func TestMemoryRepositories(t *testing.T) {
	store := memory.NewStore()
	contract.RunRepositories(t, func(*testing.T) contract.Repos {
		return contract.Repos{
			Devices:   memory.NewDevices(store),
			Firmwares: memory.NewFirmwares(store),
			Rollouts:  memory.NewRollouts(store),
			Tasks:     memory.NewTasks(store),
			Open:      memory.NewRollouts(store),
		}
	})
}
