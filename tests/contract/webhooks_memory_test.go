package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/tests/contract"
)

// TestMemoryWebhookStore holds the in-process webhook tables and delivery
// queue to the webhook contract.
func TestMemoryWebhookStore(t *testing.T) {
	contract.RunWebhookStores(t, func(*testing.T) contract.WebhookStores {
		s := memory.NewStore()
		return contract.WebhookStores{Webhooks: memory.NewWebhooks(s), Accounts: memory.NewAccounts(s)}
	})
}
