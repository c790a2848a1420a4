package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

const (
	testWebhookID     = "5d2b7c1a-3e4f-4a5b-8c6d-7e8f9a0b1c2d"
	testWebhookSecret = "whsec_seeded-secret-0123456789abcdef"
	testEventID       = "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d"
)

// fakeWebhooks is ports.WebhookService over a map, built on the domain's
// subscription so that its rules (the URL, the types, the secret's
// length) answer as the real service's would. Changes are recorded in the
// fake services' log.
type fakeWebhooks struct {
	f    *fakeServices
	mu   sync.Mutex
	subs map[domain.UUID]domain.WebhookSubscription
	n    int
	// deliveries is every subscription's log; after is what the last
	// Deliveries call was given.
	deliveries []ports.WebhookDelivery
	limit      string
	after      string
	change     ports.WebhookChange
}

func mustUUID(s string) domain.UUID {
	id, err := domain.ParseUUID("id", s)
	if err != nil {
		panic(err)
	}
	return id
}

func newFakeWebhooks(f *fakeServices) *fakeWebhooks {
	w := &fakeWebhooks{f: f, subs: map[domain.UUID]domain.WebhookSubscription{}}
	sub, err := domain.NewWebhookSubscription(mustUUID(testWebhookID), "https://hooks.example.com/ota",
		[]string{"task.failed"}, testWebhookSecret, testTime)
	if err != nil {
		panic(err)
	}
	w.subs[sub.ID()] = sub
	at := testTime.Add(time.Minute)
	w.deliveries = []ports.WebhookDelivery{
		{ID: 2, EventID: mustUUID(testEventID), EventType: domain.EventTaskFailed, Status: ports.DeliveryPending, Attempts: 1,
			NextAttemptAt: at.Add(time.Minute), LastAttemptAt: at, LastStatusCode: 503, LastError: "503 Service Unavailable", CreatedAt: at},
		{ID: 1, EventID: mustUUID(firmwareID), EventType: domain.EventTest, Status: ports.DeliveryDelivered, Attempts: 1,
			LastAttemptAt: testTime, LastStatusCode: 204, CreatedAt: testTime},
	}
	return w
}

func (w *fakeWebhooks) get(id domain.UUID) (domain.WebhookSubscription, error) {
	s, ok := w.subs[id]
	if !ok {
		return domain.WebhookSubscription{}, fmt.Errorf("webhook %s: %w", id, domain.ErrNotFound)
	}
	return s, nil
}

func (w *fakeWebhooks) CreateWebhook(_ context.Context, _ domain.Actor, req ports.NewWebhook) (ports.WebhookCredentials, error) {
	w.f.record("CreateWebhook", req.URL)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	id := mustUUID(fmt.Sprintf("00000000-0000-4000-8000-%012d", w.n))
	s, err := domain.NewWebhookSubscription(id, req.URL, req.EventTypes, req.Secret, testTime)
	if err != nil {
		return ports.WebhookCredentials{}, err
	}
	w.subs[id] = s
	return ports.WebhookCredentials{Subscription: s, Secret: s.Secret()}, nil
}

func (w *fakeWebhooks) ListWebhooks(context.Context) ([]domain.WebhookSubscription, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]domain.WebhookSubscription, 0, len(w.subs))
	for _, s := range w.subs {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b domain.WebhookSubscription) int { return strings.Compare(a.ID().String(), b.ID().String()) })
	return out, nil
}

func (w *fakeWebhooks) GetWebhook(_ context.Context, id domain.UUID) (domain.WebhookSubscription, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.get(id)
}

