package application_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// claimLog hands out the claims it is given, once, and records what the
// worker asked for and how it stored each outcome; a settle is applied to
// the claimed subscription, as the store does under its lock.
type claimLog struct {
	mu         sync.Mutex
	claims     []ports.ClaimedDelivery
	limit      int
	now        time.Time
	leaseUntil time.Time
	singles    []ports.DeliveryOutcome
	settled    []domain.WebhookSubscription // the subscription after each single's settle
	batches    [][]ports.DeliveryOutcome
	subs       map[int64]domain.WebhookSubscription // each delivery's, as claimed
}

func (q *claimLog) ClaimDeliveries(_ context.Context, now time.Time, limit int, leaseUntil time.Time) ([]ports.ClaimedDelivery, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.now, q.limit, q.leaseUntil = now, limit, leaseUntil
	out := q.claims[:min(limit, len(q.claims))]
	q.claims = q.claims[len(out):]
	return out, nil
}

func (q *claimLog) FinishDelivery(_ context.Context, o ports.DeliveryOutcome, settle func(*domain.WebhookSubscription)) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.singles = append(q.singles, o)
	sub := q.subs[o.ID]
	settle(&sub)
	q.settled = append(q.settled, sub)
	return nil
}

func (q *claimLog) FinishDeliveries(_ context.Context, os []ports.DeliveryOutcome) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.batches = append(q.batches, os)
	return nil
}

// add queues a delivery to sub of an event that happened at eventAt,
// attempted attempts times so far (this claim's included).
func (q *claimLog) add(sub domain.WebhookSubscription, attempts int, eventAt time.Time) *claimLog {
	if q.subs == nil {
		q.subs = map[int64]domain.WebhookSubscription{}
	}
	id := int64(len(q.subs) + 1)
	q.subs[id] = sub
	q.claims = append(q.claims, ports.ClaimedDelivery{ID: id, Attempts: attempts, Subscription: sub,
		Envelope: ports.WebhookEnvelope{ID: domain.UUIDOf([16]byte(uuid.New())), Type: domain.EventTaskSucceeded, Time: eventAt, Version: 1, Data: []byte(`{}`)}})
	return q
}

// status answers every post with its code.
type status int

func (s status) Post(context.Context, string, map[string]string, []byte) (int, error) {
	return int(s), nil
}

// silent never answers: each post waits for its bound.
type silent struct{}

