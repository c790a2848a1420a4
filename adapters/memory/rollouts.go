package memory

import (
	"context"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Rollouts is the in-memory ports.RolloutRepository over a Store.
type Rollouts struct{ s *Store }

var _ ports.RolloutRepository = (*Rollouts)(nil)

// NewRollouts returns the rollout repository of s; repositories built over
// the same Store share data like tables of one database.
func NewRollouts(s *Store) *Rollouts { return &Rollouts{s: s} }

// cloneRollout copies r so that no caller shares the stored threshold
// pointer: changing a returned rollout's record must not change the store.
func cloneRollout(r domain.Rollout) domain.Rollout {
	rec := r.Record()
	if p := rec.FailureThresholdPercent; p != nil {
		v := *p
		rec.FailureThresholdPercent = &v
	}
	return domain.RehydrateRollout(rec)
}

// Create stores a new rollout; domain.ErrNotFound if its firmware is not
// stored, as the foreign key would say.
func (r *Rollouts) Create(ctx context.Context, ro domain.Rollout) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rec := cloneRollout(ro).Record()
	id, fwID := rec.ID, rec.FirmwareID
	rec.CreatedAt, rec.UpdatedAt = stamp(rec.CreatedAt), stamp(rec.UpdatedAt)
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	fw, ok := s.firmwares[fwID]
	if !ok {
		return domain.ErrNotFound
	}
	if fw.Revoked() { // as the Postgres adapter: a revoke committed since the caller looked wins
		return domain.ErrFirmwareRevoked
	}
	if _, taken := s.rollouts[id]; taken {
		return errDuplicateID("rollout", id)
	}
	s.rollouts[id] = domain.RehydrateRollout(rec)
	return nil
}

// Get loads a rollout by id; the zero id is domain.ErrNotFound.
func (r *Rollouts) Get(ctx context.Context, id domain.UUID) (domain.Rollout, error) {
	ro, err := read(ctx, &r.s.mu, func() (domain.Rollout, error) { return found(r.s.rollouts, id.String()) })
	return cloneRollout(ro), err
}

// Update loads the rollout and its firmware under the store's writer lock
// (a revoke waits, and the rule fn judges on the firmware holds when the
// change is stored), lets fn change a copy, and stores it only if fn
// returns nil. As in the Postgres adapter, everything but the id, the
// firmware (tasks reference the pair) and the start time is written.
func (r *Rollouts) Update(ctx context.Context, id domain.UUID, fn func(*domain.Rollout, domain.Firmware) error) (domain.Rollout, error) {
	s := r.s
	var fw domain.Firmware
	load := func() (domain.Rollout, error) {
		ro, err := found(s.rollouts, id.String())
		fw = s.firmwares[ro.FirmwareID().String()]
		return cloneRollout(ro), err
	}
	return update(ctx, s.writes, &s.mu, load, func(ro *domain.Rollout) error { return fn(ro, fw) }, func(old, changed domain.Rollout) (domain.Rollout, error) {
		merged := mergeRollout(s.rollouts[id.String()], changed)
		s.rollouts[id.String()] = merged
		return cloneRollout(merged), nil
	})
}

// mergeRollout writes onto the stored rollout what the Postgres UPDATE
// writes: everything but the id, the firmware and the start time.
func mergeRollout(stored, changed domain.Rollout) domain.Rollout {
	rec, c := stored.Record(), changed.Record()
	rec.Percentage, rec.MaxAttempts, rec.FailureThresholdPercent, rec.MinSample = c.Percentage, c.MaxAttempts, c.FailureThresholdPercent, c.MinSample
	rec.Status, rec.PausedReason, rec.UpdatedAt = c.Status, c.PausedReason, stamp(c.UpdatedAt)
	rec.Stage, rec.GateMetAt, rec.History = c.Stage, stamp(c.GateMetAt), c.History
	return cloneRollout(domain.RehydrateRollout(rec))
}

// Offers returns every active rollout of released firmware of model, with
// its firmware, highest version first (domain.SortOffers) so that callers
// and tests see a stable order.
func (r *Rollouts) Offers(ctx context.Context, model string) ([]domain.Offer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := r.s
	s.mu.Lock()
	out := []domain.Offer{}
	for _, ro := range s.rollouts {
		if ro.Status() != domain.RolloutActive {
			continue
		}
		fw, ok := s.firmwares[ro.FirmwareID().String()]
		if !ok || fw.Model() != model || fw.Status() != domain.FirmwareReleased {
			continue
		}
		out = append(out, domain.Offer{Firmware: fw, Rollout: cloneRollout(ro)})
	}
	s.mu.Unlock()
	domain.SortOffers(out)
	return out, nil
}
