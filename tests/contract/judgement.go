package contract

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
)

// evaluateAt judges as the events use case does (a rollout with something
// to judge, on its whole counters), at a fixed instant.
func evaluateAt(at time.Time) application.RolloutEvaluation {
	return func(r *domain.Rollout, stats func(time.Time) (domain.TaskStats, error)) (bool, error) {
		if !r.Evaluates() {
			return false, nil
		}
		total, err := stats(time.Time{})
		return r.Evaluate(total, domain.TaskStats{}, at), err
	}
}

// finalEventsAcrossAThreshold: final events of one rollout committed at
// once, none of which holds the rollout's lock, together cross its
// threshold, and it pauses: each judges after its commit, so the last
// to commit sees them all. The threshold is 100 % of a sample of every
// device, so only a judgement that sees every failure can pause it; one
// made inside each event's transaction, without the lock, sees its own
// and those committed before it, and misses when they overlap.
func (s *repoSuite) finalEventsAcrossAThreshold(t *testing.T) {
	ctx := t.Context()
	const devices, rounds = 16, 3
	for round := range rounds {
		model := repoName("model")
		fw := s.firmware(t, repoSpec(model, "2.0.0"), s.at(1), true)
		threshold := 100
		o := domain.Offer{Firmware: fw, Rollout: s.rollout(t, fw, domain.RolloutSpec{Percentage: 100,
			FailureThresholdPercent: &threshold, MinSample: new(devices)}, s.at(2), true)}
		var ids []domain.UUID
		for range devices {
			ids = append(ids, s.insert(t, s.newTask(t, s.device(t, model, "1.0.0").ID(), o, 1, s.at(10))).ID())
		}
		start := make(chan struct{})
		errs := make(chan error, devices)
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				ev := repoEvent(t, "end", "failed", nil)
				<-start
				_, err := application.ApplyEvent(ctx, s.Tasks, id, ev, func(tk *domain.Task, prior *domain.Event) (bool, error) {
					return tk.ApplyEvent(ev, prior, s.at(11))
				}, evaluateAt(s.at(12)))
				errs <- err
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			repoNoErr(t, "final event", err)
		}
		r, err := s.Rollouts.Get(ctx, o.Rollout.ID())
		repoNoErr(t, "rollout", err)
		if r.Status() != domain.RolloutPaused || r.PausedReason() != domain.PausedAuto {
			t.Fatalf("round %d: rollout %s (%q) after %d of %d devices failed, want paused by its threshold",
				round, r.Status(), r.PausedReason(), devices, devices)
		}
	}
}

// sweepJudgesWhatAnEventLeft: a final event whose judgement was lost (its
// replica stopped after the commit: here, one judged by nobody) is judged
// by the next sweep; a sweep with nothing to change changes nothing, and
// a rollout with nothing to judge is not judged.
func (s *repoSuite) sweepJudges(t *testing.T) {
	ctx := t.Context()
	if s.Open == nil {
		t.Fatal("the contract's Repos has no Open: the sweep's port is part of the contract")
	}
	model := repoName("model")
	fw := s.firmware(t, repoSpec(model, "2.0.0"), s.at(1), true)
	threshold := 50
	watched := domain.Offer{Firmware: fw, Rollout: s.rollout(t, fw, domain.RolloutSpec{Percentage: 100,
		FailureThresholdPercent: &threshold, MinSample: new(1)}, s.at(2), true)}
	plain := s.offer(t, model, "3.0.0")
	open := modelOnly{open: s.Open, model: model}
	if all, err := open.AllOffers(ctx); err != nil || len(all[model]) != 2 {
		t.Fatalf("open rollouts of the model: %v, %v; want the two just started", all[model], err)
	}
	sweep, err := application.NewRolloutSweep(open, s.Tasks, fixedClock(s.at(20)), time.Minute, slog.New(slog.DiscardHandler))
	repoNoErr(t, "sweep", err)
	if n, err := sweep.Once(ctx); err != nil || n != 0 {
		t.Fatalf("a sweep with nothing to judge changed %d rollouts (%v)", n, err)
	}

	for _, o := range []domain.Offer{watched, plain} {
		tk := s.insert(t, s.newTask(t, s.device(t, model, "1.0.0").ID(), o, 1, s.at(10)))
		ev := repoEvent(t, "end", "failed", nil)
		if _, err := application.ApplyEvent(ctx, s.Tasks, tk.ID(), ev, func(x *domain.Task, prior *domain.Event) (bool, error) {
			return x.ApplyEvent(ev, prior, s.at(11))
		}, nil); err != nil {
			t.Fatalf("final event: %v", err)
		}
	}
	if r, _ := s.Rollouts.Get(ctx, watched.Rollout.ID()); r.Status() != domain.RolloutActive {
		t.Fatalf("rollout %s before the sweep, want active: nothing judged it yet", r.Status())
	}
	n, err := sweep.Once(ctx)
	repoNoErr(t, "sweep", err)
	r, err := s.Rollouts.Get(ctx, watched.Rollout.ID())
	repoNoErr(t, "rollout", err)
	if n != 1 || r.Status() != domain.RolloutPaused || r.PausedReason() != domain.PausedAuto || !r.UpdatedAt().Equal(repoUs(s.at(20))) {
		t.Fatalf("sweep changed %d; rollout %s (%q) at %v, want 1: paused by its threshold at the sweep's %v",
			n, r.Status(), r.PausedReason(), r.UpdatedAt(), s.at(20))
	}
	if p, _ := s.Rollouts.Get(ctx, plain.Rollout.ID()); p.Status() != domain.RolloutActive {
		t.Fatalf("a rollout with nothing to judge is %s after the sweep", p.Status())
	}
	if n, err := sweep.Once(ctx); err != nil || n != 0 {
		t.Fatalf("a second sweep changed %d rollouts (%v), want none", n, err)
	}
}

// modelOnly is the store's list of open rollouts cut to one model, so a
// sweep judges only the test's own rollouts in a store other tests share.
type modelOnly struct {
	open  application.OpenRollouts
	model string
}

func (m modelOnly) AllOffers(ctx context.Context) (map[string][]domain.Offer, error) {
	all, err := m.open.AllOffers(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing: %w", err)
	}
	return map[string][]domain.Offer{m.model: all[m.model]}, nil
}

// fixedClock is a clock that always reads one instant.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }
