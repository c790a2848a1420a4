package application_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// webhookSpy is the in-memory subscription store, keeping every audit
// record a write stored and counting the calls that reached it.
type webhookSpy struct {
	mem     *memory.Webhooks
	mu      sync.Mutex
	records []domain.AuditRecord
	calls   int
	limits  []int // what WebhookDeliveries was asked
	fail    error // every write fails with it, when set
}

func (s *webhookSpy) hit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
}

func (s *webhookSpy) keep(rec domain.AuditRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, rec)
}

func (s *webhookSpy) last(t *testing.T) domain.AuditRecord {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.records) == 0 {
		t.Fatal("no audit record stored")
	}
	return s.records[len(s.records)-1]
}

func (s *webhookSpy) reached() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// recording keeps the record audit makes, as the store stores it.
func (s *webhookSpy) recording(audit ports.Audit[domain.WebhookSubscription]) ports.Audit[domain.WebhookSubscription] {
	return func(before, after domain.WebhookSubscription) (domain.AuditRecord, error) {
		rec, err := audit(before, after)
		if err == nil {
			s.keep(rec)
		}
		return rec, err
	}
}

func (s *webhookSpy) InsertWebhook(ctx context.Context, w domain.WebhookSubscription, rec domain.AuditRecord) error {
	s.hit()
	if s.fail != nil {
		return s.fail
	}
	s.keep(rec)
	return s.mem.InsertWebhook(ctx, w, rec)
}

func (s *webhookSpy) UpdateWebhook(ctx context.Context, id domain.UUID, fn func(*domain.WebhookSubscription) error,
	audit ports.Audit[domain.WebhookSubscription]) (domain.WebhookSubscription, error) {
	s.hit()
	if s.fail != nil {
		return domain.WebhookSubscription{}, s.fail
	}
	return s.mem.UpdateWebhook(ctx, id, fn, s.recording(audit))
}

func (s *webhookSpy) DeleteWebhook(ctx context.Context, id domain.UUID, audit ports.Audit[domain.WebhookSubscription]) error {
	s.hit()
	if s.fail != nil {
		return s.fail
	}
	return s.mem.DeleteWebhook(ctx, id, s.recording(audit))
}

func (s *webhookSpy) Webhooks(ctx context.Context) ([]domain.WebhookSubscription, error) {
	s.hit()
	return s.mem.Webhooks(ctx)
}

func (s *webhookSpy) Webhook(ctx context.Context, id domain.UUID) (domain.WebhookSubscription, error) {
	s.hit()
	return s.mem.Webhook(ctx, id)
}

func (s *webhookSpy) WebhookDeliveries(ctx context.Context, id domain.UUID, limit int, before int64) ([]ports.WebhookDelivery, error) {
	s.hit()
	s.mu.Lock()
	s.limits = append(s.limits, limit)
	s.mu.Unlock()
	return s.mem.WebhookDeliveries(ctx, id, limit, before)
}

func (s *webhookSpy) AnnounceTo(ctx context.Context, id, eventID domain.UUID, a domain.Announcement, rec domain.AuditRecord) error {
	s.hit()
	if s.fail != nil {
		return s.fail
	}
	s.keep(rec)
	return s.mem.AnnounceTo(ctx, id, eventID, a, rec)
}

var webhookNow = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

func newWebhooks(t *testing.T) (*application.Webhooks, *webhookSpy) {
	t.Helper()
	spy := &webhookSpy{mem: memory.NewWebhooks(memory.NewStore())}
	w, err := application.NewWebhooks(spy, &fixedClock{now: webhookNow}, local.NewUUIDs())
	if err != nil {
		t.Fatal(err)
	}
	return w, spy
}

const testSecret = "a-secret-of-at-least-24-characters"

