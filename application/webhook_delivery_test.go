package application_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// queueSpy hands out claims of the given subscriptions, batch after batch,
// and records how outcomes are stored.
type queueSpy struct {
	mu      sync.Mutex
	subs    []domain.WebhookSubscription // one claimed delivery each, per claim
	claims  int
	singles []ports.DeliveryOutcome // FinishDelivery, with a settle
	batches [][]ports.DeliveryOutcome
}

func (q *queueSpy) ClaimDeliveries(_ context.Context, now time.Time, limit int, _ time.Time) ([]ports.ClaimedDelivery, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.claims++
	var out []ports.ClaimedDelivery
	for i, s := range q.subs[:min(limit, len(q.subs))] {
		out = append(out, ports.ClaimedDelivery{ID: int64(q.claims*100 + i), Attempts: 1, Subscription: s,
			Envelope: ports.WebhookEnvelope{ID: domain.UUIDOf([16]byte(uuid.New())), Type: domain.EventTaskSucceeded, Time: now, Version: 1, Data: []byte(`{}`)}})
	}
	return out, nil
}

func (q *queueSpy) FinishDelivery(_ context.Context, o ports.DeliveryOutcome, settle func(*domain.WebhookSubscription)) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if settle == nil {
		panic("FinishDelivery without a settle: a plain outcome belongs in FinishDeliveries' batch")
	}
	q.singles = append(q.singles, o)
	return nil
}

func (q *queueSpy) FinishDeliveries(_ context.Context, os []ports.DeliveryOutcome) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.batches = append(q.batches, os)
	return nil
}

func (q *queueSpy) claimed() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.claims
}

// answers is a receiver answering each URL with its status.
type answers map[string]int

func (a answers) Post(_ context.Context, url string, _ map[string]string, _ []byte) (int, error) {
	return a[url], nil
}

// load is a replica with a fixed number of requests in flight at every
// look, none of them ever finishing.
type load int

func (l load) InFlight() int { return int(l) }

func (load) Served() time.Duration { return 0 }

func (load) Finished() int64 { return 0 }

// steady is a replica serving many short requests: none in flight at any
// look, but on average n, its served time growing n times as fast as the
// wall clock.
type steady struct {
	start time.Time
	n     int
}

func (steady) InFlight() int { return 0 }

func (s steady) Served() time.Duration { return time.Since(s.start) * time.Duration(s.n) }

func (steady) Finished() int64 { return 0 }

// serving is a replica with inFlight requests in flight at every look,
// finishing perSecond requests a second.
type serving struct {
	start     time.Time
	inFlight  int
	perSecond float64
}

func (s serving) InFlight() int { return s.inFlight }

func (serving) Served() time.Duration { return 0 }

func (s serving) Finished() int64 { return int64(time.Since(s.start).Seconds() * s.perSecond) }

func subscription(t *testing.T, url string, failingSince time.Time) domain.WebhookSubscription {
	t.Helper()
	return domain.RehydrateWebhookSubscription(domain.UUIDOf([16]byte(uuid.New())), url, nil, "whsec_test", "", time.Time{}, true, "",
		failingSince, time.Unix(0, 0), time.Unix(0, 0))
}

