package application_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// accountsRemovingAfterRead is the memory accounts store with a hook run
// right after a token is read by its hash: what another request (an
// admin's removal of the user) commits while this one authenticates.
type accountsRemovingAfterRead struct {
	*memory.Accounts
	afterRead func()
}

func (a *accountsRemovingAfterRead) TokenByHash(ctx context.Context, h domain.TokenHash) (domain.APIToken, domain.User, error) {
	t, u, err := a.Accounts.TokenByHash(ctx, h)
	if a.afterRead != nil {
		f := a.afterRead
		a.afterRead = nil
		f()
	}
	return t, u, err
}

// A token whose user is removed while a request with it authenticates is
// UNAUTHORIZED, as one whose user was removed before (ERRORS.md: "a token
// ... whose user was removed" is 401; docs/DOMAIN.md A5). When the
// request is the token's first use in a minute, Authenticate records the
// use (A6) and the locked re-read finds no token: the answer is the
// store's NOT_FOUND (a 404 on whatever admin route was asked), not 401.
func TestTokenOfAUserRemovedMidAuthenticationIsUnauthorized(t *testing.T) {
	clock := &fixedClock{now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	store := &accountsRemovingAfterRead{Accounts: memory.NewAccounts(memory.NewStore())}
	a, err := application.NewAccounts(store, clock, local.NewUUIDs(), rootSecret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	rel := createUser(t, a, "rel", domain.RoleReleaser)
	cred, err := a.CreateToken(ctx, actorFor(rel), ports.NewAPIToken{Name: "ci", Scopes: []string{"firmware:write"}, ExpiresAt: clock.now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	store.afterRead = func() {
		if err := a.RemoveUser(ctx, testActor, "rel"); err != nil {
			t.Fatal(err)
		}
	}
	_, err = a.Authenticate(ctx, cred.Secret)
	if !errors.Is(err, domain.ErrUnauthorized) || errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("Authenticate with a token whose user was removed meanwhile = %v; want domain.ErrUnauthorized (401), not a not-found (404)", err)
	}
}
