package memory

import (
	"testing"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/contract"
)

// TestMemoryAuditLog holds the store's audit records to the audit log
// contract, written as its writes write them (record, under the lock).
func TestMemoryAuditLog(t *testing.T) {
	contract.RunAuditLogs(t, func(t *testing.T) (ports.AuditLog, contract.AuditWriter) {
		s := NewStore()
		return s, func(t *testing.T, rec domain.AuditRecord) {
			if err := do(t.Context(), s, func() error { s.record(rec); return nil }); err != nil {
				t.Fatal(err)
			}
		}
	})
}
