package application_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// accountStores runs f on each store the accounts use cases run on: the
// memory store, and Postgres; with the audit log of the same store.
func accountStores(t *testing.T, f func(t *testing.T, store application.AccountStore, audit ports.AuditLog)) {
	t.Run("memory", func(t *testing.T) {
		s := memory.NewStore()
		f(t, memory.NewAccounts(s), s)
	})
	t.Run("postgres", func(t *testing.T) {
		db, _ := testenv.PostgresDB(t)
		f(t, postgres.NewAccountRepository(db), postgres.NewAuditLog(db))
	})
}
