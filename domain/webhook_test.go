package domain_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

const webhookSecret = "whsec_a_secret_of_24_chars"

func mustWebhook(t *testing.T, label string, types []string) domain.WebhookSubscription {
	t.Helper()
	s, err := domain.NewWebhookSubscription(idOf(label), "https://hooks.example.com/"+label, types, webhookSecret, t0)
	if err != nil {
		t.Fatalf("NewWebhookSubscription(%s): %v", label, err)
	}
	return s
}

func wantField(t *testing.T, what string, err error, field string) {
	t.Helper()
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || ve.Field != field {
		t.Errorf("%s: %v, want a %s validation error", what, err, field)
	}
}

// A new subscription is enabled, not failing, posts to its URL and signs
// with the secret it was given; its types are parsed, deduplicated and
// sorted.
func TestNewWebhookSubscription(t *testing.T) {
	s, err := domain.NewWebhookSubscription(idOf("wh-new"), "https://hooks.example.com/ota",
		[]string{" task.failed", "device.registered", "task.failed"}, webhookSecret, t0)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID() != idOf("wh-new") || s.URL() != "https://hooks.example.com/ota" || s.Secret() != webhookSecret {
		t.Errorf("subscription %s %s %q: not what was asked", s.ID(), s.URL(), s.Secret())
	}
	if got := s.EventTypes(); !slices.Equal(got, []domain.EventType{domain.EventDeviceRegistered, domain.EventTaskFailed}) {
		t.Errorf("event types %v, want device.registered and task.failed once each, sorted", got)
	}
	if !s.Enabled() || s.DisabledReason() != "" || !s.FailingSince().IsZero() {
		t.Errorf("a new subscription: enabled %v, reason %q, failing since %v", s.Enabled(), s.DisabledReason(), s.FailingSince())
	}
	if !s.CreatedAt().Equal(t0) || s.CreatedAt().Location() != time.UTC || !s.UpdatedAt().Equal(t0) {
		t.Errorf("created %v, updated %v; want %v in UTC", s.CreatedAt(), s.UpdatedAt(), t0)
	}
	if prev, until := s.PreviousSecret(); prev != "" || !until.IsZero() {
		t.Errorf("a new subscription has a previous secret %q until %v", prev, until)
	}
	// EventTypes is a copy: the caller cannot change what it is sent.
	s.EventTypes()[0] = domain.EventTaskSucceeded
	if s.Wants(domain.EventTaskSucceeded) {
		t.Error("changing EventTypes' answer changed the subscription")
	}
}

