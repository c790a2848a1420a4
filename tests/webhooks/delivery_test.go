package webhooks

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// TestReceiverDownThenBackGetsEveryEvent: a receiver that answers 503 for
// hours (the clock advanced past retries) gets every event once it is
// back, each signed, and its subscription is not failing any more.
func TestReceiverDownThenBackGetsEveryEvent(t *testing.T) {
	for name, newStore := range map[string]func(*testing.T) store{"postgres": postgresStore, "memory": memoryStore} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, newStore(t))
			recv := newReceiver(t, r.clock)
			sub := r.subscribe(t, recv.URL+"/hook")
			recv.trust(sub.Secret)
			d := r.deliverer(t, true, application.DeliveryConfig{})
			recv.down.Store(true)
			r.announce(t, domain.EventTaskSucceeded, 15)
			r.announce(t, domain.EventRolloutPaused, 5)
			for range 6 { // six hours down, retried all along
				drain(t, d)
				r.clock.advance(time.Hour + time.Minute)
			}
			if s, _ := r.hooks.GetWebhook(t.Context(), sub.Subscription.ID()); s.FailingSince().IsZero() || !s.Enabled() {
				t.Fatalf("after hours of failures: failing since %v, enabled %v", s.FailingSince(), s.Enabled())
			}
			recv.down.Store(false)
			r.clock.advance(time.Hour + time.Minute) // past the longest backoff
			drain(t, d)
			all, distinct, bad := recv.received()
			if len(distinct) != 20 || len(all) != 20 || bad != 0 {
				t.Fatalf("received %d deliveries of %d events (%d badly signed), want each of 20 once", len(all), len(distinct), bad)
			}
			for _, l := range r.log(t, sub.Subscription.ID()) {
				if l.Status != ports.DeliveryDelivered || l.Attempts < 7 || l.LastStatusCode != http.StatusNoContent {
					t.Fatalf("a delivery after the outage: %+v", l)
				}
			}
			if s, _ := r.hooks.GetWebhook(t.Context(), sub.Subscription.ID()); !s.FailingSince().IsZero() {
				t.Fatal("the subscription is still failing after deliveries succeeded")
			}
		})
	}
}

// TestReplicaKilledMidDeliveryLosesNothing: two workers on one database;
// the first is killed (its context cancelled) while a receiver holds its
// first post. Its claims stay leased (the second does not take them
// early), then come back to the second after the lease: every event
// arrives.
func TestReplicaKilledMidDeliveryLosesNothing(t *testing.T) {
	r := newRig(t, postgresStore(t))
	recv := newReceiver(t, r.clock)
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	hold := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(held)
			<-release
			w.WriteHeader(http.StatusNoContent) // the killed replica never hears it
			return
		}
		recv.serve(w, req)
	})
	recv.Config.Handler = hold
	sub := r.subscribe(t, recv.URL+"/hook")
	recv.trust(sub.Secret)
	r.announce(t, domain.EventTaskFailed, 30)
	cfg := application.DeliveryConfig{Batch: 8}
	killed, survivor := r.deliverer(t, true, cfg), r.deliverer(t, true, cfg)

	ctx, kill := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := killed.Once(ctx); done <- err }()
	<-held
	kill()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(release)
	drain(t, survivor)
	_, distinct, _ := recv.received()
	if len(distinct) != 30-8 {
		t.Fatalf("before the lease ran out the survivor delivered %d events, want the %d the killed replica did not hold", len(distinct), 30-8)
	}
	r.clock.advance(time.Duration(cfg.Batch+1) * 10 * time.Second) // the lease
	drain(t, survivor)
	all, distinct, bad := recv.received()
	if len(distinct) != 30 || bad != 0 {
		t.Fatalf("after the lease: %d distinct events of 30 (%d deliveries, %d bad)", len(distinct), len(all), bad)
	}
	for _, l := range r.log(t, sub.Subscription.ID()) {
		if l.Status != ports.DeliveryDelivered {
			t.Fatalf("a delivery left behind: %+v", l)
		}
	}
}

