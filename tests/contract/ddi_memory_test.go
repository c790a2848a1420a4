package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/tests/contract"
)

// TestMemoryDDIStores holds the in-process attribute and task-action
// repositories to the same contract as the Postgres ones.
func TestMemoryDDIStores(t *testing.T) {
	store := memory.NewStore()
	contract.RunDDIStores(t, func(*testing.T) contract.DDIRepos {
		return contract.DDIRepos{
			Repos: contract.Repos{
				Devices: memory.NewDevices(store), Firmwares: memory.NewFirmwares(store),
				Rollouts: memory.NewRollouts(store), Tasks: memory.NewTasks(store),
			},
			Attributes: memory.NewAttributes(store),
			Actions:    memory.NewTaskActions(store),
		}
	})
}
