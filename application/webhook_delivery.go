package application

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// DeliveryQueue is the outbox's deliveries as the delivery worker takes
// them: any replica claims, none twice at once.
type DeliveryQueue interface {
	// ClaimDeliveries leases up to limit pending deliveries due at now
	// (their subscription enabled), oldest due first, skipping those
	// another replica holds: each's attempts count one more and its next
	// attempt moves to leaseUntil, in the claim's own transaction, so a
	// replica that dies holding them leaves them due again after the lease.
	ClaimDeliveries(ctx context.Context, now time.Time, limit int, leaseUntil time.Time) ([]ports.ClaimedDelivery, error)
	// FinishDelivery stores an attempt's outcome unless the delivery was
	// claimed again since (its attempts moved on), and then, when settle
	// is not nil, lets it change the subscription (locked) and stores it,
	// in one transaction.
	FinishDelivery(ctx context.Context, o ports.DeliveryOutcome, settle func(*domain.WebhookSubscription)) error
	// FinishDeliveries stores several outcomes, each unless its delivery
	// was claimed again since, in one statement: a batch of successes
	// costs one write, not one each. A delivered one ends its
	// subscription's failing period as domain.WebhookSubscription.Succeeded
	// does, should one have begun since the claim read the subscription (a
	// failure of the same batch, or of another worker's claim).
	FinishDeliveries(ctx context.Context, os []ports.DeliveryOutcome) error
}

// RequestLoad is how busy this replica is serving requests: delivery is
// background work and yields to the devices and operators waiting on an
// answer.
type RequestLoad interface {
	// InFlight is the number of HTTP requests being served now.
	InFlight() int
	// Served is the time spent serving the requests finished so far: its
	// growth over an interval, divided by the interval, is how many were
	// in flight on average, which a snapshot of InFlight can miss.
	Served() time.Duration
	// Finished is the number of requests finished so far: its growth over
	// an interval is the replica's request rate, which the pace of a busy
	// replica's deliveries follows.
	Finished() int64
}

// WebhookPoster posts a delivery's body with its headers to url and says
// the answer's status code; an error means no answer (refused, timed
// out, a destination not allowed). Its errors name no URL or secret.
type WebhookPoster interface {
	Post(ctx context.Context, url string, header map[string]string, body []byte) (int, error)
}

// DeliveryConfig tunes the delivery worker; zero fields take the defaults.
type DeliveryConfig struct {
	Workers      int           // concurrent workers per replica (OTA_WEBHOOK_WORKERS, default 4; negative: none)
	Batch        int           // deliveries a worker claims at once (default 8)
	Poll         time.Duration // how long an idle worker waits before claiming again (default 1s)
	Timeout      time.Duration // one attempt's bound (default 10s)
	RetryFor     time.Duration // retries stop this long after the event (OTA_WEBHOOK_RETRY_FOR, default 24h)
	DisableAfter time.Duration // a subscription failing this long is disabled (OTA_WEBHOOK_DISABLE_AFTER, default 24h)
	FirstRetry   time.Duration // the backoff's base (default 5s), doubled per attempt
	MaxRetry     time.Duration // the backoff's cap (default 1h)
	// BusyEvery and BusyRate pace this replica's deliveries while it is
	// busy (BusyAt requests or more in flight, now or on average since a
	// worker's last batch): one delivery per BusyEvery requests it served
	// meanwhile, and never fewer than BusyRate a second. A delivery costs
	// a few checks' work wherever it runs, so a share of the requests
	// bounds the check path's slowdown on a small machine and a large one
	// alike, where a fixed rate is too costly on the one and too slow on
	// the other; the floor keeps a backlog moving behind slow requests
	// (OTA_WEBHOOK_BUSY_EVERY, default 100; OTA_WEBHOOK_BUSY_RATE, default
	// 10, negative: never paced).
	BusyEvery int
	BusyRate  float64
	BusyAt    int // requests in flight from which the replica is busy (default 8)
}

