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

// A principal authenticated for one account — by an API token, or by the
// password on POST /admin/tokens — that is still in flight when an admin
// removes the account and creates another of the same name (a new hire
// given a freed name, or the same person re-created with another role)
// must not mint a token for the new account. docs/DOMAIN.md A5: removing
// a user removes their tokens and "the next request of any of them is
// 401"; A2: a token belongs to the user who mints it — the removed one,
// not the account created after. ERRORS.md: a token "whose user was
// removed" is UNAUTHORIZED. The principal carries the very account it was
// checked against (domain.AccountRef: name and creation time), and
// ports.AccountTx.PutToken writes only while that account exists; a name
// alone would land the token on the new account, where it would outlive
// the removal meant to end the old credential.
func TestTokenMintedForARemovedAccountDoesNotLandOnItsSuccessor(t *testing.T) {
	accountStores(t, func(t *testing.T, store application.AccountStore, _ ports.AuditLog) {
		clock := &fixedClock{now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
		a, err := application.NewAccounts(store, clock, local.NewUUIDs(), rootSecret)
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		old := createUser(t, a, "rel", domain.RoleReleaser)
		minter, err := a.CreateToken(ctx, actorFor(old), ports.NewAPIToken{Name: "minter",
			Scopes: []string{"api_tokens:write", "firmware:write", "read"}, ExpiresAt: clock.now.Add(24 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}

		// Two requests of the removed account, authenticated before the
		// removal: a token minting a token, and the password route.
		byToken, err := a.Authenticate(ctx, minter.Secret)
		if err != nil {
			t.Fatal(err)
		}
		byPassword, err := a.SignIn(ctx, "rel", "correct horse battery")
		if err != nil {
			t.Fatal(err)
		}

		// Meanwhile an admin removes the account and, a minute later,
		// gives the name to a new account with its own password.
		if err := a.RemoveUser(ctx, testActor, "rel"); err != nil {
			t.Fatal(err)
		}
		clock.now = clock.now.Add(time.Minute)
		if _, err := a.CreateUser(ctx, testActor, ports.NewUser{Username: "rel", Role: string(domain.RoleReleaser),
			Password: "the new hire's own password"}); err != nil {
			t.Fatal(err)
		}

		for _, c := range []struct {
			how string
			p   domain.Principal
		}{{"a token of the removed account minting a token", byToken}, {"the removed account's password", byPassword}} {
			cred, err := a.CreateToken(ctx, actorFor(c.p), ports.NewAPIToken{Name: "kept",
				Scopes: []string{"firmware:write"}, ExpiresAt: clock.now.Add(time.Hour)})
			if err == nil {
				p, aerr := a.Authenticate(ctx, cred.Secret)
				t.Errorf("%s, authenticated before the account was removed, minted token %s for the new account of the name "+
					"(it authenticates as %v, %v); want domain.ErrUnauthorized: the account it authenticated as is gone",
					c.how, cred.Token.ID(), p, aerr)
				continue
			}
			if !errors.Is(err, domain.ErrUnauthorized) {
				t.Errorf("%s: %v, want domain.ErrUnauthorized", c.how, err)
			}
		}
		if tokens, err := store.APITokens(ctx, "rel"); err != nil || len(tokens) != 0 {
			t.Errorf("the new account rel owns %d tokens it never minted (%v)", len(tokens), err)
		}

		// Nor do they see or revoke the tokens the new account mints.
		newRel, err := a.SignIn(ctx, "rel", "the new hire's own password")
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := a.CreateToken(ctx, actorFor(newRel), ports.NewAPIToken{Name: "theirs",
			Scopes: []string{"firmware:write"}, ExpiresAt: clock.now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			how string
			p   domain.Principal
		}{{"a token of the removed account", byToken}, {"the removed account's password", byPassword}} {
			if tokens, err := a.ListTokens(ctx, c.p); err != nil || len(tokens) != 0 {
				t.Errorf("%s lists %d tokens of the new account (%v); want none", c.how, len(tokens), err)
			}
			if _, err := a.RevokeToken(ctx, actorFor(c.p), theirs.Token.ID()); !errors.Is(err, domain.ErrNotFound) {
				t.Errorf("%s revoking the new account's token: %v, want domain.ErrNotFound", c.how, err)
			}
		}
		if _, err := a.Authenticate(ctx, theirs.Secret); err != nil {
			t.Errorf("the new account's token after the stale principals' attempts: %v", err)
		}
	})
}

// accountsHookAfterRead is an accounts store running a hook once, right
// after a token is read by its hash: what another request commits while
// this one authenticates.
type accountsHookAfterRead struct {
	application.AccountStore
	afterRead func()
}

func (a *accountsHookAfterRead) TokenByHash(ctx context.Context, h domain.TokenHash) (domain.APIToken, domain.User, error) {
	t, u, err := a.AccountStore.TokenByHash(ctx, h)
	if f := a.afterRead; f != nil {
		a.afterRead = nil
		f()
	}
	return t, u, err
}

// A token revoked while a request with it authenticates — the revocation
// committed before Authenticate's own locked re-read of the token (the
// read that records its use, A6) — is UNAUTHORIZED: docs/DOMAIN.md A4,
// "once revoked, a token is UNAUTHORIZED". Authenticate judges the token
// it re-reads under lock (Usable), not only that it is still there (the
// sibling for a removed user: TestTokenOfAUserRemovedMidAuthentication
// IsUnauthorized): else it would admit the request and store a last use
// after the token's revocation, and the operator who revoked a leaked
// token would read that it was used afterwards — and it was.
func TestTokenRevokedMidAuthenticationIsUnauthorized(t *testing.T) {
	accountStores(t, func(t *testing.T, inner application.AccountStore, _ ports.AuditLog) {
		clock := &fixedClock{now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
		store := &accountsHookAfterRead{AccountStore: inner}
		a, err := application.NewAccounts(store, clock, local.NewUUIDs(), rootSecret)
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		rel := createUser(t, a, "rel", domain.RoleReleaser)
		cred, err := a.CreateToken(ctx, actorFor(rel), ports.NewAPIToken{Name: "ci", Scopes: []string{"firmware:write"},
			ExpiresAt: clock.now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		revokedAt := clock.now.Add(time.Second)
		store.afterRead = func() {
			clock.now = revokedAt
			if _, err := a.RevokeToken(ctx, actorFor(rel), cred.Token.ID()); err != nil {
				t.Fatal(err)
			}
			clock.now = revokedAt.Add(time.Second)
		}
		p, err := a.Authenticate(ctx, cred.Secret)
		if !errors.Is(err, domain.ErrUnauthorized) {
			t.Errorf("Authenticate with a token revoked before its locked re-read = %v, %v; want domain.ErrUnauthorized", p, err)
		}
		tokens, err := a.ListTokens(ctx, domain.RootPrincipal())
		if err != nil || len(tokens) != 1 {
			t.Fatalf("tokens: %v %v", tokens, err)
		}
		if tok := tokens[0]; tok.LastUsedAt().After(tok.RevokedAt()) {
			t.Errorf("the revoked token's last use is stored as %s, after its revocation at %s", tok.LastUsedAt(), tok.RevokedAt())
		}
	})
}
