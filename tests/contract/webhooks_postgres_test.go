package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

// TestPostgresWebhookStore holds the webhook tables (migration 00140) and
// the delivery queue's claims to the webhook contract.
func TestPostgresWebhookStore(t *testing.T) {
	contract.RunWebhookStores(t, func(t *testing.T) contract.WebhookStores {
		db, _ := testenv.PostgresDB(t)
		return contract.WebhookStores{Webhooks: postgres.NewWebhookRepository(db), Accounts: postgres.NewAccountRepository(db)}
	})
}
