package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/tests/contract"
)

// TestMemoryAccountStore holds the in-process accounts to the accounts contract.
func TestMemoryAccountStore(t *testing.T) {
	contract.RunAccountStores(t, func(*testing.T) application.AccountStore { return memory.NewAccounts(memory.NewStore()) })
}
