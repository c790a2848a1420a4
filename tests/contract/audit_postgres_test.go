package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

// TestPostgresAuditLog holds the audit_log table (migration 00130), its
// in-transaction writer and its reader to the audit log contract.
func TestPostgresAuditLog(t *testing.T) {
	contract.RunAuditLogs(t, func(t *testing.T) (ports.AuditLog, ports.FirmwareRepository) {
		db, _ := testenv.PostgresDB(t)
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			t.Fatal(err)
		}
		return postgres.NewAuditLog(db), repos.Firmwares
	})
}