// TestBurstOfTenThousandDrains: 10,000 task events, delivered by a
// replica's workers running as in production (Run), all arrive: as many
// distinct event ids as events, each signed, none left pending.
func TestBurstOfTenThousandDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("a burst of 10,000 deliveries")
	}
	const events = 10000
	r := newRig(t, postgresStore(t))
	recv := newReceiver(t, r.clock)
	sub := r.subscribe(t, recv.URL+"/hook", "task.succeeded")
	recv.trust(sub.Secret)
	r.announce(t, domain.EventTaskSucceeded, events)
	d := r.deliverer(t, true, application.DeliveryConfig{Workers: 4, Batch: 32, Poll: 20 * time.Millisecond})
	ctx, stop := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	start := time.Now()
	go func() { d.Run(ctx); close(stopped) }()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if _, distinct, _ := recv.received(); len(distinct) == events || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	stop()
	<-stopped
	all, distinct, bad := recv.received()
	if len(distinct) != events || bad != 0 {
		t.Fatalf("received %d distinct events of %d (%d deliveries, %d bad)", len(distinct), events, len(all), bad)
	}
	t.Logf("%d events delivered in %s: %.0f/s (%d deliveries: at least once)", events, took.Round(time.Millisecond),
		float64(events)/took.Seconds(), len(all))
	pending := 0
	for _, l := range r.log(t, sub.Subscription.ID()) {
		if l.Status != ports.DeliveryDelivered {
			pending++
		}
	}
	if pending != 0 {
		t.Fatalf("%d deliveries not marked delivered", pending)
	}
}

// TestSubscriptionGetsOnlyItsTypes: a subscription to one type is sent
// that type only; one to every type gets them all.
func TestSubscriptionGetsOnlyItsTypes(t *testing.T) {
	r := newRig(t, postgresStore(t))
	only, every := newReceiver(t, r.clock), newReceiver(t, r.clock)
	a := r.subscribe(t, only.URL, "rollout.paused")
	b := r.subscribe(t, every.URL)
	only.trust(a.Secret)
	every.trust(b.Secret)
	for _, typ := range domain.EventTypes() {
		r.announce(t, typ, 2)
	}
	drain(t, r.deliverer(t, true, application.DeliveryConfig{}))
	if _, got, _ := only.received(); len(got) != 2 {
		t.Fatalf("the rollout.paused subscription got %v", got)
	} else {
		for _, typ := range got {
			if typ != "rollout.paused" {
				t.Fatalf("the rollout.paused subscription got a %s", typ)
			}
		}
	}
	if _, got, _ := every.received(); len(got) != 2*len(domain.EventTypes()) {
		t.Fatalf("the subscription to every type got %d events, want %d", len(got), 2*len(domain.EventTypes()))
	}
}

// TestTamperedDeliveryFailsVerification: what a receiver got verifies with
// its secret; the same body changed by a byte, or the same delivery
// checked with another secret, does not. A rotation signs with both.
func TestTamperedDeliveryFailsVerification(t *testing.T) {
	r := newRig(t, postgresStore(t))
	recv := newReceiver(t, r.clock)
	sub := r.subscribe(t, recv.URL)
	recv.trust(sub.Secret)
	eventID, err := r.hooks.SendTestEvent(t.Context(), r.actor, sub.Subscription.ID())
	if err != nil {
		t.Fatal(err)
	}
	d := r.deliverer(t, true, application.DeliveryConfig{})
	drain(t, d)
	all, _, _ := recv.received()
	if len(all) != 1 || all[0].ID != eventID.String() || all[0].Type != string(domain.EventTest) {
		t.Fatalf("received %+v, want the test event %s", all, eventID)
	}
	got, now := all[0], r.clock.Now()
	header := got.Header.Get("X-OTA-Signature")
	if err := domain.VerifyWebhook(header, []string{sub.Secret}, got.Body, now, domain.WebhookReplayWindow); err != nil {
		t.Fatal(err)
	}
	tampered := []byte(strings.Replace(string(got.Body), "webhook.test", "webhook.tesu", 1))
	if err := domain.VerifyWebhook(header, []string{sub.Secret}, tampered, now, domain.WebhookReplayWindow); !errors.Is(err, domain.ErrWebhookSignature) {
		t.Fatalf("a tampered body: %v", err)
	}
	if err := domain.VerifyWebhook(header, []string{"whsec_not_the_subscription_secret"}, got.Body, now, domain.WebhookReplayWindow); !errors.Is(err, domain.ErrWebhookSignature) {
		t.Fatalf("another secret: %v", err)
	}
	// Rotated: a receiver still on the old secret verifies, and one on the new.
	rotated, err := r.hooks.ChangeWebhook(t.Context(), r.actor, sub.Subscription.ID(), ports.WebhookChange{RotateSecret: true})
	if err != nil || rotated.Secret == "" || rotated.Secret == sub.Secret {
		t.Fatalf("rotating: %+v, %v", rotated, err)
	}
	if _, err := r.hooks.SendTestEvent(t.Context(), r.actor, sub.Subscription.ID()); err != nil {
		t.Fatal(err)
	}
	drain(t, d)
	all, _, bad := recv.received()
	if len(all) != 2 || bad != 0 {
		t.Fatalf("after the rotation: %d received, %d bad", len(all), bad)
	}
	for _, secret := range []string{sub.Secret, rotated.Secret} {
		if err := domain.VerifyWebhook(all[1].Header.Get("X-OTA-Signature"), []string{secret}, all[1].Body, now, domain.WebhookReplayWindow); err != nil {
			t.Fatalf("during the rotation, with one of the secrets: %v", err)
		}
	}
}

