package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/ai-device/ota/adapters/console"
	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// outageAccounts is the accounts use case over a store that can be made
// unreachable: SessionUser then fails as the Postgres adapter classifies a
// lost connection (domain.ErrServiceBusy).
type outageAccounts struct {
	ports.AccountService
	down atomic.Bool
}

func (a *outageAccounts) SessionUser(ctx context.Context, account domain.AccountRef) (domain.Principal, error) {
	if a.down.Load() {
		return domain.Principal{}, fmt.Errorf("postgres: connection refused: %w", domain.ErrServiceBusy)
	}
	return a.AccountService.SessionUser(ctx, account)
}

// TestSignedInUserDuringAnOutageIsToldBusyNotSignedOut: docs/ERRORS.md
// and RELIABILITY.md — Postgres unreachable is SERVICE_BUSY (503,
// Retry-After), and DOMAIN.md S3 ends a session only when its user is
// removed. A signed-in operator whose account cannot be re-read because
// the database is down is sent to the sign-in page instead (303): told
// they are signed out, their posted form (here, pausing a rollout) thrown
// away, and pushed to type their password into a service that cannot
// check it, spending the sign-in budget.
func TestSignedInUserDuringAnOutageIsToldBusyNotSignedOut(t *testing.T) {
	clk := &clock{}
	svc := testenv.NewMemoryService(t, testenv.MemoryOptions{Clock: clk})
	inner, err := application.NewAccounts(memory.NewAccounts(svc.Store), clk, svc.Deps.IDs, application.RootToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inner.CreateUser(context.Background(), testActor,
		ports.NewUser{Username: "alice", Role: "admin", Password: userPassword}); err != nil {
		t.Fatal(err)
	}
	accounts := &outageAccounts{AccountService: inner}
	con, err := console.New(console.Config{AdminToken: adminToken, SignInLimiter: local.NewRateLimiter(1e-9, signInBurst)},
		svc.Admin, svc.Fleet, clk, nil, console.WithAccounts(accounts))
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, rest.NewServer(rest.Config{AdminToken: adminToken}, svc.Devices, svc.Admin, nil, nil, nil, nil,
		rest.WithFleet(svc.Fleet), rest.WithMount(console.Prefix, con)))
	e := &accountsEnv{env: &env{t: t, clock: clk, srv: srv, console: con, admin: svc.Admin, client: newClient(t)}}
	e.mustSignInAs("alice")
	csrf := e.csrf("/console/rollouts")

	accounts.down.Store(true)
	if r := e.get("/console/rollouts"); r.code != http.StatusServiceUnavailable {
		t.Errorf("GET /console/rollouts with the database down: %d, Location %q; want 503 (SERVICE_BUSY), not a sign-in",
			r.code, r.header.Get("Location"))
	}
	if r := e.get("/console/rollouts"); r.header.Get("Retry-After") == "" {
		t.Error("the console's 503 during the outage sends no Retry-After")
	}
	// Signing out needs no account: it works during the outage, and the
	// session stays ended once the database is back.
	out := e.post("/console/sign-out", url.Values{"csrf": {csrf}})
	accounts.down.Store(false)
	if after := e.get("/console/rollouts"); out.code != http.StatusSeeOther || after.code == http.StatusOK {
		t.Errorf("sign-out with the database down answered %d (Location %q), and once it is back the session serves pages (%d)",
			out.code, out.header.Get("Location"), after.code)
	}
}
