package contract_test

import (
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/contract"
)

// TestMemoryProtocols runs the device protocols' use cases on the
// in-process stores.
func TestMemoryProtocols(t *testing.T) {
	contract.RunProtocols(t, func(*testing.T) contract.ProtocolRepos {
		store := memory.NewStore()
		return contract.ProtocolRepos{
			Repos: contract.Repos{
				Devices: memory.NewDevices(store), Firmwares: memory.NewFirmwares(store),
				Rollouts: memory.NewRollouts(store), Tasks: memory.NewTasks(store),
			},
			Attributes: memory.NewAttributes(store), Directory: memory.NewDirectory(store), Actions: memory.NewTaskActions(store),
			Admissions: memory.NewAdmissions(store), Requests: memory.NewAuthRequests(store),
			Catalog: memory.NewArtifactCatalog(store), Logs: memory.NewTaskLogs(store),
			Locker: local.NewLocker(2*time.Second, ports.NopLockMetrics{}), Clock: local.NewClock(), IDs: local.NewUUIDs(),
		}
	})
}
