package application_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// sinkLog is an outbox of n events and one sink's cursor over it, as the
// store keeps them (application.EventSinkStore): fn is given the events
// after the cursor, and the cursor moves past the n fn returns. It
// answers errSinkDown instead while failures remain, or as script says
// (one step a call: 'F' fails, 'E' has nothing pending, 'B' a full
// batch), and notes when each call came, for which sink.
type sinkLog struct {
	mu       sync.Mutex
	events   []ports.WebhookEnvelope
	cursor   int
	limits   []int
	names    []string
	calls    []time.Time
	failures int
	script   string
	heldBy   bool // another replica holds the cursor
}

func newSinkLog(n int) *sinkLog {
	l := &sinkLog{}
	for i := range n {
		l.events = append(l.events, ports.WebhookEnvelope{ID: domain.UUIDOf([16]byte{byte(i + 1)}), Type: domain.EventTaskSucceeded, Version: 1})
	}
	return l
}

var errSinkDown = errors.New("sink down")

func (l *sinkLog) InSinkTx(_ context.Context, name string, limit int, fn func([]ports.WebhookEnvelope) (int, error)) (bool, error) {
	l.mu.Lock()
	l.calls = append(l.calls, time.Now())
	l.limits = append(l.limits, limit)
	l.names = append(l.names, name)
	if l.script != "" {
		step := l.script[0]
		l.script = l.script[1:]
		l.mu.Unlock()
		switch step {
		case 'F':
			return true, errSinkDown
		case 'B':
			_, err := fn(newSinkLog(limit).events)
			return true, err
		default:
			_, err := fn(nil)
			return true, err
		}
	}
	if l.heldBy {
		l.mu.Unlock()
		return false, nil
	}
	if l.failures > 0 {
		l.failures--
		l.mu.Unlock()
		return true, errSinkDown
	}
	pending := l.events[l.cursor:min(len(l.events), l.cursor+limit)]
	l.mu.Unlock()
	n, err := fn(pending)
	l.mu.Lock()
	l.cursor += min(max(n, 0), len(pending))
	l.mu.Unlock()
	return true, err
}

func (l *sinkLog) callTimes() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.calls...)
}

// sinkSpy is a sink keeping what it was sent; it refuses the event at
// failAt (an index into what it was sent) once.
type sinkSpy struct {
	mu     sync.Mutex
	sent   []domain.UUID
	failAt int
}

func (s *sinkSpy) Publish(_ context.Context, ev ports.WebhookEnvelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sent) == s.failAt {
		s.failAt = -1
		return errSinkDown
	}
	s.sent = append(s.sent, ev.ID)
	return nil
}

func (s *sinkSpy) published() []domain.UUID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]domain.UUID(nil), s.sent...)
}

// A batch that fails midway publishes what came before the failure, moves
// the cursor past only those, and the next batch starts at the failed one.
func TestPublishPendingMovesTheCursorPastThePublished(t *testing.T) {
	t.Parallel()
	log, sink := newSinkLog(5), &sinkSpy{failAt: 2}
	r := application.NewEventRelay(log, sink, application.EventRelayConfig{Sink: "nats", Batch: 4}, nil)
	ctx := t.Context()

	n, held, err := r.PublishPending(ctx)
	if !errors.Is(err, errSinkDown) || !held || n != 2 || log.cursor != 2 || log.names[0] != "nats" {
		t.Fatalf("failing batch: %d %v %v, cursor %d of %v; want 2 published, the cursor of nats at 2", n, held, err, log.cursor, log.names)
	}
	n, held, err = r.PublishPending(ctx)
	if err != nil || !held || n != 3 || log.cursor != 5 {
		t.Fatalf("next batch: %d %v %v, cursor %d; want 3 published, the cursor at 5", n, held, err, log.cursor)
	}
	if n, _, err := r.PublishPending(ctx); err != nil || n != 0 {
		t.Fatalf("nothing pending: %d %v", n, err)
	}
	sent := sink.published()
	if len(sent) != 5 {
		t.Fatalf("sent %d events, want each of 5 once", len(sent))
	}
	for i, id := range sent {
		if id != log.events[i].ID {
			t.Errorf("event %d sent out of order", i)
		}
	}

	log.heldBy = true
	if n, held, err := r.PublishPending(ctx); held || n != 0 || err != nil {
		t.Errorf("while another replica holds the cursor: %d %v %v", n, held, err)
	}
}

// Zero fields take the defaults: batches of 500, a pause between empty
// polls, and a bounded pause after a failure.
func TestEventRelayDefaults(t *testing.T) {
	t.Parallel()
	log := newSinkLog(0)
	r := application.NewEventRelay(log, &sinkSpy{failAt: -1}, application.EventRelayConfig{}, nil)
	if _, _, err := r.PublishPending(t.Context()); err != nil {
		t.Fatal(err)
	}
	if log.limits[0] != 500 {
		t.Errorf("default batch %d, want 500", log.limits[0])
	}

	ctx, cancel := context.WithTimeout(t.Context(), 600*time.Millisecond)
	defer cancel()
	r.Run(ctx)
	if n := len(log.callTimes()); n < 2 || n > 4 {
		t.Errorf("%d polls in 600ms, want one each 250ms", n)
	}

	failing := newSinkLog(0)
	failing.failures = 1000
	r = application.NewEventRelay(failing, &sinkSpy{failAt: -1}, application.EventRelayConfig{}, nil)
	ctx, cancel = context.WithTimeout(t.Context(), 400*time.Millisecond)
	defer cancel()
	r.Run(ctx)
	if n := len(failing.callTimes()); n < 2 || n > 6 {
		t.Errorf("%d tries in 400ms of failures, want a growing pause from 100ms", n)
	}
}

