package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/tests/contract"
)

// TestMemoryMenderStores holds the in-process Mender repositories to the
// same contract as the Postgres ones.
func TestMemoryMenderStores(t *testing.T) {
	contract.RunMenderStores(t, func(*testing.T) contract.MenderRepos {
		store := memory.NewStore()
		return contract.MenderRepos{
			Repos: contract.Repos{
				Devices: memory.NewDevices(store), Firmwares: memory.NewFirmwares(store),
				Rollouts: memory.NewRollouts(store), Tasks: memory.NewTasks(store),
			},
			Admissions: memory.NewAdmissions(store), Requests: memory.NewAuthRequests(store),
			Catalog: memory.NewArtifactCatalog(store), Logs: memory.NewTaskLogs(store),
		}
	})
}