// ChangeWebhook answers the secret always, rotated or not: the edge must
// show it only when the change rotated it.
func (w *fakeWebhooks) ChangeWebhook(_ context.Context, _ domain.Actor, id domain.UUID, c ports.WebhookChange) (ports.WebhookCredentials, error) {
	w.f.record("ChangeWebhook", id.String())
	w.mu.Lock()
	defer w.mu.Unlock()
	w.change = c
	s, err := w.get(id)
	if err != nil {
		return ports.WebhookCredentials{}, err
	}
	if err := s.Change(c.URL, c.EventTypes, c.Enabled, testTime.Add(time.Hour)); err != nil {
		return ports.WebhookCredentials{}, err
	}
	if c.RotateSecret {
		if err := s.RotateSecret(c.NewSecret, testTime.Add(time.Hour)); err != nil {
			return ports.WebhookCredentials{}, err
		}
	}
	w.subs[id] = s
	return ports.WebhookCredentials{Subscription: s, Secret: s.Secret()}, nil
}

func (w *fakeWebhooks) DeleteWebhook(_ context.Context, _ domain.Actor, id domain.UUID) error {
	w.f.record("DeleteWebhook", id.String())
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.get(id); err != nil {
		return err
	}
	delete(w.subs, id)
	return nil
}

func (w *fakeWebhooks) Deliveries(_ context.Context, id domain.UUID, limit, after string) (ports.DeliveryPage, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.limit, w.after = limit, after
	if _, err := w.get(id); err != nil {
		return ports.DeliveryPage{}, err
	}
	if limit == "x" {
		return ports.DeliveryPage{}, &domain.ValidationError{Field: "limit", Reason: "must be a number"}
	}
	return ports.DeliveryPage{Items: w.deliveries, Next: "1"}, nil
}

func (w *fakeWebhooks) SendTestEvent(_ context.Context, _ domain.Actor, id domain.UUID) (domain.UUID, error) {
	w.f.record("SendTestEvent", id.String())
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.get(id); err != nil {
		return domain.UUID{}, err
	}
	return mustUUID(testEventID), nil
}

// The webhook routes join apiRoutes, so the route, OpenAPI and auth tests
// that walk every route cover them too.
func init() {
	a := APIPrefix + "/admin/webhooks"
	apiRoutes = append(apiRoutes,
		routeCase{"create webhook", http.MethodPost, a, `{"url":"https://hooks.example.com/x","event_types":["task.succeeded","rollout.paused"]}`, true, http.StatusCreated},
		routeCase{"list webhooks", http.MethodGet, a, "", true, http.StatusOK},
		routeCase{"get webhook", http.MethodGet, a + "/" + testWebhookID, "", true, http.StatusOK},
		routeCase{"change webhook", http.MethodPatch, a + "/" + testWebhookID, `{"enabled":false,"event_types":[]}`, true, http.StatusOK},
		routeCase{"rotate webhook secret", http.MethodPatch, a + "/" + testWebhookID, `{"rotate_secret":true}`, true, http.StatusOK},
		routeCase{"webhook deliveries", http.MethodGet, a + "/" + testWebhookID + "/deliveries?limit=10&after=5", "", true, http.StatusOK},
		routeCase{"test webhook", http.MethodPost, a + "/" + testWebhookID + "/test", "", true, http.StatusAccepted},
		// Last: the harness may be shared by every route.
		routeCase{"delete webhook", http.MethodDelete, a + "/" + testWebhookID, "", true, http.StatusNoContent},
	)
}

type webhookAnswer struct {
	ID                  string   `json:"id"`
	URL                 string   `json:"url"`
	EventTypes          []string `json:"event_types"`
	Enabled             bool     `json:"enabled"`
	PreviousSecretUntil *string  `json:"previous_secret_until"`
	Secret              *string  `json:"secret"`
}

func decodeAs[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return v
}

