package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
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

// fakeWebhooks is ports.WebhookService over a map, on the domain's
// subscription (its rules answer as the real service's would); it
// records each change with who made it.
type fakeWebhooks struct {
	mu      sync.Mutex
	subs    map[domain.UUID]domain.WebhookSubscription
	n       int
	calls   []string
	actors  []string
	clock   ports.Clock
	deliver []ports.WebhookDelivery
}

func newFakeWebhooks(clock ports.Clock) *fakeWebhooks {
	return &fakeWebhooks{subs: map[domain.UUID]domain.WebhookSubscription{}, clock: clock}
}

func (f *fakeWebhooks) record(call string, actor domain.Actor) {
	f.calls = append(f.calls, call)
	f.actors = append(f.actors, actor.Principal().String())
}

func (f *fakeWebhooks) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeWebhooks) get(id domain.UUID) (domain.WebhookSubscription, error) {
	s, ok := f.subs[id]
	if !ok {
		return s, fmt.Errorf("webhook: %w", domain.ErrNotFound)
	}
	return s, nil
}

func (f *fakeWebhooks) CreateWebhook(_ context.Context, actor domain.Actor, req ports.NewWebhook) (ports.WebhookCredentials, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("CreateWebhook", actor)
	f.n++
	s, err := domain.NewWebhookSubscription(asUUID(fmt.Sprintf("00000000-0000-4000-8000-%012d", f.n)), req.URL, req.EventTypes, req.Secret, f.clock.Now())
	if err != nil {
		return ports.WebhookCredentials{}, err
	}
	f.subs[s.ID()] = s
	return ports.WebhookCredentials{Subscription: s, Secret: s.Secret()}, nil
}

func (f *fakeWebhooks) ListWebhooks(context.Context) ([]domain.WebhookSubscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []domain.WebhookSubscription
	for _, s := range f.subs {
		out = append(out, s)
	}
	return out, nil
}

func (f *fakeWebhooks) GetWebhook(_ context.Context, id domain.UUID) (domain.WebhookSubscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.get(id)
}

func (f *fakeWebhooks) ChangeWebhook(_ context.Context, actor domain.Actor, id domain.UUID, c ports.WebhookChange) (ports.WebhookCredentials, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("ChangeWebhook", actor)
	s, err := f.get(id)
	if err != nil {
		return ports.WebhookCredentials{}, err
	}
	if err := s.Change(c.URL, c.EventTypes, c.Enabled, f.clock.Now()); err != nil {
		return ports.WebhookCredentials{}, err
	}
	cred := ports.WebhookCredentials{Subscription: s}
	if c.RotateSecret {
		if err := s.RotateSecret(c.NewSecret, f.clock.Now()); err != nil {
			return ports.WebhookCredentials{}, err
		}
		cred = ports.WebhookCredentials{Subscription: s, Secret: s.Secret()}
	}
	f.subs[id] = s
	return cred, nil
}

func (f *fakeWebhooks) DeleteWebhook(_ context.Context, actor domain.Actor, id domain.UUID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("DeleteWebhook", actor)
	if _, err := f.get(id); err != nil {
		return err
	}
	delete(f.subs, id)
	return nil
}

func (f *fakeWebhooks) Deliveries(_ context.Context, id domain.UUID, _, _ string) (ports.DeliveryPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.get(id); err != nil {
		return ports.DeliveryPage{}, err
	}
	return ports.DeliveryPage{Items: slices.Clone(f.deliver)}, nil
}

func (f *fakeWebhooks) SendTestEvent(_ context.Context, actor domain.Actor, id domain.UUID) (domain.UUID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("SendTestEvent", actor)
	if _, err := f.get(id); err != nil {
		return domain.UUID{}, err
	}
	ev := asUUID("7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d")
	f.deliver = append([]ports.WebhookDelivery{{ID: int64(len(f.deliver) + 1), EventID: ev, EventType: domain.EventTest,
		Status: ports.DeliveryPending, Attempts: 1, NextAttemptAt: f.clock.Now().Add(time.Minute), LastAttemptAt: f.clock.Now(),
		LastStatusCode: 503, LastError: "503 Service Unavailable", CreatedAt: f.clock.Now()}}, f.deliver...)
	return ev, nil
}

