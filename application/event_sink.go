package application

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/ai-device/ota/ports"
)

// EventSinkStore is what the relay asks of the store: the sink's cursor
// over the outbox, held by one replica at a time.
type EventSinkStore interface {
	// InSinkTx claims sink name's cursor and runs fn with the events after
	// it (at most limit, in the order they are to be published); the
	// cursor moves past the first n of them, n being what fn returns, in
	// the same transaction, even when fn also returns an error. ok is
	// false, and fn is not run, while another replica holds the cursor.
	InSinkTx(ctx context.Context, name string, limit int, fn func(pending []ports.WebhookEnvelope) (n int, err error)) (ok bool, err error)
}

// EventPublisher publishes one event to a sink, returning once the sink
// has it (JetStream: acknowledged). Publishing an event again is harmless:
// the sink drops a repeat by the event's id.
type EventPublisher interface {
	Publish(ctx context.Context, ev ports.WebhookEnvelope) error
}

// EventRelayConfig tunes an EventRelay; zero fields take the defaults.
type EventRelayConfig struct {
	// Sink names the cursor (one per sink).
	Sink string
	// Batch is how many events one transaction publishes (default 500).
	Batch int
	// Poll is the pause when nothing is pending, or another replica holds
	// the cursor (default 250ms).
	Poll time.Duration
	// MaxBackoff bounds the pause after a failure (default 30s); the first
	// is 100ms, doubling, with jitter.
	MaxBackoff time.Duration
}

// EventRelay publishes every outbox event to a sink, in order, at least
// once: the events other systems stream (NATS JetStream) rather than
// receive (webhooks). Each replica runs one; the cursor's lock lets one
// publish at a time, and the others take over when it stops.
type EventRelay struct {
	store  EventSinkStore
	pub    EventPublisher
	cfg    EventRelayConfig
	logger *slog.Logger
}

// NewEventRelay relays the events in store to pub.
func NewEventRelay(store EventSinkStore, pub EventPublisher, cfg EventRelayConfig, logger *slog.Logger) *EventRelay {
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &EventRelay{store: store, pub: pub, cfg: cfg, logger: logger}
}

// PublishPending publishes one batch of pending events, if this replica
// holds the cursor: how many it published, and whether it held it.
func (r *EventRelay) PublishPending(ctx context.Context) (published int, held bool, err error) {
	held, err = r.store.InSinkTx(ctx, r.cfg.Sink, r.cfg.Batch, func(pending []ports.WebhookEnvelope) (int, error) {
		for i, ev := range pending {
			if err := r.pub.Publish(ctx, ev); err != nil {
				return i, err
			}
			published = i + 1
		}
		return len(pending), nil
	})
	return published, held, err
}

// Run relays until ctx ends. A sink or store that fails is retried with
// a growing pause, and never blocks anything else: the service serves,
// and its events wait in the outbox.
func (r *EventRelay) Run(ctx context.Context) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		n, held, err := r.PublishPending(ctx)
		var pause time.Duration
		switch {
		case err != nil && ctx.Err() == nil:
			backoff = min(max(2*backoff, 100*time.Millisecond), r.cfg.MaxBackoff)
			pause = backoff/2 + rand.N(backoff/2+1) //nolint:gosec // jitter, not a secret
			r.logger.Warn("event sink: publishing failed; retrying", "sink", r.cfg.Sink, "published", n,
				"retry_in", pause.String(), "error", err.Error())
		case err != nil:
			return
		case held && n == r.cfg.Batch:
			backoff = 0
			continue // more may be pending
		default:
			backoff = 0
			pause = r.cfg.Poll
		}
		if err := sleepCtx(ctx, pause); err != nil {
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
