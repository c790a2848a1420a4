package application_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

const rootSecret = "root-secret-0123456789"

func newAccounts(t *testing.T) (*application.Accounts, *fixedClock) {
	t.Helper()
	clock := &fixedClock{now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	a, err := application.NewAccounts(memory.NewAccounts(memory.NewStore()), clock, local.NewUUIDs(), rootSecret)
	if err != nil {
		t.Fatal(err)
	}
	return a, clock
}

func createUser(t *testing.T, a *application.Accounts, name string, role domain.Role) domain.Principal {
	t.Helper()
	ctx := t.Context()
	if _, err := a.CreateUser(ctx, testActor, ports.NewUser{Username: name, Role: string(role), Password: "correct horse battery"}); err != nil {
		t.Fatal(err)
	}
	p, err := a.SignIn(ctx, name, "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAccountsAuthenticate(t *testing.T) {
	a, clock := newAccounts(t)
	ctx := t.Context()
	if p, err := a.Authenticate(ctx, rootSecret); err != nil || !p.IsRoot() {
		t.Fatalf("root: %v, %v", p, err)
	}
	for _, bad := range []string{"", "root-secret-012345678", domain.APITokenPrefix + "nope", "dev_x"} {
		if _, err := a.Authenticate(ctx, bad); !errors.Is(err, domain.ErrUnauthorized) {
			t.Errorf("Authenticate(%q) = %v", bad, err)
		}
	}
	if _, err := a.SignIn(ctx, "nobody", "correct horse battery"); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("unknown user: %v", err)
	}
	rel := createUser(t, a, "rel", domain.RoleReleaser)
	if _, err := a.SignIn(ctx, "rel", "correct horse batterz"); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("wrong password: %v", err)
	}
	cred, err := a.CreateToken(ctx, actorFor(rel), ports.NewAPIToken{Name: "ci", Scopes: []string{"artifacts:write", "firmware:write"}, ExpiresAt: clock.now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate(ctx, cred.Secret)
	if err != nil || !p.Can(domain.PermFirmwareWrite) || p.Can(domain.PermRead) {
		t.Fatalf("token principal %v (%v), %v", p, p.Permissions().List(), err)
	}
	tokens, err := a.ListTokens(ctx, rel)
	if err != nil || len(tokens) != 1 || !tokens[0].LastUsedAt().Equal(clock.now) {
		t.Fatalf("last use not recorded: %+v, %v", tokens, err)
	}
	clock.now = clock.now.Add(time.Hour)
	if _, err := a.Authenticate(ctx, cred.Secret); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("an expired token: %v", err)
	}
}

// TestAccountsEscalationRefused: nobody gets more than they have.
func TestAccountsEscalationRefused(t *testing.T) {
	a, clock := newAccounts(t)
	ctx := t.Context()
	rel := createUser(t, a, "rel", domain.RoleReleaser)
	in := clock.now.Add(time.Hour)

	if _, err := a.CreateUser(ctx, actorFor(rel), ports.NewUser{Username: "mallory", Role: "admin", Password: "correct horse battery"}); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("a releaser creating a user: %v", err)
	}
	if users, _ := a.ListUsers(ctx, domain.RootPrincipal()); len(users) != 1 {
		t.Errorf("a refused creation left %d users", len(users))
	}
	if _, err := a.CreateToken(ctx, actorFor(rel), ports.NewAPIToken{Name: "x", Scopes: []string{"users:write"}, ExpiresAt: in}); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("a releaser's token with users:write: %v", err)
	}
	cred, err := a.CreateToken(ctx, actorFor(rel), ports.NewAPIToken{Name: "minter", Scopes: []string{"api_tokens:write", "firmware:write"}, ExpiresAt: in})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := a.Authenticate(ctx, cred.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateToken(ctx, actorFor(tok), ports.NewAPIToken{Name: "wider", Scopes: []string{"firmware:write", "artifacts:write"}, ExpiresAt: in}); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("a token minting a wider token: %v", err)
	}
	if _, err := a.CreateToken(ctx, actorFor(tok), ports.NewAPIToken{Name: "narrower", Scopes: []string{"firmware:write"}, ExpiresAt: in}); err != nil {
		t.Errorf("a token minting a narrower token: %v", err)
	}
	if _, err := a.CreateToken(ctx, testActor, ports.NewAPIToken{Name: "root", Scopes: []string{"read"}, ExpiresAt: in}); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("root minting a token: %v", err)
	}
	// Another user's token is not theirs to revoke, nor to see.
	viewer := createUser(t, a, "vic", domain.RoleViewer)
	if _, err := a.RevokeToken(ctx, actorFor(viewer), cred.Token.ID()); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("revoking another user's token: %v", err)
	}
	if ts, err := a.ListTokens(ctx, viewer); err != nil || len(ts) != 0 {
		t.Errorf("a viewer sees %d tokens of others, %v", len(ts), err)
	}
	if _, err := a.Authenticate(ctx, cred.Secret); err != nil {
		t.Errorf("a refused revocation revoked: %v", err)
	}
	if _, err := a.RevokeToken(ctx, actorFor(rel), cred.Token.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, cred.Secret); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("a revoked token: %v", err)
	}
}

