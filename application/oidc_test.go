package application_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// Single sign-on over the Postgres accounts: the provider's user becomes
// a local account without a password, whose role follows the claim at each
// sign-in, refused without a role unless a default is set, never taking
// over a password account, and gone with its sessions once removed.
func TestSignInExternalOnPostgres(t *testing.T) {
	db, _ := testenv.PostgresDB(t)
	store := postgres.NewAccountRepository(db)
	clock := &fixedClock{now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	a, err := application.NewAccounts(store, clock, local.NewUUIDs(), rootSecret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	signIn := func(sub string, roles []string, def domain.Role) (domain.Principal, error) {
		return a.SignInExternal(ctx, ports.ExternalIdentity{Subject: sub, Roles: roles, DefaultRole: def})
	}

	p, err := signIn("alice", []string{"rollout_manager"}, "")
	if name, _ := p.Username(); err != nil || name != "oidc-alice" || !p.Can(domain.PermRolloutsWrite) || p.Can(domain.PermFirmwareWrite) {
		t.Fatalf("first sign-in: %v %v", p, err)
	}
	if _, err := a.SignIn(ctx, "oidc-alice", ""); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("password sign-in as an SSO user: %v", err)
	}
	if _, err := signIn("alice", []string{"viewer"}, ""); err != nil {
		t.Fatal(err)
	}
	if s, err := a.SessionUser(ctx, "oidc-alice"); err != nil || s.Can(domain.PermRolloutsWrite) || !s.Can(domain.PermRead) {
		t.Fatalf("after the role changed at the provider: %v %v, want a viewer", s, err)
	}

	if _, err := signIn("bob", []string{"wizard"}, ""); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("no valid role: %v, want ErrForbidden", err)
	}
	if _, err := a.SessionUser(ctx, "oidc-bob"); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("a refused user was provisioned: %v", err)
	}
	if p, err := signIn("bob", nil, domain.RoleReleaser); err != nil || !p.Can(domain.PermFirmwareWrite) {
		t.Fatalf("default role: %v %v", p, err)
	}

	// A password account made under a now-reserved name stays its owner's.
	hash, err := domain.HashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	err = store.InAccountTx(ctx, func(tx ports.AccountTx) error {
		return tx.InsertUser(ctx, domain.RehydrateUser("oidc-carol", domain.RoleViewer, hash, clock.now))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signIn("carol", []string{"admin"}, ""); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("SSO over a password account: %v, want ErrForbidden", err)
	}
	if s, err := a.SessionUser(ctx, "oidc-carol"); err != nil || s.Can(domain.PermUsersWrite) {
		t.Fatalf("the password account changed: %v %v", s, err)
	}

	if err := a.RemoveUser(ctx, testActor, "oidc-alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SessionUser(ctx, "oidc-alice"); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("a removed SSO user's session: %v", err)
	}
}