// A subscription's secret is answered once, at creation, and again only
// when a change rotates it; reads never show it, and no secret reaches
// the log.
func TestWebhookSecretIsShownOnlyWhenMadeOrRotated(t *testing.T) {
	h := newHarness(t)
	a := APIPrefix + "/admin/webhooks"
	rec := h.do(t, req{method: http.MethodPost, path: a, token: testAdminToken,
		body: `{"url":"https://hooks.example.com/new","event_types":["task.failed","task.failed","device.admitted"]}`})
	if rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	made := decodeAs[webhookAnswer](t, rec.Body.Bytes())
	if made.Secret == nil || !strings.HasPrefix(*made.Secret, "whsec_") {
		t.Fatalf("the creation answered no secret: %s", rec.Body)
	}
	if got := strings.Join(made.EventTypes, ","); got != "device.admitted,task.failed" {
		t.Errorf("event types %q", got)
	}
	for _, path := range []string{a, a + "/" + made.ID} {
		rec := h.do(t, req{method: http.MethodGet, path: path, token: testAdminToken})
		if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), *made.Secret) || strings.Contains(rec.Body.String(), testWebhookSecret) ||
			strings.Contains(rec.Body.String(), `"secret"`) {
			t.Errorf("GET %s: %d shows a secret: %s", path, rec.Code, rec.Body)
		}
	}
	// A change that does not rotate answers no secret, though the service
	// handed one back.
	rec = h.do(t, req{method: http.MethodPatch, path: a + "/" + made.ID, token: testAdminToken, body: `{"enabled":false}`})
	if got := decodeAs[webhookAnswer](t, rec.Body.Bytes()); rec.Code != http.StatusOK || got.Secret != nil || got.Enabled {
		t.Errorf("disable: %d %s", rec.Code, rec.Body)
	}
	chosen := "a-secret-the-operator-chose-42"
	rec = h.do(t, req{method: http.MethodPatch, path: a + "/" + made.ID, token: testAdminToken,
		body: `{"rotate_secret":true,"secret":"` + chosen + `"}`})
	got := decodeAs[webhookAnswer](t, rec.Body.Bytes())
	if rec.Code != http.StatusOK || got.Secret == nil || *got.Secret != chosen || got.PreviousSecretUntil == nil {
		t.Errorf("rotate: %d %s", rec.Code, rec.Body)
	}
	if !h.webhooks.change.RotateSecret || h.webhooks.change.NewSecret != chosen {
		t.Errorf("the service was asked %+v", h.webhooks.change)
	}
	for _, secret := range []string{*made.Secret, chosen} {
		if strings.Contains(h.logs.String(), secret) {
			t.Errorf("the secret %q reached the log", secret)
		}
	}
}

// Bad input is VALIDATION_FAILED naming the field, before the service
// changes anything; an id that names nothing is NOT_FOUND.
func TestWebhookRoutesRefuseBadInput(t *testing.T) {
	a := APIPrefix + "/admin/webhooks"
	one := a + "/" + testWebhookID
	ghost := a + "/" + firmwareID
	cases := []struct {
		name         string
		method, path string
		body         string
		status       int
		code, field  string
		calls        bool // the service is asked
	}{
		{"no url", http.MethodPost, a, `{"event_types":["task.failed"]}`, 400, httpedge.CodeValidationFailed, "url", false},
		{"ftp url", http.MethodPost, a, `{"url":"ftp://x.example.com/"}`, 400, httpedge.CodeValidationFailed, "url", true},
		{"credentials in url", http.MethodPost, a, `{"url":"https://u:p@x.example.com/"}`, 400, httpedge.CodeValidationFailed, "url", true},
		{"unknown type", http.MethodPost, a, `{"url":"https://x.example.com/","event_types":["task.exploded"]}`, 400, httpedge.CodeValidationFailed, "event_types", true},
		{"test type", http.MethodPost, a, `{"url":"https://x.example.com/","event_types":["webhook.test"]}`, 400, httpedge.CodeValidationFailed, "event_types", true},
		{"short secret", http.MethodPost, a, `{"url":"https://x.example.com/","secret":"short"}`, 400, httpedge.CodeValidationFailed, "secret", true},
		{"unknown field", http.MethodPost, a, `{"url":"https://x.example.com/","active":true}`, 400, httpedge.CodeValidationFailed, "active", false},
		{"types not a list", http.MethodPost, a, `{"url":"https://x.example.com/","event_types":"task.failed"}`, 400, httpedge.CodeValidationFailed, "event_types", false},
		{"secret without rotation", http.MethodPatch, one, `{"secret":"a-secret-the-operator-chose-42"}`, 400, httpedge.CodeValidationFailed, "secret", false},
		{"bad url change", http.MethodPatch, one, `{"url":"nope"}`, 400, httpedge.CodeValidationFailed, "url", true},
		{"bad body on a malformed id", http.MethodPatch, a + "/not-a-uuid", `{"enabled":"yes"}`, 400, httpedge.CodeValidationFailed, "enabled", false},
		{"bad limit", http.MethodGet, one + "/deliveries?limit=x", "", 400, httpedge.CodeValidationFailed, "limit", false},
		{"get unknown", http.MethodGet, ghost, "", 404, httpedge.CodeNotFound, "", false},
		{"change unknown", http.MethodPatch, ghost, `{"enabled":true}`, 404, httpedge.CodeNotFound, "", true},
		{"delete unknown", http.MethodDelete, ghost, "", 404, httpedge.CodeNotFound, "", true},
		{"test unknown", http.MethodPost, ghost + "/test", "", 404, httpedge.CodeNotFound, "", true},
		{"deliveries unknown", http.MethodGet, ghost + "/deliveries", "", 404, httpedge.CodeNotFound, "", false},
		{"malformed id", http.MethodDelete, a + "/not-a-uuid", "", 404, httpedge.CodeNotFound, "", false},
		{"malformed id test", http.MethodPost, a + "/not-a-uuid/test", "", 404, httpedge.CodeNotFound, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			rec := h.do(t, req{method: c.method, path: c.path, token: testAdminToken, body: c.body})
			d := wantError(t, rec, c.status, c.code)
			if c.field != "" && !strings.Contains(d.Message, c.field) {
				t.Errorf("message %q does not name %s", d.Message, c.field)
			}
			if calls := h.fake.called(); !c.calls && len(calls) > 0 {
				t.Errorf("the service was asked: %v", calls)
			}
		})
	}
}

