package application_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// byEvent answers each event id with its status (200 when not named).
type byEvent struct {
	mu     sync.Mutex
	status map[string]int
}

func (b *byEvent) Post(_ context.Context, _ string, header map[string]string, _ []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.status[header["X-OTA-Event-Id"]]; ok {
		return s, nil
	}
	return 200, nil
}

// TestDeliveredAfterAFailureInOneClaimEndsTheFailingPeriod: W5, "a failed
// attempt starts the subscription's failing period (if not started); a
// delivered one ends it". One claim holds two deliveries of one
// subscription: the first fails (its last attempt: it is given up), the
// second is delivered after it. The success ends the failing period; a
// single failure days later starts a new one and does not disable a
// subscription that has not been failing for OTA_WEBHOOK_DISABLE_AFTER.
func TestDeliveredAfterAFailureInOneClaimEndsTheFailingPeriod(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	clock := &fixedClock{now: t0.Add(-24 * time.Hour)}
	store := memory.NewWebhooks(memory.NewStore())
	w, err := application.NewWebhooks(store, clock, local.NewUUIDs())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c, err := w.CreateWebhook(ctx, testActor, ports.NewWebhook{URL: "https://hooks.example.com/ota", Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	sub := c.Subscription.ID()
	old, err := w.SendTestEvent(ctx, testActor, sub) // 24 h ago: this claim is its last attempt
	if err != nil {
		t.Fatal(err)
	}
	clock.now = t0
	fresh, err := w.SendTestEvent(ctx, testActor, sub)
	if err != nil {
		t.Fatal(err)
	}
	poster := &byEvent{status: map[string]int{old.String(): 500}}
	d, err := application.NewWebhookDeliverer(store, poster, clock, load(0), application.DeliveryConfig{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.Once(ctx); err != nil || n != 2 {
		t.Fatalf("claimed %d, %v; want both deliveries in one claim", n, err)
	}
	page, err := w.Deliveries(ctx, sub, "", "")
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("deliveries %+v %v", page, err)
	}
	for _, it := range page.Items {
		want := map[domain.UUID]ports.DeliveryStatus{old: ports.DeliveryFailed, fresh: ports.DeliveryDelivered}[it.EventID]
		if it.Status != want {
			t.Fatalf("delivery of %s is %s, want %s", it.EventID, it.Status, want)
		}
	}
	s, err := w.GetWebhook(ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	if !s.FailingSince().IsZero() {
		t.Errorf("after a delivery that succeeded after the failure, failing_since = %s; want none (W5: a delivered one ends it)",
			s.FailingSince().Format(time.RFC3339))
	}

	// Three quiet days later, one failed attempt: the subscription has
	// been failing for seconds, not 24 hours.
	clock.now = t0.Add(72 * time.Hour)
	blip, err := w.SendTestEvent(ctx, testActor, sub)
	if err != nil {
		t.Fatal(err)
	}
	poster.mu.Lock()
	poster.status[blip.String()] = 503
	poster.mu.Unlock()
	if _, err := d.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err = w.GetWebhook(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if !s.Enabled() {
		t.Errorf("one failed attempt, the first since a delivery, disabled the subscription: %q", s.DisabledReason())
	}
}
