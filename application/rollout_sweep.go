package application

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// OpenRollouts lists what RolloutSweep re-judges: every active rollout of
// released firmware, with its firmware, by model.
type OpenRollouts interface {
	AllOffers(ctx context.Context) (map[string][]domain.Offer, error)
}

// RolloutSweep re-judges every open rollout that has something to judge,
// at an interval, as a final event does after its commit (JudgeRollout).
// A final event's judgement runs after its transaction commits (event
// rule 5), so a replica that stops between the two, or a database that
// fails the judgement's read, leaves a threshold crossed or a gate held
// but unjudged until the rollout's next final event; the sweep makes that
// judgement late rather than never — also for a rollout's last events,
// after which no event would come. A judgement that changes nothing takes
// no lock, so every replica may sweep.
type RolloutSweep struct {
	open     OpenRollouts
	tasks    TaskTransactor
	clock    ports.Clock
	interval time.Duration
	logger   *slog.Logger
}

// NewRolloutSweep builds the sweep, run every interval (> 0).
func NewRolloutSweep(open OpenRollouts, tasks TaskTransactor, clock ports.Clock, interval time.Duration, logger *slog.Logger) (*RolloutSweep, error) {
	if err := required(open, tasks, clock, logger); err != nil {
		return nil, err
	}
	if interval <= 0 {
		return nil, fmt.Errorf("the rollout sweep's interval must be positive, not %s", interval)
	}
	return &RolloutSweep{open: open, tasks: tasks, clock: clock, interval: interval, logger: logger}, nil
}

// Run sweeps every interval until ctx ends.
func (s *RolloutSweep) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := s.Once(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("rollout sweep", "changed", n, "error", err)
		}
	}
}

// Once re-judges every open rollout that has something to judge and says
// how many it changed; a rollout whose judgement fails does not keep the
// others from theirs (the first error is returned).
func (s *RolloutSweep) Once(ctx context.Context) (int, error) {
	all, err := s.open.AllOffers(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing the open rollouts: %w", err)
	}
	changed, judge := 0, judgeRollout(s.clock)
	var first error
	for _, offers := range all {
		for _, o := range offers {
			if !o.Rollout.Judges() {
				continue
			}
			_, did, err := JudgeRollout(ctx, s.tasks, o.Firmware.ID(), o.Rollout.ID(), judge)
			if err != nil {
				if first == nil {
					first = fmt.Errorf("judging rollout %s: %w", o.Rollout.ID(), err)
				}
				continue
			}
			if did {
				changed++
			}
		}
	}
	return changed, first
}
