package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/console"
	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/tests/testenv"
	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// ssoEnv is accountsEnv with single sign-on at a real OpenID provider
// started for the test.
type ssoEnv struct {
	*accountsEnv
	op *testProvider
}

func newSSOEnv(t *testing.T, defaultRole domain.Role) *ssoEnv {
	t.Helper()
	clk := &clock{}
	svc := testenv.NewMemoryService(t, testenv.MemoryOptions{Clock: clk, Artifacts: true})
	accounts, err := application.NewAccounts(memory.NewAccounts(svc.Store), clk, svc.Deps.IDs, application.RootToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	// The console's address must be known before the console is built:
	// the provider is told where to send browsers back.
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	p := newTestProvider(t, base+console.CallbackPath)
	sso, err := console.NewOIDC(t.Context(), console.OIDCConfig{Issuer: p.srv.URL, ClientID: testClientID,
		ClientSecret: testClientSecret, RedirectURL: base + console.CallbackPath, DefaultRole: defaultRole})
	if err != nil {
		t.Fatal(err)
	}
	limiter := local.NewRateLimiter(1e-9, signInBurst)
	con, err := console.New(console.Config{AdminToken: adminToken, RefreshEvery: time.Second, SignInLimiter: limiter},
		svc.Admin, svc.Fleet, clk, slog.New(slog.NewTextHandler(testWriter{t}, nil)), console.WithArtifacts(svc.Artifacts), console.WithAccounts(accounts), console.WithOIDC(sso))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = rest.NewServer(rest.Config{AdminToken: adminToken}, svc.Devices, svc.Admin, nil, nil, nil, nil,
		rest.WithFleet(svc.Fleet), rest.WithMount(console.Prefix, con), rest.WithAccounts(accounts))
	srv.Start()
	t.Cleanup(srv.Close)
	return &ssoEnv{accountsEnv: &accountsEnv{env: &env{t: t, clock: clk, srv: srv, console: con, admin: svc.Admin,
		devices: svc.Devices, artifacts: svc.Artifacts, client: newClient(t)}, accounts: accounts, fleet: svc.Fleet}, op: p}
}

// fetch GETs an absolute URL with the browser's client.
func (e *ssoEnv) fetch(u string) resp {
	e.t.Helper()
	res, err := e.client.Get(u)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{code: res.StatusCode, body: string(b), header: res.Header}
}

// toCallback starts a sign-in and follows the redirects through the
// provider's login, up to the provider's redirect back to the console,
// which it returns unfollowed.
func (e *ssoEnv) toCallback() *url.URL {
	e.t.Helper()
	u, _ := url.Parse(e.srv.URL + "/console/oidc/start?next=" + url.QueryEscape("/console/rollouts"))
	for range 10 {
		r := e.fetch(u.String())
		if r.code != http.StatusFound && r.code != http.StatusSeeOther {
			e.t.Fatalf("%s: %d, want a redirect: %s", u, r.code, r.body)
		}
		loc, err := u.Parse(r.header.Get("Location"))
		if err != nil {
			e.t.Fatal(err)
		}
		if strings.HasPrefix(loc.String(), e.srv.URL+console.CallbackPath) {
			return loc
		}
		u = loc
	}
	e.t.Fatal("no redirect back to the console")
	return nil
}

// ssoSignIn signs in at the provider, as whoever it was told to sign in,
// and returns the console's answer to the callback.
func (e *ssoEnv) ssoSignIn() resp {
	e.t.Helper()
	return e.fetch(e.toCallback().String())
}

func (e *ssoEnv) mustSSOSignIn() {
	e.t.Helper()
	r := e.ssoSignIn()
	if r.code != http.StatusOK || !strings.Contains(r.body, `href="/console/rollouts"`) {
		e.t.Fatalf("single sign-on: %d %s", r.code, r.body)
	}
}

func (e *ssoEnv) user(name string) (domain.User, bool) {
	e.t.Helper()
	users, err := e.accounts.ListUsers(context.Background(), domain.RootPrincipal())
	if err != nil {
		e.t.Fatal(err)
	}
	i := slices.IndexFunc(users, func(u domain.User) bool { return u.Name() == name })
	if i < 0 {
		return domain.User{}, false
	}
	return users[i], true
}

// wantSignedOut checks that the browser has no session.
func (e *ssoEnv) wantSignedOut(what string) {
	e.t.Helper()
	r := e.get("/console/rollouts")
	if r.code != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/console/sign-in") {
		e.t.Fatalf("%s: the browser has a session (%d %s)", what, r.code, r.header.Get("Location"))
	}
}

