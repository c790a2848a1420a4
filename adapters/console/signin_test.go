package console_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/console"
	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

const userPassword = "correct horse battery staple"

// accountsEnv is env with operators' accounts: users sign in with a
// password, and sign-in attempts have a budget of signInBurst.
type accountsEnv struct {
	*env
	accounts *application.Accounts
	fleet    *application.Fleet
	// audit is the audit log the console's page reads: the store's own,
	// unless newAuditEnv gave another (audit_test.go).
	audit ports.AuditLog
}

func serve(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

const signInBurst = 4

func newAccountsEnv(t *testing.T, users map[string]domain.Role) *accountsEnv {
	t.Helper()
	return newAuditEnv(t, users, nil)
}

// newAuditEnv is newAccountsEnv whose audit page reads log (nil: the
// store's records).
func newAuditEnv(t *testing.T, users map[string]domain.Role, log ports.AuditLog) *accountsEnv {
	t.Helper()
	clk := &clock{}
	svc := testenv.NewMemoryService(t, testenv.MemoryOptions{Clock: clk, Artifacts: true})
	accounts, err := application.NewAccounts(memory.NewAccounts(svc.Store), clk, svc.Deps.IDs, application.RootToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	for name, role := range users {
		_, err := accounts.CreateUser(context.Background(), testActor,
			ports.NewUser{Username: name, Role: string(role), Password: userPassword})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A budget that does not refill within a test: the limit is reached
	// by count, not by time.
	limiter := local.NewRateLimiter(1e-9, signInBurst)
	if log == nil {
		log = svc.Store
	}
	audit, err := application.NewAudit(log)
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Config{AdminToken: adminToken, RefreshEvery: time.Second, SignInLimiter: limiter},
		svc.Admin, svc.Fleet, clk, nil, console.WithArtifacts(svc.Artifacts), console.WithAccounts(accounts), console.WithAudit(audit))
	if err != nil {
		t.Fatal(err)
	}
	// The API's password route spends the console's budget, as bootstrap
	// wires it (HTTPOptions).
	e := rest.NewServer(rest.Config{AdminToken: adminToken}, svc.Devices, svc.Admin, nil, nil, nil, nil,
		rest.WithFleet(svc.Fleet), rest.WithMount(console.Prefix, con), rest.WithAccounts(accounts), rest.WithSignInLimiter(limiter))
	srv := serve(t, e)
	return &accountsEnv{env: &env{t: t, clock: clk, srv: srv, console: con, admin: svc.Admin, devices: svc.Devices,
		artifacts: svc.Artifacts, client: newClient(t)}, accounts: accounts, fleet: svc.Fleet, audit: log}
}

func (e *accountsEnv) signInAs(name, password string) resp {
	e.t.Helper()
	return e.post("/console/sign-in", url.Values{"csrf": {e.csrf("/console/sign-in")}, "username": {name},
		"password": {password}, "next": {"/console/rollouts"}})
}

func (e *accountsEnv) mustSignInAs(name string) {
	e.t.Helper()
	if r := e.signInAs(name, userPassword); r.code != http.StatusSeeOther || r.header.Get("Location") != "/console/rollouts" {
		e.t.Fatalf("sign in as %s: %d %s", name, r.code, r.header.Get("Location"))
	}
}

// A releaser signs in with a password, publishes and revokes firmware,
// and is refused starting a rollout (rollouts:write) with nothing started.
func TestPasswordSignInActsWithinRole(t *testing.T) {
	e := newAccountsEnv(t, map[string]domain.Role{"rel": domain.RoleReleaser})
	e.mustSignInAs("rel")

	page := e.get("/console/firmwares")
	wantStatus(t, "firmwares", page, http.StatusOK)
	if !strings.Contains(page.body, `<span class="muted" id="signed-in-as">rel</span>`) {
		t.Error("the page does not say who is signed in")
	}
	if !strings.Contains(page.body, `id="publish"`) || !strings.Contains(page.body, `id="upload-form"`) {
		t.Fatalf("a releaser's firmware page has no publish or upload form:\n%s", page.body)
	}
	token := e.csrf("/console/firmwares")
	res := e.post("/console/firmwares", url.Values{"csrf": {token}, "model": {"cam"}, "version": {"2.0.0"},
		"url": {"https://x.example/a"}, "size_bytes": {"1"}, "sha256": {strings.Repeat("ab", 32)}})
	wantStatus(t, "releaser publishes", res, http.StatusSeeOther)
	fws, err := e.admin.ListFirmwares(context.Background(), "cam")
	if err != nil || len(fws) != 1 {
		t.Fatalf("published: %v %v", fws, err)
	}

	rollouts := e.get("/console/rollouts")
	wantStatus(t, "rollouts", rollouts, http.StatusOK)
	if strings.Contains(rollouts.body, `id="start-rollout"`) {
		t.Fatal("a releaser is shown the start-rollout form")
	}
	res = e.post("/console/rollouts", url.Values{"csrf": {token}, "firmware_id": {fws[0].ID().String()}, "percentage": {"100"}})
	wantStatus(t, "releaser starts a rollout", res, http.StatusForbidden)
	if list, err := e.fleet.ListRollouts(context.Background(), ports.RolloutQuery{}); err != nil || len(list) != 0 {
		t.Fatalf("the refused form started a rollout after all: %v %v", list, err)
	}
}

// A viewer reads every page but may change nothing: each form posted is
// refused with 403 and the fleet is as it was; the pages show no form.
func TestViewerPostsAreRefused(t *testing.T) {
	e := newAccountsEnv(t, map[string]domain.Role{"vic": domain.RoleViewer})
	fw := e.publish("cam", "2.0.0")
	ro := e.startRollout(fw, 10, nil)
	e.mustSignInAs("vic")

	for _, path := range []string{"/console/", "/console/rollouts", "/console/rollouts/" + ro.ID().String(), "/console/firmwares"} {
		page := e.get(path)
		wantStatus(t, path, page, http.StatusOK)
		for _, form := range []string{`id="start-rollout"`, `id="publish"`, `id="upload-form"`, `id="action-pause"`, `/revoke"`} {
			if strings.Contains(page.body, form) {
				t.Errorf("a viewer is shown %s on %s", form, path)
			}
		}
	}
	token := e.csrf("/console/rollouts")
	posts := map[string]url.Values{
		"/console/rollouts/" + ro.ID().String():              {"action": {"pause"}},
		"/console/rollouts":                                  {"firmware_id": {fw.ID().String()}, "percentage": {"50"}},
		"/console/firmwares/" + fw.ID().String() + "/revoke": {},
		"/console/firmwares": {"model": {"cam"}, "version": {"3.0.0"}, "url": {"https://x.example/a"},
			"size_bytes": {"1"}, "sha256": {strings.Repeat("ab", 32)}},
	}
	for path, form := range posts {
		form.Set("csrf", token)
		wantStatus(t, "viewer posts "+path, e.post(path, form), http.StatusForbidden)
	}
	wantStatus(t, "viewer's confirm page", e.get("/console/rollouts/"+ro.ID().String()+"/confirm?action=pause"), http.StatusForbidden)
	if code, _ := e.upload(e.client, "fw.bin", token, []byte("image")); code != http.StatusForbidden {
		t.Errorf("viewer's upload: %d, want 403", code)
	}

	if got := e.rollout(ro.ID().String()); got.Status() != domain.RolloutActive || got.Percentage() != 10 {
		t.Errorf("rollout changed: %s %d%%", got.Status(), got.Percentage())
	}
	fws, _ := e.admin.ListFirmwares(context.Background(), "cam")
	if len(fws) != 1 || fws[0].Revoked() {
		t.Errorf("firmware changed: %v", fws)
	}
}

// Removing a user ends their session at the next request.
func TestRemovedUserSessionEndsAtOnce(t *testing.T) {
	e := newAccountsEnv(t, map[string]domain.Role{"alice": domain.RoleAdmin})
	e.mustSignInAs("alice")
	wantStatus(t, "signed in", e.get("/console/rollouts"), http.StatusOK)
	if err := e.accounts.RemoveUser(context.Background(), testActor, "alice"); err != nil {
		t.Fatal(err)
	}
	res := e.get("/console/rollouts")
	if res.code != http.StatusSeeOther || !strings.HasPrefix(res.header.Get("Location"), "/console/sign-in") {
		t.Fatalf("removed user's session: %d %s, want a redirect to sign in", res.code, res.header.Get("Location"))
	}
}

// A wrong password and an unknown user get the same refusal.
func TestWrongPasswordRefused(t *testing.T) {
	e := newAccountsEnv(t, map[string]domain.Role{"alice": domain.RoleAdmin})
	wrong := e.signInAs("alice", "not the password at all")
	unknown := e.signInAs("mallory", userPassword)
	for _, r := range []resp{wrong, unknown} {
		wantStatus(t, "bad sign-in", r, http.StatusUnauthorized)
		if !strings.Contains(r.body, "The username or password is wrong.") {
			t.Errorf("refusal does not say so:\n%s", r.body)
		}
	}
	if res := e.get("/console/rollouts"); res.code != http.StatusSeeOther {
		t.Fatalf("signed in after a refusal: %d", res.code)
	}
}

// sessionCookie is the client's console session cookie.
func (e *accountsEnv) sessionCookie() *http.Cookie {
	e.t.Helper()
	u, _ := url.Parse(e.srv.URL + "/console/")
	for _, c := range e.client.Jar.Cookies(u) {
		if c.Name == "ota_console" {
			return c
		}
	}
	e.t.Fatal("no session cookie")
	return nil
}

// A cookie whose username was changed, or whose signature was, is no
// session; nor is one past its expiry.
func TestTamperedAndExpiredSessionsRefused(t *testing.T) {
	e := newAccountsEnv(t, map[string]domain.Role{"vic": domain.RoleViewer, "adm": domain.RoleAdmin})
	e.mustSignInAs("vic")
	c := e.sessionCookie()
	p, sig, _ := strings.Cut(c.Value, ".")
	payload, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil || !strings.HasSuffix(string(payload), "vic") {
		t.Fatalf("payload %q: %v", payload, err)
	}
	promoted := base64.RawURLEncoding.EncodeToString(append(payload[:len(payload)-3:len(payload)-3], "adm"...)) + "." + sig
	asRoot := base64.RawURLEncoding.EncodeToString(payload[:len(payload)-3]) + "." + sig
	flipped := p + "." + strings.Map(func(r rune) rune {
		if r == 'A' {
			return 'B'
		}
		return 'A'
	}, sig[:1]) + sig[1:]
	for what, value := range map[string]string{"promoted": promoted, "as root": asRoot, "bad signature": flipped} {
		client := newClient(t)
		u, _ := url.Parse(e.srv.URL + "/console/")
		client.Jar.SetCookies(u, []*http.Cookie{{Name: "ota_console", Value: value, Path: "/console/"}})
		if res := e.do(client, http.MethodGet, "/console/rollouts", nil); res.code != http.StatusSeeOther {
			t.Errorf("%s cookie: %d, want a redirect to sign in", what, res.code)
		}
	}
	wantStatus(t, "genuine cookie", e.get("/console/rollouts"), http.StatusOK)
	e.clock.advance(console.DefaultSessionTTL)
	if res := e.get("/console/rollouts"); res.code != http.StatusSeeOther {
		t.Errorf("expired session: %d, want a redirect to sign in", res.code)
	}
}

// Sign-in attempts beyond the budget are refused with 429 and
// Retry-After, the right password too, until the budget refills.
func TestSignInRateLimited(t *testing.T) {
	e := newAccountsEnv(t, map[string]domain.Role{"alice": domain.RoleAdmin})
	for i := 0; i < signInBurst; i++ {
		wantStatus(t, "wrong password", e.signInAs("alice", "guess number one"), http.StatusUnauthorized)
	}
	res := e.signInAs("alice", userPassword)
	wantStatus(t, "over budget", res, http.StatusTooManyRequests)
	if res.header.Get("Retry-After") == "" || !strings.Contains(res.body, "Too many sign-in attempts") {
		t.Fatalf("429 without Retry-After or words: %v\n%s", res.header, res.body)
	}
	if r := e.get("/console/rollouts"); r.code != http.StatusSeeOther {
		t.Fatalf("signed in over budget: %d", r.code)
	}
	// The admin token from the same address is over the same budget.
	wantStatus(t, "token over budget", e.signIn(adminToken), http.StatusTooManyRequests)
}

// The username's own budget holds whichever address the attempts come
// from: a limiter that refuses only alice's key refuses her sign-in.
func TestSignInBudgetPerUsername(t *testing.T) {
	clk := &clock{}
	svc := testenv.NewMemoryService(t, testenv.MemoryOptions{Clock: clk})
	accounts, err := application.NewAccounts(memory.NewAccounts(svc.Store), clk, svc.Deps.IDs, application.RootToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := accounts.CreateUser(context.Background(), testActor,
		ports.NewUser{Username: "alice", Role: "admin", Password: userPassword}); err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Config{AdminToken: adminToken, SignInLimiter: refuseKeysWith("user:alice")},
		svc.Admin, svc.Fleet, clk, nil, console.WithAccounts(accounts))
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, rest.NewServer(rest.Config{AdminToken: adminToken}, svc.Devices, svc.Admin, nil, nil, nil, nil,
		rest.WithFleet(svc.Fleet), rest.WithMount(console.Prefix, con)))
	e := &accountsEnv{env: &env{t: t, clock: clk, srv: srv, console: con, admin: svc.Admin, client: newClient(t)}}
	wantStatus(t, "alice over her budget", e.signInAs("alice", userPassword), http.StatusTooManyRequests)
	wantStatus(t, "the admin token", e.signIn(adminToken), http.StatusSeeOther)
}

// refuseKeysWith is a limiter that refuses the keys containing s.
type refuseKeysWith string

func (r refuseKeysWith) Allow(key string) (bool, time.Duration) {
	if strings.Contains(key, string(r)) {
		return false, time.Minute
	}
	return true, 0
}
