package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/tests/contract"
)

// TestMemoryTargetingStores holds the in-process tag directory, rollout
// policy storage and check view facts to the targeting storage contract.
func TestMemoryTargetingStores(t *testing.T) {
	store := memory.NewStore()
	contract.RunTargetingStores(t, func(*testing.T) contract.TargetingRepos {
		return contract.TargetingRepos{
			Repos: contract.Repos{
				Devices: memory.NewDevices(store), Firmwares: memory.NewFirmwares(store),
				Rollouts: memory.NewRollouts(store), Tasks: memory.NewTasks(store),
			},
			Attributes: memory.NewAttributes(store),
			Directory:  memory.NewDirectory(store),
		}
	})
}