func createWebhook(t *testing.T, w *application.Webhooks) domain.WebhookSubscription {
	t.Helper()
	c, err := w.CreateWebhook(t.Context(), testActor, ports.NewWebhook{URL: "https://hooks.example.com/ota", Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	return c.Subscription
}

// facts decodes a record's before or after; nil when it holds none.
func facts(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	if raw == nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("facts %s: %v", raw, err)
	}
	return m
}

var viewerActor = actorFor(domain.UserPrincipal(domain.RehydrateUser("vera", domain.RoleViewer, "h", webhookNow)))

func TestNewWebhooksRequiresEveryDependency(t *testing.T) {
	t.Parallel()
	if _, err := application.NewWebhooks(nil, &fixedClock{}, local.NewUUIDs()); err == nil {
		t.Error("built without a store")
	}
}

// Every write needs webhooks:write, and a zero id never reaches the store.
func TestWebhookWritesAreRefusedBeforeTheStore(t *testing.T) {
	t.Parallel()
	w, spy := newWebhooks(t)
	s := createWebhook(t, w)
	ctx := t.Context()
	before := spy.reached()

	if _, err := w.CreateWebhook(ctx, viewerActor, ports.NewWebhook{URL: "https://x.example.com"}); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("viewer creates: %v, want ErrForbidden", err)
	}
	if _, err := w.ChangeWebhook(ctx, viewerActor, s.ID(), ports.WebhookChange{}); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("viewer changes: %v, want ErrForbidden", err)
	}
	if err := w.DeleteWebhook(ctx, viewerActor, s.ID()); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("viewer deletes: %v, want ErrForbidden", err)
	}
	if _, err := w.SendTestEvent(ctx, viewerActor, s.ID()); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("viewer sends a test event: %v, want ErrForbidden", err)
	}

	var zero domain.UUID
	if _, err := w.GetWebhook(ctx, zero); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("get zero id: %v", err)
	}
	if _, err := w.ChangeWebhook(ctx, testActor, zero, ports.WebhookChange{}); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("change zero id: %v", err)
	}
	if err := w.DeleteWebhook(ctx, testActor, zero); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("delete zero id: %v", err)
	}
	if _, err := w.SendTestEvent(ctx, testActor, zero); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("test event to zero id: %v", err)
	}
	if n := spy.reached() - before; n != 0 {
		t.Errorf("%d refused calls reached the store", n)
	}
}

// A store's failure is the use case's error, for every write.
func TestWebhookWritesReturnTheStoresFailure(t *testing.T) {
	t.Parallel()
	w, spy := newWebhooks(t)
	s := createWebhook(t, w)
	ctx := t.Context()
	boom := errors.New("boom")
	spy.fail = boom

	if _, err := w.CreateWebhook(ctx, testActor, ports.NewWebhook{URL: "https://x.example.com"}); !errors.Is(err, boom) {
		t.Errorf("create: %v", err)
	}
	if _, err := w.ChangeWebhook(ctx, testActor, s.ID(), ports.WebhookChange{}); !errors.Is(err, boom) {
		t.Errorf("change: %v", err)
	}
	if err := w.DeleteWebhook(ctx, testActor, s.ID()); !errors.Is(err, boom) {
		t.Errorf("delete: %v", err)
	}
	if _, err := w.SendTestEvent(ctx, testActor, s.ID()); !errors.Is(err, boom) {
		t.Errorf("test event: %v", err)
	}
}