func (c DeliveryConfig) withDefaults() DeliveryConfig {
	or := func(v, def time.Duration) time.Duration {
		if v <= 0 {
			return def
		}
		return v
	}
	c.Batch = max(c.Batch, 0)
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.Batch == 0 {
		c.Batch = 8
	}
	c.Poll, c.Timeout = or(c.Poll, time.Second), or(c.Timeout, 10*time.Second)
	c.RetryFor, c.DisableAfter = or(c.RetryFor, 24*time.Hour), or(c.DisableAfter, 24*time.Hour)
	c.FirstRetry, c.MaxRetry = or(c.FirstRetry, 5*time.Second), or(c.MaxRetry, time.Hour)
	if c.BusyRate == 0 {
		c.BusyRate = 10
	}
	if c.BusyEvery <= 0 {
		c.BusyEvery = 100
	}
	if c.BusyAt <= 0 {
		c.BusyAt = 8
	}
	return c
}

// lease is how long a claim holds its deliveries: every attempt of the
// batch at its bound, and one more for the writes, so a live worker never
// sees its claims taken while a dead one's come back within minutes.
func (c DeliveryConfig) lease() time.Duration { return time.Duration(c.Batch+1) * c.Timeout }

// WebhookDeliverer delivers the outbox's events to their subscriptions:
// at least once, signed, retried with backoff until RetryFor after the
// event, then failed and kept (docs/DOMAIN.md W1–W7).
type WebhookDeliverer struct {
	queue  DeliveryQueue
	poster WebhookPoster
	clock  ports.Clock
	load   RequestLoad
	cfg    DeliveryConfig
	logger *slog.Logger
}

// NewWebhookDeliverer builds the worker.
func NewWebhookDeliverer(queue DeliveryQueue, poster WebhookPoster, clock ports.Clock, load RequestLoad, cfg DeliveryConfig,
	logger *slog.Logger) (*WebhookDeliverer, error) {
	if err := required(queue, poster, clock, load, logger); err != nil {
		return nil, err
	}
	return &WebhookDeliverer{queue: queue, poster: poster, clock: clock, load: load, cfg: cfg.withDefaults(), logger: logger}, nil
}

// Run delivers until ctx ends, with Workers concurrent workers; a worker
// whose claim came back full claims again at once (after its pause while
// the replica is busy), else it waits Poll.
func (d *WebhookDeliverer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range max(d.cfg.Workers, 0) {
		wg.Go(func() {
			last := loadSample{time.Now(), d.load.Served(), d.load.Finished()}
			for ctx.Err() == nil {
				n, err := d.Once(ctx)
				if err != nil && ctx.Err() == nil {
					d.logger.Warn("webhook delivery: claiming", "error", err)
				}
				wait := d.pause(n, &last)
				if err != nil || n < d.cfg.Batch {
					wait = max(wait, d.cfg.Poll)
				}
				if wait == 0 {
					continue
				}
				select {
				case <-ctx.Done():
				case <-time.After(wait):
				}
			}
		})
	}
	wg.Wait()
}

// loadSample is the request load a worker saw after its previous batch.
type loadSample struct {
	at       time.Time
	served   time.Duration
	finished int64
}

// pause is how long a worker that just attempted n deliveries waits before
// its next claim: none while the replica is not busy; while it is, as
// long as n deliveries take at the busy pace shared by the workers (one
// per BusyEvery requests served since last, at least BusyRate a second),
// so that they go on (no backlog starves) at a cost the check path hardly
// feels. Busy is BusyAt requests in flight now or on average since last:
// wall time, not the clock port, as it measures this process's real load.
func (d *WebhookDeliverer) pause(n int, last *loadSample) time.Duration {
	now, served, finished := time.Now(), d.load.Served(), d.load.Finished()
	elapsed := max(now.Sub(last.at), 1)
	average := float64(served-last.served) / float64(elapsed)
	rate := max(d.cfg.BusyRate, float64(finished-last.finished)/float64(d.cfg.BusyEvery)/elapsed.Seconds())
	*last = loadSample{now, served, finished}
	if n == 0 || d.cfg.BusyRate < 0 || d.load.InFlight() < d.cfg.BusyAt && average < float64(d.cfg.BusyAt) {
		return 0
	}
	return time.Duration(float64(n*max(d.cfg.Workers, 1)) / rate * float64(time.Second))
}

