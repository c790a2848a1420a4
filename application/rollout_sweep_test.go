package application_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
)

// countedOpen counts the sweeps that listed the open rollouts.
type countedOpen struct {
	application.OpenRollouts
	listed atomic.Int64
}

func (c *countedOpen) AllOffers(ctx context.Context) (map[string][]domain.Offer, error) {
	c.listed.Add(1)
	return c.OpenRollouts.AllOffers(ctx)
}

// TestRolloutSweepRunsUntilStopped: Run sweeps at every interval and
// returns when its context ends; an interval that is not positive is
// refused at construction rather than spinning or never sweeping.
func TestRolloutSweepRunsUntilStopped(t *testing.T) {
	t.Parallel()
	store := memory.NewStore()
	open := &countedOpen{OpenRollouts: memory.NewRollouts(store)}
	logger := slog.New(slog.DiscardHandler)
	for _, bad := range []time.Duration{0, -time.Second} {
		if _, err := application.NewRolloutSweep(open, memory.NewTasks(store), local.Clock{}, bad, logger); err == nil {
			t.Errorf("interval %s accepted", bad)
		}
	}
	sweep, err := application.NewRolloutSweep(open, memory.NewTasks(store), local.Clock{}, time.Millisecond, logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { sweep.Run(ctx); close(stopped) }()
	deadline := time.After(30 * time.Second)
	for open.listed.Load() < 3 {
		select {
		case <-deadline:
			t.Fatalf("%d sweeps in 30 s at a 1 ms interval", open.listed.Load())
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	select {
	case <-stopped:
	case <-deadline:
		t.Fatal("Run did not return after its context ended")
	}
}