// A rollout manager at the provider signs in through the full
// authorization code flow (PKCE S256), becomes the local account
// oidc-alice without a password, opens the rollout pages with the start
// form, is shown no publish form, and is refused (403) publishing
// firmware, a releaser's action, with nothing published.
func TestSSOSignInActsWithinTheClaimedRole(t *testing.T) {
	e := newSSOEnv(t, "")
	if page := e.get("/console/sign-in"); !strings.Contains(page.body, `id="sso" href="/console/oidc/start?next=%2fconsole%2f"`) {
		t.Fatalf("the sign-in page offers no single sign-on:\n%s", page.body)
	}
	e.op.as("alice", "rollout_manager")
	e.mustSSOSignIn()
	if !slices.Equal(e.op.challenges, []oidc.CodeChallengeMethod{oidc.CodeChallengeMethodS256}) {
		t.Errorf("PKCE challenges %v, want one S256", e.op.challenges)
	}
	u, ok := e.user("oidc-alice")
	if !ok || u.Role() != domain.RoleRolloutManager || !u.External() {
		t.Fatalf("provisioned %+v (%v), want the external rollout manager oidc-alice", u, ok)
	}

	page := e.get("/console/rollouts")
	wantStatus(t, "rollouts", page, http.StatusOK)
	if !strings.Contains(page.body, `id="signed-in-as">oidc-alice</span>`) || !strings.Contains(page.body, `id="start-rollout"`) {
		t.Fatalf("a rollout manager's rollouts page:\n%s", page.body)
	}
	firmwares := e.get("/console/firmwares")
	wantStatus(t, "firmwares", firmwares, http.StatusOK)
	if strings.Contains(firmwares.body, `id="publish"`) {
		t.Error("a rollout manager is shown the publish form")
	}
	res := e.post("/console/firmwares", url.Values{"csrf": {e.csrf("/console/firmwares")}, "model": {"cam"}, "version": {"2.0.0"},
		"url": {"https://x.example/a"}, "size_bytes": {"1"}, "sha256": {strings.Repeat("ab", 32)}})
	wantStatus(t, "rollout manager publishes", res, http.StatusForbidden)
	if fws, err := e.admin.ListFirmwares(context.Background(), "cam"); err != nil || len(fws) != 0 {
		t.Fatalf("the refused form published: %v %v", fws, err)
	}

	// The provisioned account has no password to sign in with.
	e.client = newClient(t)
	if r := e.signInAs("oidc-alice", ""); r.code != http.StatusUnauthorized {
		t.Errorf("password sign-in as an SSO user: %d, want 401", r.code)
	}
}

// A callback whose state is not the one its flow's cookie holds is refused,
// and so is one without the cookie: no session, no account.
func TestSSORefusesABadState(t *testing.T) {
	e := newSSOEnv(t, "")
	e.op.as("alice", "rollout_manager")
	cb := e.toCallback()
	q := cb.Query()
	q.Set("state", "forged"+q.Get("state"))
	cb.RawQuery = q.Encode()
	if r := e.fetch(cb.String()); r.code != http.StatusUnauthorized {
		t.Fatalf("forged state: %d, want 401: %s", r.code, r.body)
	}
	e.wantSignedOut("forged state")

	cb = e.toCallback()
	e.client.Jar, _ = nil, e.client.Jar
	if r := e.fetch(cb.String()); r.code != http.StatusUnauthorized {
		t.Fatalf("no flow cookie: %d, want 401", r.code)
	}
	e.client = newClient(t)
	e.wantSignedOut("no flow cookie")
	if _, ok := e.user("oidc-alice"); ok {
		t.Fatal("a refused sign-in provisioned the account")
	}
}

