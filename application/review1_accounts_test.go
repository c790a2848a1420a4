package application_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// accountStores runs f on each store the accounts use cases run on: the
// memory store, and Postgres.
func accountStores(t *testing.T, f func(t *testing.T, store application.AccountStore)) {
	t.Run("memory", func(t *testing.T) { f(t, memory.NewAccounts(memory.NewStore())) })
	t.Run("postgres", func(t *testing.T) {
		db, _ := testenv.PostgresDB(t)
		f(t, postgres.NewAccountRepository(db))
	})
}

// A principal authenticated for one account — by an API token, or by the
// password on POST /admin/tokens — that is still in flight when an admin
// removes the account and creates another of the same name (a new hire
// given a freed name, or the same person re-created with another role)
// must not mint a token for the new account. docs/DOMAIN.md A5: removing
// a user removes their tokens and "the next request of any of them is
// 401"; A2: a token belongs to the user who mints it — the removed one,
// not the account created after. ERRORS.md: a token "whose user was
// removed" is UNAUTHORIZED. Today the insert checks the username only
// (ports.AccountTx.PutToken: "its owner must exist"), so the token lands
// on the new account and outlives the removal meant to end the old
// credential: the removed user keeps working access to the new account.
func TestTokenMintedForARemovedAccountDoesNotLandOnItsSuccessor(t *testing.T) {
	accountStores(t, func(t *testing.T, store application.AccountStore) {
		clock := &fixedClock{now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
		a, err := application.NewAccounts(store, clock, local.NewUUIDs(), rootSecret)
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		old := createUser(t, a, "rel", domain.RoleReleaser)
		minter, err := a.CreateToken(ctx, actorFor(old), ports.NewAPIToken{Name: "minter",
			Scopes: []string{"api_tokens:write", "firmware:write"}, ExpiresAt: clock.now.Add(24 * time.Hour)})
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
// "once revoked, a token is UNAUTHORIZED". Authenticate re-reads the token
// under lock and sees the revocation, yet only checks "not found" (the
// sibling fix for a removed user, TestTokenOfAUserRemovedMidAuthentication
// IsUnauthorized), admits the request and stores a last use after the
// token's revocation: the operator who revoked a leaked token reads that
// it was used afterwards — and it was.
func TestTokenRevokedMidAuthenticationIsUnauthorized(t *testing.T) {
	accountStores(t, func(t *testing.T, inner application.AccountStore) {
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

// docs/DOMAIN.md S8: the role comes from the provider's claim "and is
// stored at every sign-in: a change at the provider applies from the
// user's next sign-in" — a session already running acts with the stored
// role (S3). Demoting an SSO admin to viewer at the provider does that: at
// their next sign-in every session of theirs is a viewer's. Withdrawing
// every role at the provider is the stronger change, yet it applies to
// nothing: the next sign-in is refused 403 before the account is touched,
// so the stored role stays admin and the user's other running sessions
// keep acting as admin until they expire (8 h).
func TestSSORoleWithdrawnAtTheProviderDoesNotLeaveTheStoredRoleActing(t *testing.T) {
	accountStores(t, func(t *testing.T, store application.AccountStore) {
		clock := &fixedClock{now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
		a, err := application.NewAccounts(store, clock, local.NewUUIDs(), rootSecret)
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		signIn := func(sub string, roles []string) (domain.Principal, error) {
			return a.SignInExternal(ctx, ports.ExternalIdentity{Subject: sub, Roles: roles})
		}
		// Two admins signed in by SSO at 12:00, each with a running session.
		issued := clock.now
		for _, sub := range []string{"dora", "erin"} {
			if _, err := signIn(sub, []string{"admin"}); err != nil {
				t.Fatal(err)
			}
		}
		// At the provider, dora is demoted to viewer, and erin loses every
		// role here; both sign in again ten minutes later.
		clock.now = clock.now.Add(10 * time.Minute)
		if _, err := signIn("dora", []string{"viewer"}); err != nil {
			t.Fatal(err)
		}
		if _, err := signIn("erin", nil); !errors.Is(err, domain.ErrForbidden) {
			t.Fatalf("SSO sign-in of a user granted no role: %v, want domain.ErrForbidden", err)
		}
		if p, err := a.SessionUser(ctx, "oidc-dora", issued); err != nil || p.Can(domain.PermUsersWrite) {
			t.Fatalf("dora's 12:00 session after her demotion: %v %v, want a viewer's", p, err)
		}
		if p, err := a.SessionUser(ctx, "oidc-erin", issued); err == nil && p.Can(domain.PermUsersWrite) {
			t.Errorf("erin's 12:00 session after the provider withdrew every role and refused her sign-in still acts as admin (%v); "+
				"want it ended, or at least no more than the demoted dora's", p.Permissions().List())
		}
	})
}