// TestAccountsRemovalEndsTokensAtOnce: the next request of a removed
// user's token is refused.
func TestAccountsRemovalEndsTokensAtOnce(t *testing.T) {
	a, clock := newAccounts(t)
	ctx := t.Context()
	rel := createUser(t, a, "rel", domain.RoleReleaser)
	cred, err := a.CreateToken(ctx, actorFor(rel), ports.NewAPIToken{Name: "ci", Scopes: []string{"firmware:write"}, ExpiresAt: clock.now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, cred.Secret); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveUser(ctx, testActor, "rel"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, cred.Secret); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("a removed user's token: %v, want ErrUnauthorized", err)
	}
	if err := a.RemoveUser(ctx, testActor, "rel"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("removing twice: %v", err)
	}
	if _, err := a.CreateUser(ctx, testActor, ports.NewUser{Username: "ada", Role: "admin", Password: "correct horse battery"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateUser(ctx, testActor, ports.NewUser{Username: "ada", Role: "viewer", Password: "correct horse battery"}); !errors.Is(err, domain.ErrUserExists) {
		t.Errorf("a second ada: %v", err)
	}
}

// A session's user is re-read: their current role's principal while the
// account exists, ErrUnauthorized from the moment it is removed.
func TestAccountsSessionUser(t *testing.T) {
	a, clock := newAccounts(t)
	ctx := t.Context()
	vic, _ := createUser(t, a, "vic", domain.RoleViewer).Account()
	p, err := a.SessionUser(ctx, vic)
	if err != nil || p.String() != "user:vic" || p.Can(domain.PermFirmwareWrite) || !p.Can(domain.PermRead) {
		t.Fatalf("vic's session: %v %v", p, err)
	}
	if _, err := a.SessionUser(ctx, domain.NewAccountRef("nobody", clock.now)); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("an unknown user's session: %v, want ErrUnauthorized", err)
	}
	if err := a.RemoveUser(ctx, testActor, "vic"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SessionUser(ctx, vic); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("a removed user's session: %v, want ErrUnauthorized", err)
	}
	// A new account of the name is another account: a session of the
	// removed one is not its, even within the second the new one was
	// created (the creation time names an account to the microsecond).
	clock.now = clock.now.Add(500 * time.Millisecond)
	newVic, _ := createUser(t, a, "vic", domain.RoleAdmin).Account()
	if _, err := a.SessionUser(ctx, vic); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("a session of the removed account of the name: %v, want ErrUnauthorized", err)
	}
	if p, err := a.SessionUser(ctx, newVic); err != nil || !p.Can(domain.PermUsersWrite) {
		t.Errorf("a session of the new account: %v %v, want the account's", p, err)
	}
}

// actorFor is p acting in a test request.
func actorFor(p domain.Principal) domain.Actor {
	a, err := domain.NewActor(p, "test", "127.0.0.1")
	if err != nil {
		panic(err)
	}
	return a
}

// TestAccountChangesAreAudited: each account change keeps its audit record,
// naming who did what to which account, and a refused change keeps none.
func TestAccountChangesAreAudited(t *testing.T) {
	ctx := t.Context()
	store := memory.NewStore()
	clock := &fixedClock{now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	a, err := application.NewAccounts(memory.NewAccounts(store), clock, local.NewUUIDs(), rootSecret)
	if err != nil {
		t.Fatal(err)
	}
	rel := createUser(t, a, "rel", domain.RoleReleaser)
	cred, err := a.CreateToken(ctx, actorFor(rel), ports.NewAPIToken{Name: "ci", Scopes: []string{"firmware:write"}, ExpiresAt: clock.now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateUser(ctx, testActor, ports.NewUser{Username: "rel", Role: "viewer", Password: "correct horse battery"}); err == nil {
		t.Fatal("a second user named rel was created")
	}
	if _, err := a.RevokeToken(ctx, actorFor(rel), cred.Token.ID()); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveUser(ctx, testActor, "rel"); err != nil {
		t.Fatal(err)
	}
	entries, err := store.ListAudit(ctx, ports.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, string(e.Record.Action())+" "+e.Record.Target()+" by "+e.Record.Actor())
	}
	want := []string{"user.remove rel by root", "api_token.revoke " + cred.Token.ID().String() + " by user:rel", "api_token.create " + cred.Token.ID().String() + " by user:rel", "user.create rel by root"}
	if !slices.Equal(got, want) {
		t.Fatalf("the audit log, newest first:\n%q\nwant\n%q", got, want)
	}
	// A removal says who was removed: the account as it was.
	if b := string(entries[0].Record.Before()); b != `{"role":"releaser"}` {
		t.Errorf("user.remove's before = %s, want the removed account's role", b)
	}
}