// TestPrivateDestinationRefusedUnlessAllowed: a worker not allowed private
// destinations never reaches a loopback receiver; the log says why, and
// the URL's token is not in it. Allowed, the same delivery arrives.
func TestPrivateDestinationRefusedUnlessAllowed(t *testing.T) {
	r := newRig(t, postgresStore(t))
	recv := newReceiver(t, r.clock)
	sub := r.subscribe(t, recv.URL+"/hook?token=sekrit")
	recv.trust(sub.Secret)
	r.announce(t, domain.EventFirmwarePublished, 1)
	drain(t, r.deliverer(t, false, application.DeliveryConfig{}))
	if all, _, _ := recv.received(); len(all) != 0 {
		t.Fatalf("a loopback receiver was reached: %+v", all)
	}
	l := r.log(t, sub.Subscription.ID())
	if len(l) != 1 || l[0].Status != ports.DeliveryPending || !strings.Contains(l[0].LastError, "refused") || strings.Contains(l[0].LastError, "sekrit") {
		t.Fatalf("the log: %+v", l)
	}
	r.clock.advance(time.Hour)
	drain(t, r.deliverer(t, true, application.DeliveryConfig{}))
	if _, distinct, _ := recv.received(); len(distinct) != 1 {
		t.Fatalf("allowed, received %d", len(distinct))
	}
}

// TestGiveUpAndDisable: a delivery failing past RetryFor after its event
// is marked failed and kept; a subscription failing longer than
// DisableAfter is disabled, says why, and is not sent new events.
func TestGiveUpAndDisable(t *testing.T) {
	r := newRig(t, postgresStore(t))
	recv := newReceiver(t, r.clock)
	recv.down.Store(true)
	sub := r.subscribe(t, recv.URL)
	d := r.deliverer(t, true, application.DeliveryConfig{RetryFor: 2 * time.Hour, DisableAfter: 5 * time.Hour})
	r.announce(t, domain.EventDeviceRegistered, 3)
	for range 3 * 4 { // three hours in quarters
		drain(t, d)
		r.clock.advance(15 * time.Minute)
	}
	for _, l := range r.log(t, sub.Subscription.ID()) {
		if l.Status != ports.DeliveryFailed || l.LastStatusCode != http.StatusServiceUnavailable || l.Attempts < 2 {
			t.Fatalf("a delivery failing for longer than RetryFor: %+v", l)
		}
	}
	if s, _ := r.hooks.GetWebhook(t.Context(), sub.Subscription.ID()); !s.Enabled() {
		t.Fatalf("disabled before DisableAfter: %q", s.DisabledReason())
	}
	for range 3 * 4 { // failing for six hours: new events keep failing
		r.announce(t, domain.EventDeviceRegistered, 1)
		drain(t, d)
		r.clock.advance(15 * time.Minute)
	}
	s, _ := r.hooks.GetWebhook(t.Context(), sub.Subscription.ID())
	if s.Enabled() || !strings.Contains(s.DisabledReason(), "failed for 5h0m0s") {
		t.Fatalf("after failing for six hours: enabled %v, reason %q", s.Enabled(), s.DisabledReason())
	}
	recv.down.Store(false)
	r.announce(t, domain.EventDeviceRegistered, 1)
	r.clock.advance(2 * time.Hour)
	drain(t, d)
	if all, _, _ := recv.received(); len(all) != 0 {
		t.Fatalf("a disabled subscription was sent %d deliveries", len(all))
	}
}
