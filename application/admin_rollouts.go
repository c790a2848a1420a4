package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// RolloutCounts counts a rollout's tasks for its view, and stores the
// operators' changes in the task transaction (UpdateRollout).
type RolloutCounts interface {
	TaskTransactor
	// RolloutStatsSince counts a rollout's devices by status, in the store,
	// each once (by the task domain.CountsOver picks among its tasks),
	// among the tasks created at or after since: a staged rollout's
	// current stage (stage rule G2), or all of them for the zero time.
	RolloutStatsSince(ctx context.Context, rolloutID domain.UUID, since time.Time) (domain.TaskStats, error)
}

// RolloutAdmin starts, changes and shows rollouts.
type RolloutAdmin struct {
	firmwares ports.FirmwareRepository
	rollouts  ports.RolloutRepository
	tasks     RolloutCounts
	clock     ports.Clock
	ids       ports.IDGenerator
}

// NewRolloutAdmin builds the operators' rollout use cases (tasks counts a
// rollout's tasks).
func NewRolloutAdmin(firmwares ports.FirmwareRepository, rollouts ports.RolloutRepository, tasks RolloutCounts,
	clock ports.Clock, ids ports.IDGenerator) (*RolloutAdmin, error) {
	if err := required(firmwares, rollouts, tasks, clock, ids); err != nil {
		return nil, err
	}
	return &RolloutAdmin{firmwares: firmwares, rollouts: rollouts, tasks: tasks, clock: clock, ids: ids}, nil
}

// StartRollout starts an active rollout of a released firmware. The
// firmware id is read here, once for every edge: a missing one is
// VALIDATION_FAILED; a malformed one names no firmware, and docs/ERRORS.md
// answers an unknown firmware with NOT_FOUND, so it is that. A start with
// an Idempotency-Key that a stored rollout was started with is answered
// with that rollout (docs/DOMAIN.md, Rollout): looked for before anything
// else, so that a retry finds it even once its firmware is revoked, and
// again when the start fails, for a first start that committed meanwhile
// (a racing retry's insert, or the first one's, before a revoke).
func (s *RolloutAdmin) StartRollout(ctx context.Context, actor domain.Actor, req ports.StartRollout) (domain.Rollout, error) {
	if req.FirmwareID == "" {
		return domain.Rollout{}, &domain.ValidationError{Field: "firmware_id", Reason: "is required"}
	}
	fwID, err := domain.ParseUUID("firmware_id", req.FirmwareID)
	if err != nil {
		return domain.Rollout{}, fmt.Errorf("firmware %.64q: %w", req.FirmwareID, domain.ErrNotFound)
	}
	if req.Spec.RequestKey, err = domain.ParseRequestKey(req.RequestKey); err != nil {
		return domain.Rollout{}, err
	}
	key, err := req.Spec.KeyFor(fwID)
	if err != nil {
		return domain.Rollout{}, err
	}
	if r, started, err := s.started(ctx, key); started || err != nil {
		return r, err
	}
	r, err := s.start(ctx, actor, fwID, req.Spec)
	if err != nil {
		if prior, started, err := s.started(ctx, key); started || err != nil {
			return prior, err
		}
	}
	return r, err
}

// start makes and stores a new rollout of the firmware fwID.
func (s *RolloutAdmin) start(ctx context.Context, actor domain.Actor, fwID domain.UUID, spec domain.RolloutSpec) (domain.Rollout, error) {
	fw, err := s.firmwares.Get(ctx, fwID)
	if err != nil {
		return domain.Rollout{}, fmt.Errorf("loading firmware: %w", err)
	}
	r, err := domain.NewRollout(s.ids.NewID(), fw, spec, s.clock.Now())
	if err != nil {
		return domain.Rollout{}, err
	}
	rec, err := announced(actor.Record(r.CreatedAt(), domain.AuditRolloutStart, r.ID().String(), nil, rolloutFacts(r)))(
		domain.EventRolloutCreated, r.CreatedAt(), map[string]any{"rollout_id": r.ID().String(), "firmware_id": fw.ID().String(),
			"model": fw.Model(), "version": fw.Version().String(), "percentage": r.Percentage()})
	if err != nil {
		return domain.Rollout{}, err
	}
	// A rollout that admits every device from the start (100 %, or a
	// single stage) is complete at once: the same rule as for a change,
	// from no rollout.
	done, err := domain.RolloutAnnouncements(domain.Rollout{}, r, r.CreatedAt())
	if err != nil {
		return domain.Rollout{}, err
	}
	rec = rec.Announcing(done...)
	if err := s.rollouts.Create(ctx, r, rec); err != nil {
		return domain.Rollout{}, fmt.Errorf("starting rollout: %w", err)
	}
	return r, nil
}