// newWebhooksEnv is newAccountsEnv's console with the webhook pages.
func newWebhooksEnv(t *testing.T, users map[string]domain.Role) (*accountsEnv, *fakeWebhooks) {
	t.Helper()
	clk := &clock{}
	svc := testenv.NewMemoryService(t, testenv.MemoryOptions{Clock: clk})
	accounts, err := application.NewAccounts(memory.NewAccounts(svc.Store), clk, svc.Deps.IDs, application.RootToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	for name, role := range users {
		if _, err := accounts.CreateUser(context.Background(), testActor, ports.NewUser{Username: name, Role: string(role), Password: userPassword}); err != nil {
			t.Fatal(err)
		}
	}
	hooks := newFakeWebhooks(clk)
	con, err := console.New(console.Config{AdminToken: adminToken, RefreshEvery: time.Second, SignInLimiter: local.NewRateLimiter(1e-9, 100)},
		svc.Admin, svc.Fleet, clk, nil, console.WithAccounts(accounts), console.WithWebhooks(hooks))
	if err != nil {
		t.Fatal(err)
	}
	e := rest.NewServer(rest.Config{AdminToken: adminToken}, svc.Devices, svc.Admin, nil, nil, nil, nil,
		rest.WithFleet(svc.Fleet), rest.WithMount(console.Prefix, con), rest.WithAccounts(accounts))
	return &accountsEnv{env: &env{t: t, clock: clk, srv: serve(t, e), console: con, admin: svc.Admin, devices: svc.Devices,
		client: newClient(t)}, accounts: accounts, fleet: svc.Fleet}, hooks
}

var secretOnPage = regexp.MustCompile(`<code id="secret">([^<]+)</code>`)

// An admin subscribes an endpoint (its secret shown on that answer only),
// sees it listed, disables it, rotates its secret (the new one shown
// once), sends a test event that appears in the delivery log, and deletes
// it after a confirmation; every change is made as the signed-in admin.
func TestConsoleWebhooksLifecycle(t *testing.T) {
	e, hooks := newWebhooksEnv(t, map[string]domain.Role{"ada": domain.RoleAdmin})
	e.mustSignInAs("ada")
	list := e.get("/console/webhooks")
	wantStatus(t, "list", list, http.StatusOK)
	if !strings.Contains(list.body, `href="/console/webhooks" class="on"`) {
		t.Error("the navigation has no Webhooks entry for an admin")
	}
	csrf := e.csrf("/console/webhooks")

	bad := e.post("/console/webhooks", url.Values{"csrf": {csrf}, "url": {"ftp://hooks.example.com/"}, "event_types": {"task.failed"}})
	wantStatus(t, "bad url", bad, http.StatusBadRequest)
	wantBody(t, "bad url", bad, `<span class="error" id="url-error">`, `value="task.failed" checked`)

	made := e.post("/console/webhooks", url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/ota"},
		"event_types": {"task.failed", "rollout.paused"}})
	wantStatus(t, "create", made, http.StatusCreated)
	m := secretOnPage.FindStringSubmatch(made.body)
	if m == nil || !strings.HasPrefix(m[1], "whsec_") {
		t.Fatalf("the creation shows no secret:\n%s", made.body)
	}
	secret := m[1]
	subs, _ := hooks.ListWebhooks(context.Background())
	if len(subs) != 1 {
		t.Fatalf("%d subscriptions", len(subs))
	}
	id := subs[0].ID().String()
	list = e.get("/console/webhooks")
	wantBody(t, "list", list, `id="webhook-`+id+`"`, "https://hooks.example.com/ota", "rollout.paused")
	if strings.Contains(list.body, secret) {
		t.Error("the list shows the secret again")
	}

	page := "/console/webhooks/" + id
	res := e.post(page, url.Values{"csrf": {csrf}, "action": {"disable"}})
	if res.code != http.StatusSeeOther || res.header.Get("Location") != page+"?done=disable" {
		t.Fatalf("disable: %d %s", res.code, res.header.Get("Location"))
	}
	detail := e.get(page + "?done=disable")
	wantBody(t, "disabled", detail, `<dd id="status">disabled</dd>`, `id="enable"`, "Subscription disabled")

	rotated := e.post(page, url.Values{"csrf": {csrf}, "action": {"rotate"}})
	wantStatus(t, "rotate", rotated, http.StatusOK)
	m = secretOnPage.FindStringSubmatch(rotated.body)
	if m == nil || m[1] == secret {
		t.Fatalf("the rotation shows no new secret:\n%s", rotated.body)
	}
	if d := e.get(page); strings.Contains(d.body, m[1]) || strings.Contains(d.body, secret) {
		t.Error("the subscription's page shows a secret after the rotation's answer")
	}

	if res := e.post(page, url.Values{"csrf": {csrf}, "action": {"test"}}); res.code != http.StatusSeeOther {
		t.Fatalf("test: %d %s", res.code, res.body)
	}
	wantBody(t, "deliveries", e.get(page+"?done=test"), "Test event queued", `<td>webhook.test</td>`, `<span class="badge st-pending">pending</span>`,
		"503 <span class=\"muted\">503 Service Unavailable</span>")

	confirm := e.get(page + "/delete")
	wantStatus(t, "confirm", confirm, http.StatusOK)
	wantBody(t, "confirm", confirm, "Delete the subscription of https://hooks.example.com/ota?", `action="`+page+`/delete"`)
	if got := hooks.called(); slices.Contains(got, "DeleteWebhook") {
		t.Fatal("the confirmation page deleted")
	}
	res = e.post(page+"/delete", url.Values{"csrf": {csrf}})
	if res.code != http.StatusSeeOther || res.header.Get("Location") != "/console/webhooks?done=deleted" {
		t.Fatalf("delete: %d %s", res.code, res.header.Get("Location"))
	}
	wantStatus(t, "deleted", e.get(page), http.StatusNotFound)
	want := []string{"CreateWebhook", "CreateWebhook", "ChangeWebhook", "ChangeWebhook", "SendTestEvent", "DeleteWebhook"}
	if got := hooks.called(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("calls %v, want %v", got, want)
	}
	for _, a := range hooks.actors {
		if !strings.Contains(a, "ada") {
			t.Errorf("a change was made as %q, not the signed-in admin", a)
		}
	}
	// A form without the session's CSRF token changes nothing.
	before := len(hooks.called())
	if res := e.post("/console/webhooks", url.Values{"url": {"https://x.example.com/"}}); res.code != http.StatusForbidden || len(hooks.called()) != before {
		t.Errorf("a form without its CSRF token: %d, calls %v", res.code, hooks.called()[before:])
	}
}

