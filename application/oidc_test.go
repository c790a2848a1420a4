package application_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
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
	if s, err := a.SessionUser(ctx, domain.NewAccountRef("oidc-alice", clock.now)); err != nil || s.Can(domain.PermRolloutsWrite) || !s.Can(domain.PermRead) {
		t.Fatalf("after the role changed at the provider: %v %v, want a viewer", s, err)
	}

	if _, err := signIn("bob", []string{"wizard"}, ""); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("no valid role: %v, want ErrForbidden", err)
	}
	if _, err := a.SessionUser(ctx, domain.NewAccountRef("oidc-bob", clock.now)); !errors.Is(err, domain.ErrUnauthorized) {
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
	if s, err := a.SessionUser(ctx, domain.NewAccountRef("oidc-carol", clock.now)); err != nil || s.Can(domain.PermUsersWrite) {
		t.Fatalf("the password account changed: %v %v", s, err)
	}

	if err := a.RemoveUser(ctx, testActor, "oidc-alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SessionUser(ctx, domain.NewAccountRef("oidc-alice", clock.now)); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("a removed SSO user's session: %v", err)
	}
}

// failingAccounts is the in-memory accounts whose transactions fail.
type failingAccounts struct {
	*memory.Accounts
	err error
}

func (f failingAccounts) InAccountTx(context.Context, func(ports.AccountTx) error) error {
	return f.err
}

// The same rules over the in-memory accounts, without a database: who the
// provider vouched for, with which role, and never over a password
// account or past a store that failed.
func TestSignInExternal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := &fixedClock{now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	store := memory.NewAccounts(memory.NewStore())
	a, err := application.NewAccounts(store, clock, local.NewUUIDs(), rootSecret)
	if err != nil {
		t.Fatal(err)
	}
	signIn := func(sub string, roles []string, def domain.Role) (domain.Principal, error) {
		return a.SignInExternal(ctx, ports.ExternalIdentity{Subject: sub, Roles: roles, DefaultRole: def})
	}

	if _, err := signIn("", []string{"admin"}, ""); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("no subject: %v, want ErrUnauthorized", err)
	}
	p, err := signIn("alice", []string{"rollout_manager"}, domain.RoleViewer)
	if name, _ := p.Username(); err != nil || name != "oidc-alice" || !p.Can(domain.PermRolloutsWrite) || p.Can(domain.PermFirmwareWrite) {
		t.Fatalf("a claimed role with a default: %v %v, want the claimed role", p, err)
	}
	if s, err := a.SessionUser(ctx, domain.NewAccountRef("oidc-alice", clock.now)); err != nil || !s.Can(domain.PermRolloutsWrite) {
		t.Fatalf("the provisioned account: %v %v", s, err)
	}
	if _, err := signIn("bob", []string{"wizard"}, ""); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("no valid role, no default: %v, want ErrForbidden", err)
	}
	if _, err := a.SessionUser(ctx, domain.NewAccountRef("oidc-bob", clock.now)); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("a refused user was provisioned: %v", err)
	}
	if p, err := signIn("bob", []string{"wizard"}, domain.RoleReleaser); err != nil || !p.Can(domain.PermFirmwareWrite) || p.Can(domain.PermUsersWrite) {
		t.Errorf("default role: %v %v", p, err)
	}

	if _, err := signIn("erin", nil, "wizard"); err == nil {
		t.Error("signed in with a default role that is none")
	}
	if _, err := a.SessionUser(ctx, domain.NewAccountRef("oidc-erin", clock.now)); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("a user with no valid role was provisioned: %v", err)
	}

	if err := store.InsertUser(ctx, domain.RehydrateUser("oidc-carol", domain.RoleViewer, "a-hash", clock.now)); err != nil {
		t.Fatal(err)
	}
	if _, err := signIn("carol", []string{"admin"}, ""); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("SSO over a password account: %v, want ErrForbidden", err)
	}
	// Nor does a provider granting no role remove it: it is not an SSO
	// account (docs/DOMAIN.md S8).
	if _, err := signIn("carol", nil, ""); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("SSO granting no role over a password account: %v, want ErrForbidden", err)
	}
	if users, _ := store.Users(ctx); !slices.ContainsFunc(users, func(u domain.User) bool { return u.Name() == "oidc-carol" && !u.External() }) {
		t.Errorf("an SSO sign-in granted no role removed the password account oidc-carol: %v", users)
	}

	boom := errors.New("boom")
	down, err := application.NewAccounts(failingAccounts{Accounts: store, err: boom}, clock, local.NewUUIDs(), rootSecret)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := down.SignInExternal(ctx, ports.ExternalIdentity{Subject: "dave", Roles: []string{"admin"}}); !errors.Is(err, boom) ||
		errors.Is(err, domain.ErrForbidden) || p.Can(domain.PermRead) {
		t.Errorf("a failing store: %v %v", p, err)
	}
}

// docs/DOMAIN.md S8: the role comes from the provider's claim "and is
// stored at every sign-in: a change at the provider applies from the
// user's next sign-in" — a session already running acts with the stored
// role (S3). Demoting an SSO admin to viewer at the provider does that: at
// their next sign-in every session of theirs is a viewer's. Withdrawing
// every role at the provider is the stronger change: the next sign-in is
// refused 403 and removes the account, so that the user's other running
// sessions end rather than keep acting with the stored admin role until
// they expire (8 h). The removal is audited as one.
func TestSSORoleWithdrawnAtTheProviderDoesNotLeaveTheStoredRoleActing(t *testing.T) {
	accountStores(t, func(t *testing.T, store application.AccountStore, audit ports.AuditLog) {
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
		session := map[string]domain.AccountRef{}
		for _, sub := range []string{"dora", "erin"} {
			p, err := signIn(sub, []string{"admin"})
			if err != nil {
				t.Fatal(err)
			}
			session[sub], _ = p.Account()
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
		if p, err := a.SessionUser(ctx, session["dora"]); err != nil || p.Can(domain.PermUsersWrite) {
			t.Fatalf("dora's 12:00 session after her demotion: %v %v, want a viewer's", p, err)
		}
		if p, err := a.SessionUser(ctx, session["erin"]); err == nil && p.Can(domain.PermUsersWrite) {
			t.Errorf("erin's 12:00 session after the provider withdrew every role and refused her sign-in still acts as admin (%v); "+
				"want it ended, or at least no more than the demoted dora's", p.Permissions().List())
		}
		// The removal is recorded, as a removal, in its transaction.
		removals := func() []ports.AuditEntry {
			t.Helper()
			es, err := audit.ListAudit(ctx, ports.AuditFilter{Action: domain.AuditUserRemove})
			if err != nil {
				t.Fatal(err)
			}
			return es
		}
		es := removals()
		var before struct{ Role string }
		if len(es) == 1 {
			_ = json.Unmarshal(es[0].Record.Before(), &before)
		}
		if len(es) != 1 || es[0].Record.Target() != "oidc-erin" || es[0].Record.Actor() != "user:oidc-erin" || before.Role != "admin" {
			t.Errorf("audit records of removals: %+v, want one removing the admin oidc-erin", es)
		}
		// Refused again, with nothing left to remove: nothing more recorded.
		if _, err := signIn("erin", nil); !errors.Is(err, domain.ErrForbidden) {
			t.Fatalf("a second SSO sign-in granted no role: %v, want domain.ErrForbidden", err)
		}
		if es := removals(); len(es) != 1 {
			t.Errorf("a refused sign-in of no account recorded a removal: %d removals, want the one", len(es))
		}
	})
}