// started is the rollout a start with key already made, if one did: the
// answer to a retry, or the conflict of a key reused for another request.
func (s *RolloutAdmin) started(ctx context.Context, key domain.RequestKey) (domain.Rollout, bool, error) {
	if key.IsZero() {
		return domain.Rollout{}, false, nil
	}
	r, err := s.rollouts.ByRequestKey(ctx, key.Key())
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return domain.Rollout{}, false, nil
	case err != nil:
		return domain.Rollout{}, true, fmt.Errorf("finding the rollout of an Idempotency-Key: %w", err)
	}
	if err := key.Repeats(r.RequestKey()); err != nil {
		return domain.Rollout{}, true, err
	}
	return r, true, nil
}

// UpdateRollout widens, narrows, pauses, resumes or cancels a rollout.
// Every rule is applied at the devices' next check, so nothing sweeps the fleet.
func (s *RolloutAdmin) UpdateRollout(ctx context.Context, actor domain.Actor, id domain.UUID, change ports.RolloutChange) (domain.Rollout, error) {
	if id.IsZero() { // an id the edge could not parse names no rollout
		return domain.Rollout{}, fmt.Errorf("rollout: %w", domain.ErrNotFound)
	}
	if change.Percentage == nil && change.Status == nil {
		return domain.Rollout{}, &domain.ValidationError{Reason: "give percentage, status, or both"}
	}
	var to *domain.RolloutStatus
	if change.Status != nil {
		st, err := domain.ParseRolloutStatus(*change.Status)
		if err != nil {
			return domain.Rollout{}, err
		}
		to = &st
	}
	now := s.clock.Now()
	// The firmware comes from the rollout's own transaction, locked against
	// a revoke: "resumed only while released" holds at commit.
	r, err := UpdateRollout(ctx, s.tasks, id, func(r *domain.Rollout, fw domain.Firmware) error {
		// Percentage first: {"percentage":0,"status":"cancelled"} is a
		// coherent request, and a cancelled rollout refuses any change.
		if change.Percentage != nil {
			if err := r.SetPercentage(*change.Percentage, now); err != nil {
				return err
			}
		}
		if to != nil {
			return r.ChangeStatus(*to, fw, now)
		}
		return nil
	}, func(before, after domain.Rollout) (domain.AuditRecord, error) {
		return actor.Record(now, domain.AuditRolloutUpdate, id.String(), rolloutFacts(before), rolloutFacts(after))
	})
	if err != nil {
		return domain.Rollout{}, fmt.Errorf("updating rollout: %w", err)
	}
	return r, nil
}

// GetRollout shows a rollout with its task counts, counted by the store.
func (s *RolloutAdmin) GetRollout(ctx context.Context, id domain.UUID) (ports.RolloutView, error) {
	r, err := s.rollouts.Get(ctx, id)
	if err != nil {
		return ports.RolloutView{}, fmt.Errorf("loading rollout: %w", err)
	}
	stats, err := s.tasks.RolloutStatsSince(ctx, id, time.Time{})
	if err != nil {
		return ports.RolloutView{}, fmt.Errorf("counting rollout tasks: %w", err)
	}
	v := ports.RolloutView{Rollout: r, Stats: stats}
	if since := r.StageSince(); !since.IsZero() {
		st, err := s.tasks.RolloutStatsSince(ctx, id, since)
		if err != nil {
			return ports.RolloutView{}, fmt.Errorf("counting the current stage's tasks: %w", err)
		}
		v.StageStats = &st
	}
	return v, nil
}