// Creation answers the secret once, stores the subscription, and records
// its facts but never its secret (W6).
func TestCreateWebhookRecordsFactsNotTheSecret(t *testing.T) {
	t.Parallel()
	w, spy := newWebhooks(t)
	c, err := w.CreateWebhook(t.Context(), testActor, ports.NewWebhook{URL: "https://hooks.example.com/ota",
		EventTypes: []string{string(domain.EventTaskSucceeded)}, Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	if c.Secret != testSecret || c.Subscription.Secret() != testSecret || c.Subscription.ID().IsZero() {
		t.Fatalf("credentials %+v", c)
	}
	if got, err := w.GetWebhook(t.Context(), c.Subscription.ID()); err != nil || got.URL() != "https://hooks.example.com/ota" {
		t.Fatalf("stored: %v %v", got, err)
	}
	if _, err := w.CreateWebhook(t.Context(), testActor, ports.NewWebhook{URL: "ftp://nope"}); err == nil {
		t.Error("an ftp URL was subscribed")
	}
	if l, err := w.ListWebhooks(t.Context()); err != nil || len(l) != 1 {
		t.Errorf("list: %v %v", l, err)
	}

	rec := spy.last(t)
	if rec.Action() != domain.AuditWebhookCreate || rec.Target() != c.Subscription.ID().String() || rec.Before() != nil ||
		!rec.At().Equal(webhookNow) {
		t.Errorf("record %s on %s at %v, before %s", rec.Action(), rec.Target(), rec.At(), rec.Before())
	}
	after := facts(t, rec.After())
	if after["url"] != "https://hooks.example.com/ota" || after["enabled"] != true {
		t.Errorf("after %s", rec.After())
	}
	if types, _ := after["event_types"].([]any); len(types) != 1 || types[0] != string(domain.EventTaskSucceeded) {
		t.Errorf("event types %v", after["event_types"])
	}
	if _, ok := after["disabled_reason"]; ok {
		t.Errorf("an enabled subscription's record has a disabled reason: %s", rec.After())
	}
	if _, ok := after["previous_secret_until"]; ok {
		t.Errorf("a new subscription's record has a previous secret: %s", rec.After())
	}
	if strings.Contains(string(rec.After()), testSecret) {
		t.Errorf("the secret is in the record: %s", rec.After())
	}
}

// A change records the state before and after; rotation answers the new
// secret once and records until when the previous one signs; a change
// without rotation answers no secret.
func TestChangeWebhookRotatesAndRecords(t *testing.T) {
	t.Parallel()
	w, spy := newWebhooks(t)
	s := createWebhook(t, w)
	ctx := t.Context()

	url, off := "https://other.example.com/ota", false
	c, err := w.ChangeWebhook(ctx, testActor, s.ID(), ports.WebhookChange{URL: &url, Enabled: &off})
	if err != nil {
		t.Fatal(err)
	}
	if c.Secret != "" || c.Subscription.URL() != url || c.Subscription.Enabled() {
		t.Errorf("change without rotation answered %+v", c)
	}
	if got, _ := w.GetWebhook(ctx, s.ID()); got.Secret() != testSecret {
		t.Error("a change without rotation rotated the secret")
	}
	rec := spy.last(t)
	before, after := facts(t, rec.Before()), facts(t, rec.After())
	if rec.Action() != domain.AuditWebhookChange || rec.Target() != s.ID().String() ||
		before["url"] != s.URL() || before["enabled"] != true || after["url"] != url || after["enabled"] != false {
		t.Errorf("record %s on %s: %s -> %s", rec.Action(), rec.Target(), rec.Before(), rec.After())
	}

	const next = "the-next-secret-of-24-characters-or-more"
	c, err = w.ChangeWebhook(ctx, testActor, s.ID(), ports.WebhookChange{RotateSecret: true, NewSecret: next})
	if err != nil {
		t.Fatal(err)
	}
	if c.Secret != next || c.Subscription.Secret() != next {
		t.Errorf("rotation answered %q", c.Secret)
	}
	if prev, until := c.Subscription.PreviousSecret(); prev != testSecret || !until.Equal(webhookNow.Add(domain.SecretRotationOverlap)) {
		t.Errorf("previous secret %q until %v", prev, until)
	}
	rec = spy.last(t)
	if until, _ := facts(t, rec.After())["previous_secret_until"].(string); until != webhookNow.Add(domain.SecretRotationOverlap).Format(time.RFC3339) {
		t.Errorf("after a rotation: %s", rec.After())
	}
	if _, ok := facts(t, rec.Before())["previous_secret_until"]; ok {
		t.Errorf("before the first rotation: %s", rec.Before())
	}
	if strings.Contains(string(rec.Before())+string(rec.After()), testSecret) || strings.Contains(string(rec.After()), next) {
		t.Errorf("a secret is in the record: %s -> %s", rec.Before(), rec.After())
	}

	if _, err := w.ChangeWebhook(ctx, testActor, s.ID(), ports.WebhookChange{RotateSecret: true, NewSecret: "short"}); err == nil {
		t.Error("rotated to a short secret")
	}
	bad := "nope"
	if _, err := w.ChangeWebhook(ctx, testActor, s.ID(), ports.WebhookChange{URL: &bad, RotateSecret: true}); err == nil {
		t.Error("changed to a bad URL")
	}
	if got, _ := w.GetWebhook(ctx, s.ID()); got.Secret() != next || got.URL() != url {
		t.Errorf("a refused change was stored: %q %q", got.Secret(), got.URL())
	}
}

// A subscription the deliveries disabled records why (W5), and
// re-enabling it records the reason gone.
func TestChangeWebhookRecordsTheDisabledReason(t *testing.T) {
	t.Parallel()
	w, spy := newWebhooks(t)
	s, err := domain.NewWebhookSubscription(local.NewUUIDs().NewID(), "https://hooks.example.com/ota", nil, testSecret, webhookNow)
	if err != nil {
		t.Fatal(err)
	}
	s.Failed(webhookNow, 0)
	if s.Enabled() || s.DisabledReason() == "" {
		t.Fatal("the fixture is not disabled with a reason")
	}
	if err := spy.mem.InsertWebhook(t.Context(), s, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	on := true
	if _, err := w.ChangeWebhook(t.Context(), testActor, s.ID(), ports.WebhookChange{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	rec := spy.last(t)
	if facts(t, rec.Before())["disabled_reason"] != s.DisabledReason() {
		t.Errorf("before: %s", rec.Before())
	}
	if _, ok := facts(t, rec.After())["disabled_reason"]; ok {
		t.Errorf("after re-enabling: %s", rec.After())
	}
}

// Deletion removes the subscription, recording its facts before and none
// after.
func TestDeleteWebhookRecordsNothingAfter(t *testing.T) {
	t.Parallel()
	w, spy := newWebhooks(t)
	s := createWebhook(t, w)
	if err := w.DeleteWebhook(t.Context(), testActor, s.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.GetWebhook(t.Context(), s.ID()); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("after deletion: %v", err)
	}
	rec := spy.last(t)
	if rec.Action() != domain.AuditWebhookDelete || rec.Target() != s.ID().String() || rec.After() != nil ||
		facts(t, rec.Before())["url"] != s.URL() {
		t.Errorf("record %s on %s: %s -> %s", rec.Action(), rec.Target(), rec.Before(), rec.After())
	}
}

// A test event is one delivery to that subscription, under the id the
// call answers, with its audit record (W2).
func TestSendTestEventQueuesOneDelivery(t *testing.T) {
	t.Parallel()
	w, spy := newWebhooks(t)
	s := createWebhook(t, w)
	other := createWebhook(t, w)
	ctx := t.Context()

	id, err := w.SendTestEvent(ctx, testActor, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	rec := spy.last(t)
	if rec.Action() != domain.AuditWebhookTest || rec.Target() != s.ID().String() || facts(t, rec.After())["event_id"] != id.String() {
		t.Errorf("record %s on %s: %s", rec.Action(), rec.Target(), rec.After())
	}
	page, err := w.Deliveries(ctx, s.ID(), "", "")
	if err != nil || len(page.Items) != 1 || page.Items[0].EventID != id || page.Items[0].EventType != domain.EventTest {
		t.Fatalf("deliveries %+v %v", page, err)
	}
	if page, err := w.Deliveries(ctx, other.ID(), "", ""); err != nil || len(page.Items) != 0 {
		t.Errorf("the other subscription was sent %+v %v", page, err)
	}
	if _, err := w.SendTestEvent(ctx, testActor, local.NewUUIDs().NewID()); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("to an unknown subscription: %v", err)
	}
}

func cursor(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// The delivery log pages newest first without skipping or repeating; the
// limit is 50 by default, at most 200; a cursor this service did not
// issue, or an unknown subscription, is refused.
func TestWebhookDeliveriesPage(t *testing.T) {
	t.Parallel()
	w, spy := newWebhooks(t)
	s := createWebhook(t, w)
	ctx := t.Context()
	var sent []domain.UUID
	for range 5 {
		id, err := w.SendTestEvent(ctx, testActor, s.ID())
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, id)
	}

	var got []domain.UUID
	after, pages := "", 0
	for {
		page, err := w.Deliveries(ctx, s.ID(), "2", after)
		if err != nil {
			t.Fatal(err)
		}
		if pages++; len(page.Items) > 2 || pages > 3 {
			t.Fatalf("page %d: %d items", pages, len(page.Items))
		}
		for _, d := range page.Items {
			got = append(got, d.EventID)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if len(got) != len(sent) || pages != 3 {
		t.Fatalf("%d pages of %d deliveries, want 3 of %d", pages, len(got), len(sent))
	}
	for i, id := range got {
		if id != sent[len(sent)-1-i] {
			t.Errorf("delivery %d is event %v, want %v", i, id, sent[len(sent)-1-i])
		}
	}

	if page, err := w.Deliveries(ctx, s.ID(), "5", ""); err != nil || len(page.Items) != 5 || page.Next != "" {
		t.Errorf("a full last page: %d items, next %q, %v", len(page.Items), page.Next, err)
	}
	spy.mu.Lock()
	spy.limits = nil
	spy.mu.Unlock()
	if _, err := w.Deliveries(ctx, s.ID(), "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Deliveries(ctx, s.ID(), "200", ""); err != nil {
		t.Fatal(err)
	}
	spy.mu.Lock()
	if len(spy.limits) != 2 || spy.limits[0] != 51 || spy.limits[1] != 201 {
		t.Errorf("the store was asked for %v, want [51 201]", spy.limits)
	}
	spy.mu.Unlock()

	for _, limit := range []string{"0", "201", "x"} {
		var v *domain.ValidationError
		if _, err := w.Deliveries(ctx, s.ID(), limit, ""); !errors.As(err, &v) || v.Field != "limit" {
			t.Errorf("limit %q: %v", limit, err)
		}
	}
	for _, c := range []string{"!!", cursor("d|3") + "!", cursor("d|99999999999999999999"), cursor("d|0"), cursor("d|-3"), cursor("3"), cursor("x|3"), cursor("d|x")} {
		var v *domain.ValidationError
		if _, err := w.Deliveries(ctx, s.ID(), "", c); !errors.As(err, &v) || v.Field != "after" {
			t.Errorf("cursor %q: %v", c, err)
		}
	}
	if page, err := w.Deliveries(ctx, s.ID(), "", cursor("d|1000")); err != nil || len(page.Items) != 5 {
		t.Errorf("a cursor past the newest: %d items, %v", len(page.Items), err)
	}
	if _, err := w.Deliveries(ctx, local.NewUUIDs().NewID(), "", ""); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("an unknown subscription's log: %v", err)
	}
}