func (silent) Post(ctx context.Context, _ string, _ map[string]string, _ []byte) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func once(t *testing.T, q *claimLog, p application.WebhookPoster, now time.Time, cfg application.DeliveryConfig) int {
	t.Helper()
	d, err := application.NewWebhookDeliverer(q, p, &fixedClock{now}, load(0), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	n, err := d.Once(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func failingOutcomes(t *testing.T, q *claimLog, want int) []ports.DeliveryOutcome {
	t.Helper()
	if len(q.singles) != want || len(q.batches) != 0 {
		t.Fatalf("%d outcomes stored with a settle, %d batch writes; want %d failures and no batch", len(q.singles), len(q.batches), want)
	}
	return q.singles
}

// TestDeliveryDefaults: a zero config claims 8 deliveries at a time and
// leases them for 90 s, every attempt of the batch at its 10 s bound and
// one more (W3).
func TestDeliveryDefaults(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sub := subscription(t, "https://a.example/ok", time.Time{})
	q := &claimLog{}
	for range 10 {
		q.add(sub, 1, now)
	}
	if n := once(t, q, status(204), now, application.DeliveryConfig{}); n != 8 || q.limit != 8 {
		t.Fatalf("claimed %d with a limit of %d; want 8 of 8", n, q.limit)
	}
	if !q.now.Equal(now) || !q.leaseUntil.Equal(now.Add(90*time.Second)) {
		t.Fatalf("claimed at %v leased until %v; want a 90 s lease from %v", q.now, q.leaseUntil, now)
	}
	// A negative batch is the default too, not a claim of nothing.
	q = new(claimLog).add(sub, 1, now)
	if once(t, q, status(204), now, application.DeliveryConfig{Batch: -3}); q.limit != 8 {
		t.Fatalf("a negative batch claimed up to %d; want 8", q.limit)
	}
	// The lease follows the batch and the bound.
	q = &claimLog{}
	once(t, q, status(204), now, application.DeliveryConfig{Batch: 2, Timeout: time.Minute})
	if !q.leaseUntil.Equal(now.Add(3 * time.Minute)) {
		t.Fatalf("a batch of 2 at 1 min each leased until %v; want 3 min from %v", q.leaseUntil, now)
	}
}

// TestDeliveryOnlyTwoHundredsDeliver: a 2xx answer delivers; any other,
// a redirect included (W7: not followed), is a failed attempt retried.
func TestDeliveryOnlyTwoHundredsDeliver(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for code, delivered := range map[int]bool{100: false, 199: false, 200: true, 204: true, 299: true, 300: false, 302: false, 404: false, 500: false} {
		q := new(claimLog).add(subscription(t, "https://a.example/x", time.Time{}), 1, now)
		once(t, q, status(code), now, application.DeliveryConfig{})
		if delivered {
			if len(q.batches) != 1 || len(q.batches[0]) != 1 || q.batches[0][0].Status != ports.DeliveryDelivered || len(q.singles) != 0 {
				t.Fatalf("answered %d: batches %+v, singles %+v; want delivered", code, q.batches, q.singles)
			}
			continue
		}
		o := failingOutcomes(t, q, 1)[0]
		if o.Status != ports.DeliveryPending || o.StatusCode != code || o.Error != "answered "+strconv.Itoa(code) {
			t.Fatalf("answered %d: %+v; want pending, retried", code, o)
		}
	}
}

// TestDeliveryBackoff: the next attempt after a failure is at least a
// second away and at most FirstRetry doubled per attempt before this one,
// capped at MaxRetry, with full jitter: spread over that whole range (W4).
func TestDeliveryBackoff(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sub := subscription(t, "https://a.example/down", time.Time{})
	waits := func(attempts int, cfg application.DeliveryConfig) (lo, hi time.Duration) {
		t.Helper()
		const n = 200
		q := &claimLog{}
		for range n {
			q.add(sub, attempts, now)
		}
		cfg.Batch = n
		once(t, q, status(503), now, cfg)
		lo, hi = time.Duration(1<<62), 0
		for _, o := range failingOutcomes(t, q, n) {
			if o.Status != ports.DeliveryPending {
				t.Fatalf("attempt %d: %+v; want pending", attempts, o)
			}
			w := o.NextAttemptAt.Sub(now)
			lo, hi = min(lo, w), max(hi, w)
		}
		return lo, hi
	}
	check := func(attempts int, cfg application.DeliveryConfig, ceiling time.Duration) {
		t.Helper()
		lo, hi := waits(attempts, cfg)
		// 200 uniform draws: the extremes are within a tenth of the range's
		// ends but for a chance of 2×0.9^200, about 1e-9.
		spread := (ceiling - time.Second) / 10
		if lo < time.Second || hi > ceiling || lo > time.Second+spread || hi < ceiling-spread {
			t.Fatalf("after attempt %d (%+v): waits from %v to %v; want spread over 1s..%v", attempts, cfg, lo, hi, ceiling)
		}
	}
	check(1, application.DeliveryConfig{}, 5*time.Second)
	check(3, application.DeliveryConfig{}, 20*time.Second)
	check(20, application.DeliveryConfig{}, time.Hour)
	check(1, application.DeliveryConfig{FirstRetry: 3 * time.Second, MaxRetry: time.Minute}, 3*time.Second)
	check(4, application.DeliveryConfig{FirstRetry: 3 * time.Second, MaxRetry: time.Minute}, 24*time.Second)
	check(5, application.DeliveryConfig{FirstRetry: 3 * time.Second, MaxRetry: time.Minute}, 48*time.Second)
	check(6, application.DeliveryConfig{FirstRetry: 3 * time.Second, MaxRetry: time.Minute}, time.Minute)
	// Past where doubling would overflow, still capped, not wrapped round.
	for _, attempts := range []int{31, 32, 40, 1000} {
		check(attempts, application.DeliveryConfig{FirstRetry: 10 * time.Second, RetryFor: 1000 * time.Hour}, time.Hour)
	}
}

// TestDeliveryGivesUp: a failed attempt whose retry would come after
// RetryFor from the event fails the delivery for good, at once (W4).
func TestDeliveryGivesUp(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sub := subscription(t, "https://a.example/down", time.Time{})
	for _, tc := range []struct {
		eventAge time.Duration
		cfg      application.DeliveryConfig
		failed   bool
	}{
		{time.Hour, application.DeliveryConfig{}, false},
		{23 * time.Hour, application.DeliveryConfig{}, false}, // a 5 s retry is still within the day
		{24*time.Hour - time.Second, application.DeliveryConfig{}, true},
		{25 * time.Hour, application.DeliveryConfig{}, true},
		{time.Minute, application.DeliveryConfig{RetryFor: 30 * time.Second}, true},
		{25 * time.Hour, application.DeliveryConfig{RetryFor: 48 * time.Hour}, false},
	} {
		q := new(claimLog).add(sub, 1, now.Add(-tc.eventAge))
		once(t, q, status(500), now, tc.cfg)
		o := failingOutcomes(t, q, 1)[0]
		if tc.failed && (o.Status != ports.DeliveryFailed || !o.NextAttemptAt.Equal(now)) ||
			!tc.failed && (o.Status != ports.DeliveryPending || !o.NextAttemptAt.After(now)) {
			t.Fatalf("an event %v old (%+v): %+v; want failed %v", tc.eventAge, tc.cfg, o, tc.failed)
		}
	}
}

// TestDeliveryTimeout: an attempt not answered within Timeout is a failed
// one that says so, retried.
func TestDeliveryTimeout(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	q := new(claimLog).add(subscription(t, "https://a.example/slow", time.Time{}), 1, now)
	start := time.Now()
	once(t, q, silent{}, now, application.DeliveryConfig{Timeout: 50 * time.Millisecond})
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("an attempt bounded at 50 ms took %v", el)
	}
	o := failingOutcomes(t, q, 1)[0]
	if o.Status != ports.DeliveryPending || o.StatusCode != 0 || o.Error != "no answer within 50ms" {
		t.Fatalf("%+v; want pending, no answer within 50ms", o)
	}
	// Any other error is reported as it is.
	q = new(claimLog).add(subscription(t, "https://a.example/refused", time.Time{}), 1, now)
	once(t, q, refused{}, now, application.DeliveryConfig{})
	if o := failingOutcomes(t, q, 1)[0]; o.Status != ports.DeliveryPending || o.Error != "connection refused" {
		t.Fatalf("%+v; want pending, connection refused", o)
	}
}

type refused struct{}

func (refused) Post(context.Context, string, map[string]string, []byte) (int, error) {
	return 0, errors.New("connection refused")
}

// TestDeliveryDisables: a failed attempt starts the subscription's failing
// period; one failing DisableAfter (24 h by default) is disabled with the
// reason; a delivered attempt ends the period (W5).
func TestDeliveryDisables(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	settled := func(failingSince time.Time, p application.WebhookPoster, cfg application.DeliveryConfig) domain.WebhookSubscription {
		t.Helper()
		q := new(claimLog).add(subscription(t, "https://a.example/x", failingSince), 1, now)
		once(t, q, p, now, cfg)
		if len(q.settled) != 1 {
			t.Fatalf("%d outcomes changed the subscription; want 1", len(q.settled))
		}
		return q.settled[0]
	}
	if s := settled(time.Time{}, status(500), application.DeliveryConfig{}); !s.FailingSince().Equal(now) || !s.Enabled() {
		t.Fatalf("a first failure: failing since %v, enabled %v; want failing since %v, enabled", s.FailingSince(), s.Enabled(), now)
	}
	if s := settled(now.Add(-23*time.Hour), status(500), application.DeliveryConfig{}); !s.Enabled() {
		t.Fatal("failing for 23 h: disabled; want enabled until 24 h")
	}
	s := settled(now.Add(-24*time.Hour), status(500), application.DeliveryConfig{})
	if s.Enabled() || !strings.Contains(s.DisabledReason(), "24h0m0s") {
		t.Fatalf("failing for 24 h: enabled %v, reason %q; want disabled saying so", s.Enabled(), s.DisabledReason())
	}
	if s := settled(now.Add(-2*time.Hour), status(500), application.DeliveryConfig{DisableAfter: time.Hour}); s.Enabled() {
		t.Fatal("failing for 2 h with DisableAfter 1 h: enabled; want disabled")
	}
	if s := settled(now.Add(-2*time.Hour), status(204), application.DeliveryConfig{}); !s.FailingSince().IsZero() || !s.Enabled() {
		t.Fatalf("delivered after failing: failing since %v; want the period ended", s.FailingSince())
	}
}

// TestDeliveryFailuresWriteNoBatch: a claim whose attempts all failed
// stores each with its subscription's change, and no empty batch.
func TestDeliveryFailuresWriteNoBatch(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sub := subscription(t, "https://a.example/down", time.Time{})
	q := new(claimLog).add(sub, 1, now).add(sub, 2, now)
	once(t, q, status(503), now, application.DeliveryConfig{})
	if o := failingOutcomes(t, q, 2); o[0].Attempts != 1 || o[1].Attempts != 2 || !o[0].At.Equal(now) {
		t.Fatalf("%+v; want each claim's attempt count, at now", o)
	}
}

// TestDeliveryStopsWithItsContext: a worker stopping mid-batch stores
// nothing for the attempt cut short and attempts no more; the lease hands
// them to the next worker.
func TestDeliveryStopsWithItsContext(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sub := subscription(t, "https://a.example/x", time.Time{})
	q := new(claimLog).add(sub, 1, now).add(sub, 1, now).add(sub, 1, now)
	ctx, cancel := context.WithCancel(t.Context())
	p := &stopping{cancel: cancel}
	d, err := application.NewWebhookDeliverer(q, p, &fixedClock{now}, load(0), application.DeliveryConfig{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.Once(ctx); n != 3 || err != nil {
		t.Fatalf("claimed %d, %v", n, err)
	}
	if p.posts != 2 || len(q.singles) != 0 || len(q.batches) != 1 || len(q.batches[0]) != 1 {
		t.Fatalf("%d posts, singles %+v, batches %+v; want the first delivered and stored, the second cut short, no third", p.posts, q.singles, q.batches)
	}
}

// stopping answers its first post and stops the worker during its second.
type stopping struct {
	posts  int
	cancel context.CancelFunc
}

func (s *stopping) Post(context.Context, string, map[string]string, []byte) (int, error) {
	s.posts++
	if s.posts == 2 {
		s.cancel()
		return 0, context.Canceled
	}
	return 204, nil
}

// TestDeliveryPaceIsShared: BusyRate bounds the replica's deliveries, not
// each worker's: while busy, each of W workers waits as long as its batch
// takes at BusyRate/W (W3).
func TestDeliveryPaceIsShared(t *testing.T) {
	t.Parallel()
	sub := subscription(t, "https://a.example/ok", time.Time{})
	q := &queueSpy{subs: []domain.WebhookSubscription{sub, sub}}
	// Two workers, two deliveries a claim, one a second: each worker
	// waits 4 s after its claim (2 s if each had the whole rate, which the
	// check at 3 s tells apart with a second's margin either way).
	cfg := application.DeliveryConfig{Workers: 2, Batch: 2, BusyRate: 1, BusyAt: 8}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { deliverer(t, q, answers{"https://a.example/ok": 204}, load(8), cfg).Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	start := time.Now()
	for q.claimed() < 2 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the two workers did not claim within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	if c := q.claimed(); c != 2 {
		t.Fatalf("%d claims within 3 s; want the two workers' first, then a 4 s pause", c)
	}
	for q.claimed() < 3 {
		if time.Since(start) > 15*time.Second {
			t.Fatal("no claim after the pause within 15 s; want one after 4 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDeliveryClaimsAgainAfterAFullBatch: a worker whose claim came back
// full claims again at once, one whose claim was short waits Poll; and a
// replica is busy from 8 requests in flight unless BusyAt says otherwise.
func TestDeliveryClaimsAgainAfterAFullBatch(t *testing.T) {
	t.Parallel()
	sub := subscription(t, "https://a.example/ok", time.Time{})
	run := func(subs int, l application.RequestLoad, cfg application.DeliveryConfig, wait time.Duration) int {
		q := &queueSpy{subs: make([]domain.WebhookSubscription, subs)}
		for i := range q.subs {
			q.subs[i] = sub
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { deliverer(t, q, answers{"https://a.example/ok": 204}, l, cfg).Run(ctx); close(done) }()
		time.Sleep(wait)
		cancel()
		<-done
		return q.claimed()
	}
	// A long Poll: any wait for it would hold the worker past the test.
	cfg := application.DeliveryConfig{Workers: 1, Batch: 2, Poll: time.Hour, BusyRate: 1}
	if c := run(2, load(7), cfg, time.Second); c < 5 {
		t.Errorf("full batches, 7 in flight: %d claims in 1 s; want one after another", c)
	}
	// Many short requests, 6 on average since the worker's previous look
	// (a served time that has been growing for an hour), are not busy.
	if c := run(2, steady{time.Now().Add(-time.Hour), 6}, cfg, time.Second); c < 5 {
		t.Errorf("full batches, 6 on average: %d claims in 1 s; want one after another", c)
	}
	if c := run(1, load(0), cfg, 300*time.Millisecond); c != 1 {
		t.Errorf("a short batch: %d claims in 300 ms; want one, then Poll", c)
	}
	if c := run(2, load(8), cfg, 300*time.Millisecond); c != 1 {
		t.Errorf("full batches, 8 in flight: %d claims in 300 ms; want one, then a 2 s pause", c)
	}
}