// A full batch is followed at once by the next; a short one, or a cursor
// another replica holds, waits Poll.
func TestEventRelayDrainsFullBatchesAtOnce(t *testing.T) {
	t.Parallel()
	log, sink := newSinkLog(5), &sinkSpy{failAt: -1}
	r := application.NewEventRelay(log, sink, application.EventRelayConfig{Batch: 2, Poll: time.Hour}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(sink.published()) < 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(sink.published()); n != 5 {
		t.Errorf("published %d of 5", n)
	}
	if n := len(log.callTimes()); n != 3 {
		t.Errorf("%d batches, want 3 (2, 2, 1, then the pause)", n)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Run went on after its context ended")
	}

	held := newSinkLog(5)
	held.heldBy = true
	r = application.NewEventRelay(held, sink, application.EventRelayConfig{Batch: 2, Poll: time.Hour}, nil)
	ctx, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	r.Run(ctx)
	if n := len(held.callTimes()); n != 1 {
		t.Errorf("%d tries while another replica holds the cursor, want 1 then the pause", n)
	}
}

// runUntil runs r until log has seen calls calls (or 10s), then stops it,
// and answers the pauses between the calls.
func runUntil(t *testing.T, r *application.EventRelay, log *sinkLog, calls int) []time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(log.callTimes()) < calls && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	<-done
	at := log.callTimes()
	if len(at) < calls {
		t.Fatalf("%d calls in 10s, want %d", len(at), calls)
	}
	gaps := make([]time.Duration, calls-1)
	for i := range gaps {
		gaps[i] = at[i+1].Sub(at[i])
	}
	return gaps
}

// After failures the pause doubles from 100ms, half of it jitter; a
// success, a short batch or a full one, starts it over.
func TestEventRelayBacksOff(t *testing.T) {
	t.Parallel()
	log := &sinkLog{script: "FFFEFFFBFE"}
	r := application.NewEventRelay(log, &sinkSpy{failAt: -1}, application.EventRelayConfig{Batch: 3, Poll: 10 * time.Millisecond, MaxBackoff: time.Hour}, nil)
	gaps := runUntil(t, r, log, 10)
	// Pauses after the 1st, 2nd and 3rd failure in a row: 50–100ms,
	// 100–200ms, 200–400ms.
	for i, least := range map[int]time.Duration{0: 50, 1: 100, 2: 200, 5: 100, 6: 200} {
		if gaps[i] < least*time.Millisecond {
			t.Errorf("pause %d: %v, want at least %dms", i, gaps[i], least)
		}
	}
	// A failure after a success pauses 50–100ms again, not 400–800ms.
	for _, i := range []int{4, 8} {
		if gaps[i] < 50*time.Millisecond || gaps[i] > 350*time.Millisecond {
			t.Errorf("pause %d, the first failure after a success: %v, want 50–100ms", i, gaps[i])
		}
	}
	if gaps[7] > 350*time.Millisecond {
		t.Errorf("after a full batch: %v, want the next at once", gaps[7])
	}
}

// The pause after a failure is MaxBackoff at most, its second half
// jitter: from MaxBackoff/2 to MaxBackoff once the doubling (100, 200,
// 400 ms) reaches it. Five such pauses all within 10 ms of each other, or
// all above 390 ms, are beyond chance (under 1 in 10^4) unless there is
// no jitter; a loaded machine only lengthens them, which the lower bound
// tolerates.
func TestEventRelayBackoffIsBoundedAndJittered(t *testing.T) {
	t.Parallel()
	log := &sinkLog{failures: 1000}
	r := application.NewEventRelay(log, &sinkSpy{failAt: -1}, application.EventRelayConfig{MaxBackoff: 400 * time.Millisecond}, nil)
	gaps := runUntil(t, r, log, 8)[2:]
	least, most := slices.Min(gaps), slices.Max(gaps)
	if least < 200*time.Millisecond || least >= 390*time.Millisecond || most-least < 10*time.Millisecond {
		t.Errorf("pauses at the bound %v, want 5 spread over 200–400ms", gaps)
	}

	bounded := newSinkLog(0)
	bounded.failures = 1000
	r = application.NewEventRelay(bounded, &sinkSpy{failAt: -1}, application.EventRelayConfig{MaxBackoff: 60 * time.Millisecond}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	r.Run(ctx)
	if n := len(bounded.callTimes()); n < 6 { // unbounded: 50+100+200+400 ms, so 4 at most
		t.Errorf("%d tries in 700ms with MaxBackoff 60ms, want a pause of 30–60ms each", n)
	}
}

// A relay whose context has ended does not touch the store.
func TestEventRelayStopsWithItsContext(t *testing.T) {
	t.Parallel()
	log := newSinkLog(3)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	application.NewEventRelay(log, &sinkSpy{failAt: -1}, application.EventRelayConfig{}, nil).Run(ctx)
	if n := len(log.callTimes()); n != 0 {
		t.Errorf("%d calls after the context ended", n)
	}
}