// Without a secret, the subscription gets a random one, shown once: long
// enough to be accepted itself, different each time.
func TestNewWebhookSubscriptionRandomSecret(t *testing.T) {
	a, err := domain.NewWebhookSubscription(idOf("wh-rand-a"), "http://hooks.example.com/", nil, "", t0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := domain.NewWebhookSubscription(idOf("wh-rand-b"), "http://hooks.example.com/", nil, "", t0)
	if err != nil {
		t.Fatal(err)
	}
	// "whsec_" and 32 random bytes in unpadded base64url.
	if !strings.HasPrefix(a.Secret(), "whsec_") || len(a.Secret()) != 6+43 || a.Secret() == b.Secret() {
		t.Errorf("random secrets %q and %q: want whsec_ and 43 characters, each different", a.Secret(), b.Secret())
	}
}

// The secret is 24 to 256 characters; the URL an http or https URL with a
// host, no credentials and at most 2048 characters; the types event types
// other than the test event, which is sent on request only.
func TestNewWebhookSubscriptionRefuses(t *testing.T) {
	for _, n := range []int{24, 256} {
		if _, err := domain.NewWebhookSubscription(idOf("wh-len"), "https://h.example.com/", nil, strings.Repeat("s", n), t0); err != nil {
			t.Errorf("a secret of %d characters: %v", n, err)
		}
	}
	for _, n := range []int{23, 257} {
		_, err := domain.NewWebhookSubscription(idOf("wh-len"), "https://h.example.com/", nil, strings.Repeat("s", n), t0)
		wantField(t, fmt.Sprintf("a secret of %d characters", n), err, "secret")
	}
	long := "https://h.example.com/" + strings.Repeat("p", 2048-len("https://h.example.com/"))
	if _, err := domain.NewWebhookSubscription(idOf("wh-url"), long, nil, webhookSecret, t0); err != nil {
		t.Errorf("a URL of 2048 characters: %v", err)
	}
	for _, u := range []string{"ftp://h.example.com/", "https://", "h.example.com/hook", "://bad", long + "p"} {
		_, err := domain.NewWebhookSubscription(idOf("wh-url"), u, nil, webhookSecret, t0)
		wantField(t, "URL "+u[:min(len(u), 40)], err, "url")
	}
	_, err := domain.NewWebhookSubscription(idOf("wh-url"), "https://user:pw@h.example.com/", nil, webhookSecret, t0)
	wantField(t, "a URL with credentials", err, "url")
	for _, types := range [][]string{{"task.failed", "task.exploded"}, {"webhook.test"}} {
		_, err := domain.NewWebhookSubscription(idOf("wh-types"), "https://h.example.com/", types, webhookSecret, t0)
		wantField(t, "types "+strings.Join(types, ","), err, "event_types")
	}
}

// A subscription naming types is sent those and the test event; one
// naming none is sent every type.
func TestWebhookWants(t *testing.T) {
	some := mustWebhook(t, "wh-wants-some", []string{"task.failed"})
	all := mustWebhook(t, "wh-wants-all", nil)
	for _, et := range domain.EventTypes() {
		if !all.Wants(et) {
			t.Errorf("a subscription naming no type does not want %s", et)
		}
		if got := some.Wants(et); got != (et == domain.EventTaskFailed) {
			t.Errorf("a subscription to task.failed wants %s: %v", et, got)
		}
	}
	if !some.Wants(domain.EventTest) || !all.Wants(domain.EventTest) {
		t.Error("the test event is not sent to the subscription it was sent for")
	}
}

// Change sets the URL, the types and whether the subscription is enabled,
// each only when given; a refused change changes nothing; enabling clears
// the failing period and the reason, disabling keeps the failing period.
func TestWebhookChange(t *testing.T) {
	s := mustWebhook(t, "wh-change", []string{"task.failed"})
	bad := "gopher://h.example.com/"
	if err := s.Change(&bad, nil, nil, t1); err == nil {
		t.Fatal("a change to a gopher URL")
	}
	if err := s.Change(nil, []string{"nope"}, nil, t1); err == nil {
		t.Fatal("a change to an unknown type")
	}
	if s.URL() != "https://hooks.example.com/wh-change" || !s.Wants(domain.EventTaskFailed) || !s.UpdatedAt().Equal(t0) {
		t.Fatalf("a refused change changed the subscription: %s %v updated %v", s.URL(), s.EventTypes(), s.UpdatedAt())
	}
	if err := s.Change(nil, nil, nil, t1); err != nil || s.URL() != "https://hooks.example.com/wh-change" ||
		!slices.Equal(s.EventTypes(), []domain.EventType{domain.EventTaskFailed}) || !s.Enabled() || !s.UpdatedAt().Equal(t1) {
		t.Fatalf("an empty change: %v; %s %v enabled %v updated %v", err, s.URL(), s.EventTypes(), s.Enabled(), s.UpdatedAt())
	}
	u := "http://other.example.com/hook"
	if err := s.Change(&u, []string{}, nil, t1); err != nil {
		t.Fatal(err)
	}
	if s.URL() != u || len(s.EventTypes()) != 0 || !s.Wants(domain.EventFirmwarePublished) {
		t.Errorf("after the change: %s %v", s.URL(), s.EventTypes())
	}

	// Failing for the whole give-up period disables it, saying why.
	s.Failed(t1, time.Hour)
	s.Failed(t1.Add(time.Hour), time.Hour)
	if s.Enabled() || s.DisabledReason() == "" {
		t.Fatalf("failing for the give-up period: enabled %v, reason %q", s.Enabled(), s.DisabledReason())
	}
	no, yes := false, true
	if err := s.Change(nil, nil, &no, t1); err != nil || s.Enabled() || s.DisabledReason() != "" || s.FailingSince().IsZero() {
		t.Errorf("an operator's disabling: %v; enabled %v, reason %q, failing since %v", err, s.Enabled(), s.DisabledReason(), s.FailingSince())
	}
	if err := s.Change(nil, nil, &yes, t1); err != nil || !s.Enabled() || s.DisabledReason() != "" || !s.FailingSince().IsZero() {
		t.Errorf("re-enabling: %v; enabled %v, reason %q, failing since %v", err, s.Enabled(), s.DisabledReason(), s.FailingSince())
	}
}

// After a rotation both secrets sign for SecretRotationOverlap, then only
// the new one; a refused secret changes nothing.
func TestWebhookRotateSecret(t *testing.T) {
	s := mustWebhook(t, "wh-rotate", []string{"task.failed"})
	if got := s.SigningSecrets(t0); !slices.Equal(got, []string{webhookSecret}) {
		t.Fatalf("signing secrets before a rotation: %q", got)
	}
	if err := s.RotateSecret("too short", t1); err == nil {
		t.Fatal("rotating to a short secret")
	}
	if s.Secret() != webhookSecret || !s.UpdatedAt().Equal(t0) {
		t.Fatalf("a refused rotation changed the secret to %q", s.Secret())
	}
	const next = "whsec_the_next_secret_24_"
	if err := s.RotateSecret(next, t1); err != nil {
		t.Fatal(err)
	}
	prev, until := s.PreviousSecret()
	if s.Secret() != next || prev != webhookSecret || !until.Equal(t1.Add(domain.SecretRotationOverlap)) || !s.UpdatedAt().Equal(t1) {
		t.Fatalf("after rotating: secret %q, previous %q until %v, updated %v", s.Secret(), prev, until, s.UpdatedAt())
	}
	if !s.Wants(domain.EventTaskFailed) || s.Wants(domain.EventTaskSucceeded) {
		t.Error("rotating the secret changed the types")
	}
	// W6: the previous secret signs for 24 hours after the rotation.
	if got := s.SigningSecrets(t1.Add(24*time.Hour - time.Second)); !slices.Equal(got, []string{next, webhookSecret}) {
		t.Errorf("signing secrets a second before 24 h: %q", got)
	}
	end := t1.Add(domain.SecretRotationOverlap)
	if got := s.SigningSecrets(end.Add(-time.Microsecond)); !slices.Equal(got, []string{next, webhookSecret}) {
		t.Errorf("signing secrets during the overlap: %q", got)
	}
	if got := s.SigningSecrets(end); !slices.Equal(got, []string{next}) {
		t.Errorf("signing secrets at the overlap's end: %q", got)
	}
	if err := s.RotateSecret("", end); err != nil || s.Secret() == next || !strings.HasPrefix(s.Secret(), "whsec_") {
		t.Errorf("rotating to a random secret: %v, secret %q", err, s.Secret())
	}
}

// W5: the first failure starts the failing period; failing for giveUp
// disables the subscription with the reason; a success ends the period.
func TestWebhookFailedAndSucceeded(t *testing.T) {
	s := mustWebhook(t, "wh-fail", nil)
	s.Failed(t1, time.Hour)
	if !s.FailingSince().Equal(t1) || !s.Enabled() || !s.UpdatedAt().Equal(t1) {
		t.Fatalf("after a first failure: failing since %v, enabled %v, updated %v", s.FailingSince(), s.Enabled(), s.UpdatedAt())
	}
	s.Failed(t1.Add(time.Hour-time.Second), time.Hour)
	if !s.FailingSince().Equal(t1) || !s.Enabled() {
		t.Fatalf("failing for less than giveUp: failing since %v, enabled %v", s.FailingSince(), s.Enabled())
	}
	s.Succeeded(t1.Add(time.Hour - time.Millisecond))
	if !s.FailingSince().IsZero() || !s.UpdatedAt().Equal(t1.Add(time.Hour-time.Millisecond)) {
		t.Fatalf("a success: failing since %v, updated %v", s.FailingSince(), s.UpdatedAt())
	}
	restart := t1.Add(2 * time.Hour)
	s.Failed(restart, time.Hour)
	if !s.FailingSince().Equal(restart) || !s.Enabled() {
		t.Fatalf("a failure after a success starts a new period: failing since %v, enabled %v", s.FailingSince(), s.Enabled())
	}
	s.Failed(restart.Add(time.Hour), time.Hour)
	if s.Enabled() {
		t.Fatal("failing for exactly giveUp leaves the subscription enabled")
	}
	want := "every delivery failed for 1h0m0s since " + restart.UTC().Format(time.RFC3339)
	if s.DisabledReason() != want {
		t.Errorf("reason %q, want %q", s.DisabledReason(), want)
	}
	// A later failure does not rewrite why it was disabled.
	s.Failed(restart.Add(3*time.Hour), 2*time.Hour)
	if s.DisabledReason() != want {
		t.Errorf("a later failure changed the reason to %q", s.DisabledReason())
	}
}

// A stored subscription comes back as it was stored.
func TestRehydrateWebhookSubscription(t *testing.T) {
	types := []domain.EventType{domain.EventTaskFailed}
	s := domain.RehydrateWebhookSubscription(idOf("wh-stored"), "https://h.example.com/", types, "cur-secret", "old-secret",
		t1, false, "gave up", t0, t0, t1)
	types[0] = domain.EventTaskSucceeded
	prev, until := s.PreviousSecret()
	if s.ID() != idOf("wh-stored") || s.URL() != "https://h.example.com/" || !s.Wants(domain.EventTaskFailed) ||
		s.Wants(domain.EventTaskSucceeded) || s.Secret() != "cur-secret" || prev != "old-secret" || !until.Equal(t1) ||
		s.Enabled() || s.DisabledReason() != "gave up" || !s.FailingSince().Equal(t0) || !s.CreatedAt().Equal(t0) || !s.UpdatedAt().Equal(t1) {
		t.Errorf("rehydrated %+v", s)
	}
}