// An ID token signed by the provider but issued for another client, or
// for another sign-in (its nonce), is refused. (The provider always adds
// the client to the audience, so the test re-signs the token it returns
// with the provider's key.)
func TestSSORefusesATokenForAnotherAudienceOrNonce(t *testing.T) {
	for name, change := range map[string]func(map[string]any){
		"audience": func(c map[string]any) { c["aud"] = []string{"another-client"}; c["azp"] = "another-client" },
		"nonce":    func(c map[string]any) { c["nonce"] = "another sign-in's nonce" },
	} {
		t.Run(name, func(t *testing.T) {
			e := newSSOEnv(t, "")
			e.op.as("alice", "admin")
			e.op.rewriteIDToken(change)
			if r := e.ssoSignIn(); r.code != http.StatusUnauthorized {
				t.Fatalf("another %s: %d, want 401: %s", name, r.code, r.body)
			}
			e.wantSignedOut("another " + name)
			if _, ok := e.user("oidc-alice"); ok {
				t.Fatal("a refused sign-in provisioned the account")
			}
			// The same flow without the change signs in: the refusal
			// was the change's.
			e.op.rewriteIDToken(nil)
			e.mustSSOSignIn()
		})
	}
}

// Without a role in its claim a user is refused (403), unless a default
// role is configured; a list claim takes its most trusted role.
func TestSSORoleClaim(t *testing.T) {
	t.Run("missing or invalid", func(t *testing.T) {
		e := newSSOEnv(t, "")
		for _, claim := range []any{nil, "wizard", []any{"root", 7}} {
			e.op.as("bob", claim)
			if r := e.ssoSignIn(); r.code != http.StatusForbidden || !strings.Contains(r.body, "grants no role") {
				t.Fatalf("claim %v: %d, want 403: %s", claim, r.code, r.body)
			}
			e.wantSignedOut("no role")
		}
		if _, ok := e.user("oidc-bob"); ok {
			t.Fatal("a user without a role was provisioned")
		}
	})
	t.Run("default role", func(t *testing.T) {
		e := newSSOEnv(t, domain.RoleViewer)
		e.op.as("bob", nil)
		e.mustSSOSignIn()
		if u, _ := e.user("oidc-bob"); u.Role() != domain.RoleViewer {
			t.Fatalf("role %q, want the default viewer", u.Role())
		}
	})
	t.Run("list", func(t *testing.T) {
		e := newSSOEnv(t, "")
		e.op.as("carol", []any{"viewer", "wizard", "releaser"})
		e.mustSSOSignIn()
		if u, _ := e.user("oidc-carol"); u.Role() != domain.RoleReleaser {
			t.Fatalf("role %q, want releaser", u.Role())
		}
	})
}

// A role changed at the provider takes effect at the next sign-in.
func TestSSORoleChangeAppliesAtNextSignIn(t *testing.T) {
	e := newSSOEnv(t, "")
	e.op.as("alice", "rollout_manager")
	e.mustSSOSignIn()
	e.op.as("alice", "viewer")
	if page := e.get("/console/rollouts"); !strings.Contains(page.body, `id="start-rollout"`) {
		t.Fatal("the role changed before the next sign-in")
	}
	e.mustSSOSignIn()
	page := e.get("/console/rollouts")
	wantStatus(t, "rollouts", page, http.StatusOK)
	if strings.Contains(page.body, `id="start-rollout"`) {
		t.Fatal("a viewer is shown the start-rollout form after signing in again")
	}
	if u, _ := e.user("oidc-alice"); u.Role() != domain.RoleViewer {
		t.Fatalf("stored role %q, want viewer", u.Role())
	}
}

// Removing the provisioned account ends its session at the next request.
func TestSSORemovedUserSessionEnds(t *testing.T) {
	e := newSSOEnv(t, "")
	e.op.as("alice", "rollout_manager")
	e.mustSSOSignIn()
	wantStatus(t, "signed in", e.get("/console/rollouts"), http.StatusOK)
	if err := e.accounts.RemoveUser(context.Background(), testActor, "oidc-alice"); err != nil {
		t.Fatal(err)
	}
	e.wantSignedOut("removed user")
}

// The callback spends the client address's sign-in budget: past it, 429
// with Retry-After before the provider is asked anything.
func TestSSOCallbackIsRateLimited(t *testing.T) {
	e := newSSOEnv(t, "")
	for i := range signInBurst {
		if r := e.get(console.CallbackPath + "?code=x&state=y"); r.code != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d, want 401", i+1, r.code)
		}
	}
	e.op.as("alice", "admin")
	r := e.ssoSignIn()
	if r.code != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("over budget: %d (Retry-After %q), want 429", r.code, r.header.Get("Retry-After"))
	}
	e.wantSignedOut("over budget")
}

// testWriter sends the console's log to the test's, so that a refused
// sign-in says why.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