// The delivery log shows each delivery's status, attempts and last
// answer, hands limit and after to the service as received, and a
// subscription's test event is accepted with its id.
func TestWebhookDeliveriesAndTestEvent(t *testing.T) {
	h := newHarness(t)
	one := APIPrefix + "/admin/webhooks/" + testWebhookID
	rec := h.do(t, req{method: http.MethodGet, path: one + "/deliveries?limit=2&after=9", token: testAdminToken})
	if rec.Code != http.StatusOK {
		t.Fatalf("deliveries: %d %s", rec.Code, rec.Body)
	}
	page := decodeAs[struct {
		Items []struct {
			EventType      string  `json:"event_type"`
			Status         string  `json:"status"`
			Attempts       int     `json:"attempts"`
			NextAttemptAt  *string `json:"next_attempt_at"`
			LastStatusCode *int    `json:"last_status_code"`
			LastError      *string `json:"last_error"`
		} `json:"items"`
		Next *string `json:"next"`
	}](t, rec.Body.Bytes())
	if h.webhooks.limit != "2" || h.webhooks.after != "9" {
		t.Errorf("the service was given limit %q after %q", h.webhooks.limit, h.webhooks.after)
	}
	if len(page.Items) != 2 || page.Next == nil || *page.Next != "1" {
		t.Fatalf("page %s", rec.Body)
	}
	p, d := page.Items[0], page.Items[1]
	if p.Status != "pending" || p.Attempts != 1 || p.NextAttemptAt == nil || p.LastStatusCode == nil || *p.LastStatusCode != 503 ||
		p.LastError == nil || p.EventType != "task.failed" {
		t.Errorf("pending delivery %s", rec.Body)
	}
	if d.Status != "delivered" || d.NextAttemptAt != nil || d.LastError != nil || d.LastStatusCode == nil || *d.LastStatusCode != 204 {
		t.Errorf("delivered delivery %s", rec.Body)
	}
	rec = h.do(t, req{method: http.MethodPost, path: one + "/test", token: testAdminToken})
	if got := decodeAs[testEventView](t, rec.Body.Bytes()); rec.Code != http.StatusAccepted || got.EventID != testEventID {
		t.Errorf("test: %d %s", rec.Code, rec.Body)
	}
	if !slices.Contains(h.fake.called(), "SendTestEvent") {
		t.Error("the test event was not asked of the service")
	}
}

