package application

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// CounterDrift is a rollout's counter of one status, in one scope (the
// whole rollout, zero Stage, or the stage started at Stage), that differs
// from a recount of its tasks.
type CounterDrift struct {
	Rollout           domain.UUID
	Stage             time.Time
	Status            domain.TaskStatus
	Stored, Recounted int
}

// VerifyCounters recounts a rollout's tasks (every rollout's for the zero
// id) and compares the recount with the counters the task transactions
// kept (ReplaceActive, ApplyEvent, UpdateTask): it returns how many
// rollouts it recounted and every counter that drifted, by rollout, stage
// and status. A scope missing on one side counts zero there.
func VerifyCounters(ctx context.Context, audit ports.CounterAudit, rolloutID domain.UUID) (rollouts int, drift []CounterDrift, err error) {
	stored, err := audit.StoredCounts(ctx, rolloutID)
	if err != nil {
		return 0, nil, fmt.Errorf("reading the counters: %w", err)
	}
	recounted, err := audit.Recount(ctx, rolloutID)
	if err != nil {
		return 0, nil, fmt.Errorf("recounting the tasks: %w", err)
	}
	type scope struct {
		rollout domain.UUID
		stage   time.Time
	}
	pairs := map[scope]*[2]domain.TaskStats{}
	ids := map[domain.UUID]bool{}
	for side, counts := range [][]ports.RolloutCount{stored, recounted} {
		for _, c := range counts {
			k := scope{c.Rollout, c.Stage.UTC()}
			if pairs[k] == nil {
				pairs[k] = &[2]domain.TaskStats{}
			}
			pairs[k][side] = pairs[k][side].Plus(c.Stats)
			ids[c.Rollout] = true
		}
	}
	for k, p := range pairs {
		for _, st := range domain.AllTaskStatuses {
			if a, b := p[0].Of(st), p[1].Of(st); a != b {
				drift = append(drift, CounterDrift{Rollout: k.rollout, Stage: k.stage, Status: st, Stored: a, Recounted: b})
			}
		}
	}
	slices.SortFunc(drift, func(a, b CounterDrift) int {
		return cmp.Or(cmp.Compare(a.Rollout.String(), b.Rollout.String()), a.Stage.Compare(b.Stage), cmp.Compare(a.Status.String(), b.Status.String()))
	})
	return len(ids), drift, nil
}
