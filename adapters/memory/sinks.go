package memory

import (
	"context"
	"slices"
	"sync"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// EventSinks keeps the event sinks' cursors in process: the outbox's
// events are in commit order already (every change holds the store's
// lock), so a cursor is the last seq published.
type EventSinks struct {
	s       *Store
	mu      sync.Mutex
	cursors map[string]int64
	held    map[string]bool
}

// NewEventSinks keeps the cursors of sinks over s's outbox.
func NewEventSinks(s *Store) *EventSinks {
	return &EventSinks{s: s, cursors: map[string]int64{}, held: map[string]bool{}}
}

// InSinkTx runs fn with the events after the cursor, unless another
// relay holds it, and moves the cursor past the n fn published. fn runs
// outside the store's lock: a slow sink never stalls a change.
func (e *EventSinks) InSinkTx(ctx context.Context, name string, limit int,
	fn func(pending []ports.WebhookEnvelope) (int, error)) (bool, error) {
	e.mu.Lock()
	if e.held[name] {
		e.mu.Unlock()
		return false, nil
	}
	e.held[name] = true
	after := e.cursors[name]
	e.mu.Unlock()
	defer func() { e.mu.Lock(); delete(e.held, name); e.mu.Unlock() }()

	pending, err := locked(ctx, e.s, func() ([]storedEvent, error) {
		out := slices.DeleteFunc(slices.Clone(e.s.outbox[min(int(after), len(e.s.outbox)):]), // seq is the index + 1
			func(ev storedEvent) bool { return ev.Type() == domain.EventTest })
		return out[:min(len(out), max(limit, 0))], nil
	})
	if err != nil {
		return true, err
	}
	envs := make([]ports.WebhookEnvelope, len(pending))
	for i, ev := range pending {
		envs[i] = ev.envelope()
	}
	n, err := fn(envs)
	if n = min(max(n, 0), len(pending)); n > 0 {
		e.mu.Lock()
		e.cursors[name] = pending[n-1].seq
		e.mu.Unlock()
	}
	return true, err
}