// The document names every event type and gives each a schema; the
// events the domain announces match their schemas, so that a payload's
// documented fields are the ones sent.
func TestWebhookEventSchemasMatchTheAnnouncements(t *testing.T) {
	doc := loadSpec(t)
	var enum []string
	for _, v := range doc.Components.Schemas["WebhookEventType"].Value.Enum {
		enum = append(enum, v.(string))
	}
	var types []string
	for _, et := range domain.EventTypes() {
		types = append(types, string(et))
	}
	if strings.Join(enum, ",") != strings.Join(types, ",") {
		t.Errorf("WebhookEventType %v, the domain's %v", enum, types)
	}
	for _, et := range append(types, string(domain.EventTest)) {
		if doc.Components.Schemas["WebhookEvent_"+et] == nil {
			t.Errorf("no schema WebhookEvent_%s", et)
		}
	}
	at := testTime
	task := func(s domain.TaskStatus, code string) domain.Task {
		return domain.RehydrateTask(domain.TaskRecord{ID: testEventID, DeviceID: dev1, FirmwareID: firmwareID, RolloutID: rolloutID,
			Status: s, Attempt: 2, ErrorCode: code, CreatedAt: at, UpdatedAt: at})
	}
	var anns []domain.Announcement
	for _, end := range []domain.Task{task(domain.TaskSucceeded, ""), task(domain.TaskFailed, "E_FLASH"), task(domain.TaskFailed, domain.CodeTimedOut),
		task(domain.TaskCancelled, "")} {
		a, ok, err := domain.TaskAnnouncement(task(domain.TaskInstalling, ""), end)
		if err != nil || !ok {
			t.Fatalf("announcing %v: %v", end.Status(), err)
		}
		anns = append(anns, a)
	}
	rollout := func(s domain.RolloutStatus, reason domain.PausedReason, pct int) domain.Rollout {
		return domain.RehydrateRollout(domain.RolloutRecord{ID: rolloutID, FirmwareID: firmwareID, Percentage: pct, Status: s, PausedReason: reason,
			CreatedAt: at, UpdatedAt: at})
	}
	for _, change := range [][2]domain.Rollout{
		{rollout(domain.RolloutActive, domain.PausedReason{}, 10), rollout(domain.RolloutPaused, domain.PausedAuto, 10)},
		{rollout(domain.RolloutPaused, domain.PausedManual, 10), rollout(domain.RolloutActive, domain.PausedReason{}, 100)},
		{rollout(domain.RolloutActive, domain.PausedReason{}, 10), rollout(domain.RolloutCancelled, domain.PausedReason{}, 10)},
	} {
		a, err := domain.RolloutAnnouncements(change[0], change[1], at)
		if err != nil || len(a) == 0 {
			t.Fatalf("announcing a rollout's change: %v %v", a, err)
		}
		anns = append(anns, a...)
	}
	seen := map[domain.EventType]bool{}
	for _, a := range anns {
		seen[a.Type()] = true
		envelope := map[string]any{"id": testEventID, "type": string(a.Type()), "time": timestamp(a.At()), "version": domain.EventSchemaVersion}
		var data any
		if err := json.Unmarshal(a.Payload(), &data); err != nil {
			t.Fatal(err)
		}
		envelope["data"] = data
		if err := doc.Components.Schemas["WebhookEvent_"+string(a.Type())].Value.VisitJSON(envelope); err != nil {
			t.Errorf("%s %s does not match its schema: %v", a.Type(), a.Payload(), err)
		}
		if err := doc.Components.Schemas["WebhookEvent"].Value.VisitJSON(envelope); err != nil {
			t.Errorf("%s does not match the envelope: %v", a.Type(), err)
		}
	}
	if len(seen) < 8 {
		t.Errorf("only %d types checked: %v", len(seen), seen)
	}
}