// Once claims one batch of due deliveries and attempts each, and says how
// many it claimed.
func (d *WebhookDeliverer) Once(ctx context.Context) (int, error) {
	now := d.clock.Now()
	claimed, err := d.queue.ClaimDeliveries(ctx, now, d.cfg.Batch, now.Add(d.cfg.lease()))
	if err != nil {
		return 0, fmt.Errorf("claiming webhook deliveries: %w", err)
	}
	var delivered []ports.DeliveryOutcome
	for _, c := range claimed {
		o, settle, err := d.attempt(ctx, c)
		if err == nil && settle == nil {
			delivered = append(delivered, o)
			continue
		}
		if err == nil {
			err = d.queue.FinishDelivery(ctx, o, settle)
		}
		if ctx.Err() != nil {
			break // stopping: the lease hands the rest to the next worker
		}
		if err != nil {
			d.logger.Warn("webhook delivery: storing the outcome", "delivery", c.ID, "subscription", c.Subscription.ID().String(), "error", err)
		}
	}
	if len(delivered) > 0 {
		// Stored even when stopping, so that what was delivered is not
		// sent again after the lease; bounded, as a shutdown is waiting.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
		defer cancel()
		if err := d.queue.FinishDeliveries(sctx, delivered); err != nil {
			d.logger.Warn("webhook delivery: storing the outcomes", "deliveries", len(delivered), "error", err)
		}
	}
	return len(claimed), nil
}

// attempt posts c once and says how it went: the outcome to store and, when
// the subscription's failing state changes, how (nil: it does not).
func (d *WebhookDeliverer) attempt(ctx context.Context, c ports.ClaimedDelivery) (ports.DeliveryOutcome, func(*domain.WebhookSubscription), error) {
	e, sub := c.Envelope, c.Subscription
	body, err := json.Marshal(e) // ports.WebhookEnvelope.MarshalJSON: every sink's one encoding
	if err != nil {
		return ports.DeliveryOutcome{}, nil, err
	}
	now := d.clock.Now()
	header := map[string]string{"Content-Type": "application/json", "X-OTA-Event-Id": e.ID.String(),
		"X-OTA-Event-Type": string(e.Type), "X-OTA-Delivery": strconv.FormatInt(c.ID, 10),
		domain.WebhookSignatureHeader: domain.WebhookSignature(sub.SigningSecrets(now), now, body)}
	actx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	status, err := d.poster.Post(actx, sub.URL(), header, body)
	cancel()
	if ctx.Err() != nil {
		return ports.DeliveryOutcome{}, nil, ctx.Err() // stopping: the lease hands the delivery to the next worker
	}
	now = d.clock.Now()
	o := ports.DeliveryOutcome{ID: c.ID, Attempts: c.Attempts, At: now, StatusCode: status, Status: ports.DeliveryDelivered}
	if err == nil && status >= 200 && status < 300 {
		if sub.FailingSince().IsZero() {
			return o, nil, nil
		}
		return o, func(s *domain.WebhookSubscription) { s.Succeeded(now) }, nil
	}
	o.Error = fmt.Sprintf("answered %d", status)
	if err != nil {
		o.Error = err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			o.Error = "no answer within " + d.cfg.Timeout.String()
		}
	}
	o.Status, o.NextAttemptAt = ports.DeliveryPending, now.Add(d.backoff(c.Attempts))
	if o.NextAttemptAt.After(e.Time.Add(d.cfg.RetryFor)) {
		o.Status, o.NextAttemptAt = ports.DeliveryFailed, now
	}
	d.logger.Info("webhook delivery failed", "delivery", c.ID, "subscription", sub.ID().String(), "event", e.ID.String(),
		"attempts", c.Attempts, "status", o.Status, "error", o.Error)
	return o, func(s *domain.WebhookSubscription) { s.Failed(now, d.cfg.DisableAfter) }, nil
}

// backoff is the wait before the attempt after the attempts-th: FirstRetry
// doubled per attempt, capped at MaxRetry, with full jitter (uniform from
// a second to that) so that receivers coming back are not hit by every
// replica at once.
func (d *WebhookDeliverer) backoff(attempts int) time.Duration {
	ceiling := d.cfg.MaxRetry
	if attempts < 31 {
		ceiling = min(d.cfg.FirstRetry<<max(attempts-1, 0), d.cfg.MaxRetry)
	}
	return time.Second + rand.N(max(ceiling-time.Second, 1))
}