func deliverer(t *testing.T, q *queueSpy, p application.WebhookPoster, l application.RequestLoad, cfg application.DeliveryConfig) *application.WebhookDeliverer {
	t.Helper()
	d, err := application.NewWebhookDeliverer(q, p, nowClock{}, l, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDeliveredAreStoredInOneWrite: the successes of healthy subscriptions
// in a claim are stored together, one write for the batch; an outcome that
// changes its subscription (a failure, or the success ending a failing
// period) is stored on its own with the change.
func TestDeliveredAreStoredInOneWrite(t *testing.T) {
	failing := time.Now().Add(-time.Hour)
	q := &queueSpy{subs: []domain.WebhookSubscription{
		subscription(t, "https://a.example/ok", time.Time{}),
		subscription(t, "https://b.example/down", time.Time{}),
		subscription(t, "https://c.example/ok", time.Time{}),
		subscription(t, "https://d.example/back", failing),
	}}
	p := answers{"https://a.example/ok": 204, "https://b.example/down": 503, "https://c.example/ok": 200, "https://d.example/back": 200}
	n, err := deliverer(t, q, p, load(0), application.DeliveryConfig{Batch: 8}).Once(t.Context())
	if err != nil || n != 4 {
		t.Fatalf("claimed %d, %v", n, err)
	}
	if len(q.batches) != 1 || len(q.batches[0]) != 2 {
		t.Fatalf("the plain successes were stored in %d writes (%+v); want one write of both", len(q.batches), q.batches)
	}
	for _, o := range q.batches[0] {
		if o.Status != ports.DeliveryDelivered || o.StatusCode < 200 || o.StatusCode > 299 || o.Attempts != 1 {
			t.Fatalf("a batched outcome: %+v", o)
		}
	}
	if len(q.singles) != 2 || q.singles[0].Status != ports.DeliveryPending || q.singles[0].StatusCode != 503 ||
		q.singles[1].Status != ports.DeliveryDelivered {
		t.Fatalf("the outcomes stored with their subscription's change: %+v; want the 503 retried and the failing one's success", q.singles)
	}
}

// TestDeliveryYieldsToABusyReplica: while the replica has BusyAt requests
// or more in flight, a worker waits as long as its deliveries take at
// BusyRate before claiming again; while it has fewer, or with pacing off,
// it claims again at once after a full batch.
func TestDeliveryYieldsToABusyReplica(t *testing.T) {
	sub := subscription(t, "https://a.example/ok", time.Time{})
	// Two deliveries a claim at one a second: two seconds between claims.
	cfg := application.DeliveryConfig{Workers: 1, Batch: 2, BusyRate: 1, BusyAt: 8}
	run := func(l application.RequestLoad, cfg application.DeliveryConfig) *queueSpy {
		q := &queueSpy{subs: []domain.WebhookSubscription{sub, sub}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { deliverer(t, q, answers{"https://a.example/ok": 204}, l, cfg).Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return q
	}
	waitClaims := func(q *queueSpy, n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for q.claimed() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d claims in 10 s; want %d at once", q.claimed(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}

	for name, l := range map[string]application.RequestLoad{"8 in flight": load(8), "10 on average": steady{time.Now(), 10}} {
		busy := run(l, cfg)
		waitClaims(busy, 1)
		time.Sleep(300 * time.Millisecond)
		if c := busy.claimed(); c != 1 {
			t.Fatalf("busy (%s): %d claims within 300 ms; want one, then a 2 s pause", name, c)
		}
	}
	waitClaims(run(load(7), cfg), 5)
	waitClaims(run(steady{time.Now(), 6}, cfg), 5)
	off := cfg
	off.BusyRate = -1
	waitClaims(run(load(100), off), 5)
}

// TestBusyPaceIsAShareOfTheRequests: a busy replica makes one delivery per
// BusyEvery requests it serves, and never fewer than BusyRate a second
// (W3): a replica serving 4,000 requests a second with one delivery per
// 1,000 delivers 4 a second (two deliveries, then 0.5 s); one serving 400
// a second, 0.4, below the floor of 1 (two, then 2 s rather than 5).
func TestBusyPaceIsAShareOfTheRequests(t *testing.T) {
	t.Parallel()
	sub := subscription(t, "https://a.example/ok", time.Time{})
	cfg := application.DeliveryConfig{Workers: 1, Batch: 2, BusyRate: 1, BusyEvery: 1000, BusyAt: 8}
	// From the second claim to the third: the first pause follows the
	// requests served during one batch, too short a look to count them.
	between := func(perSecond float64) time.Duration {
		q := &queueSpy{subs: []domain.WebhookSubscription{sub, sub}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			deliverer(t, q, answers{"https://a.example/ok": 204}, serving{time.Now(), 8, perSecond}, cfg).Run(ctx)
			close(done)
		}()
		defer func() { cancel(); <-done }()
		var from time.Time
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			switch c := q.claimed(); {
			case c >= 3:
				return time.Since(from)
			case c == 2 && from.IsZero():
				from = time.Now()
			}
		}
		t.Fatalf("at %v requests/s: no third claim within 15 s", perSecond)
		return 0
	}
	if d := between(4000); d < 200*time.Millisecond || d > 1500*time.Millisecond {
		t.Errorf("at 4,000 requests/s, one delivery per 1,000: %v between claims; want about 0.5 s", d)
	}
	if d := between(400); d < 1500*time.Millisecond || d > 3500*time.Millisecond {
		t.Errorf("at 400 requests/s, below the floor of 1/s: %v between claims; want about 2 s", d)
	}
}
