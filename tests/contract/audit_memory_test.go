package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/contract"
)

// TestMemoryAuditLog holds the in-process store's audit records to the
// audit log contract.
func TestMemoryAuditLog(t *testing.T) {
	contract.RunAuditLogs(t, func(*testing.T) (ports.AuditLog, ports.FirmwareRepository) {
		s := memory.NewStore()
		return s, memory.NewFirmwares(s)
	})
}
