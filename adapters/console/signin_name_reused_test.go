package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/console"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// accountsAfterPassword is the accounts use cases with a hook run once
// right after a password was checked (Accounts.SignIn): what an admin's
// requests commit while the sign-in form's argon2id hash is computed.
type accountsAfterPassword struct {
	*application.Accounts
	afterSignIn func()
}

func (a *accountsAfterPassword) SignIn(ctx context.Context, username, password string) (domain.Principal, error) {
	p, err := a.Accounts.SignIn(ctx, username, password)
	if f := a.afterSignIn; f != nil {
		a.afterSignIn = nil
		f()
	}
	return p, err
}

// A password checked against an account that is removed, and whose name
// is given to a new account, before the session starts must not sign its
// holder in as the new account. docs/DOMAIN.md S3: "an account created
// later under the same name is another account"; the removed account's
// password is not the new one's. The session's cookie names the very
// account the password was checked against (its name and creation time,
// domain.AccountRef), and Accounts.SessionUser admits only that account.
// An issue time alone would not do: the console writes it after the
// password check, so the session would look issued after the new account
// was created, and the removed viewer would act as the new admin.
func TestPasswordCheckedBeforeTheNameIsReusedDoesNotSignInAsTheNewAccount(t *testing.T) {
	clk := &clock{}
	svc := testenv.NewMemoryService(t, testenv.MemoryOptions{Clock: clk})
	inner, err := application.NewAccounts(memory.NewAccounts(svc.Store), clk, svc.Deps.IDs, application.RootToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := inner.CreateUser(ctx, testActor, ports.NewUser{Username: "bob", Role: string(domain.RoleViewer), Password: userPassword}); err != nil {
		t.Fatal(err)
	}
	accounts := &accountsAfterPassword{Accounts: inner}
	audit, err := application.NewAudit(svc.Store)
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Config{AdminToken: adminToken, RefreshEvery: time.Second}, svc.Admin, svc.Fleet, clk, nil,
		console.WithAccounts(accounts), console.WithAudit(audit))
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, rest.NewServer(rest.Config{AdminToken: adminToken}, svc.Devices, svc.Admin, nil, nil, nil, nil,
		rest.WithFleet(svc.Fleet), rest.WithMount(console.Prefix, con), rest.WithAccounts(accounts)))
	e := &env{t: t, clock: clk, srv: srv, console: con, admin: svc.Admin, devices: svc.Devices, client: newClient(t)}

	// While bob's password is being checked, an admin removes bob and,
	// two seconds later, gives the name to a new admin with their own
	// password.
	accounts.afterSignIn = func() {
		if err := inner.RemoveUser(ctx, testActor, "bob"); err != nil {
			t.Fatal(err)
		}
		clk.advance(2 * time.Second)
		if _, err := inner.CreateUser(ctx, testActor, ports.NewUser{Username: "bob", Role: string(domain.RoleAdmin),
			Password: "the new bob's own password"}); err != nil {
			t.Fatal(err)
		}
	}
	e.post("/console/sign-in", url.Values{"csrf": {e.csrf("/console/sign-in")}, "username": {"bob"},
		"password": {userPassword}, "next": {"/console/audit"}})

	res := e.get("/console/audit")
	if res.code != http.StatusSeeOther || !strings.HasPrefix(res.header.Get("Location"), "/console/sign-in") {
		t.Fatalf("the removed viewer's password signed in as the new admin bob: GET /console/audit = %d (Location %q); "+
			"want a redirect to sign in", res.code, res.header.Get("Location"))
	}
}
