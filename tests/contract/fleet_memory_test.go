package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/tests/contract"
)

// TestMemoryFleet holds the in-process fleet reader to the contract the
// Postgres one meets.
func TestMemoryFleet(t *testing.T) {
	store := memory.NewStore()
	contract.RunFleet(t, func(*testing.T) contract.FleetRepos {
		return contract.FleetRepos{
			Repos: contract.Repos{
				Devices: memory.NewDevices(store), Firmwares: memory.NewFirmwares(store),
				Rollouts: memory.NewRollouts(store), Tasks: memory.NewTasks(store),
			},
			Fleet: memory.NewFleet(store),
		}
	})
}