// Who lacks webhooks:write does not see the pages in the navigation, and
// is refused them (403), posts included, with nothing asked of the
// service.
func TestConsoleWebhooksRefuseWhoLacksThePermission(t *testing.T) {
	e, hooks := newWebhooksEnv(t, map[string]domain.Role{"rel": domain.RoleReleaser, "ada": domain.RoleAdmin})
	e.mustSignInAs("ada")
	sub, err := hooks.CreateWebhook(context.Background(), testActor, ports.NewWebhook{URL: "https://hooks.example.com/x"})
	if err != nil {
		t.Fatal(err)
	}
	id := sub.Subscription.ID().String()
	e.client = newClient(t)
	e.mustSignInAs("rel")
	fleet := e.get("/console/firmwares")
	if strings.Contains(fleet.body, "/console/webhooks") {
		t.Error("a releaser's navigation shows the webhooks")
	}
	csrf := e.csrf("/console/firmwares")
	for _, path := range []string{"/console/webhooks", "/console/webhooks/" + id, "/console/webhooks/" + id + "/delete"} {
		if r := e.get(path); r.code != http.StatusForbidden || strings.Contains(r.body, "hooks.example.com") {
			t.Errorf("GET %s as a releaser: %d", path, r.code)
		}
		if r := e.post(path, url.Values{"csrf": {csrf}, "url": {"https://y.example.com/"}, "action": {"disable"}}); r.code != http.StatusForbidden {
			t.Errorf("POST %s as a releaser: %d", path, r.code)
		}
	}
	if got := hooks.called(); len(got) != 1 {
		t.Errorf("the service was asked %v", got)
	}
}
