package memory

import (
	"context"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Rollouts is the in-memory ports.RolloutRepository over a Store.
type Rollouts struct{ s *Store }

var _ ports.RolloutRepository = (*Rollouts)(nil)

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

// Create stores a new rollout of a stored firmware (domain.ErrNotFound
// otherwise); a revoke stored since the caller looked wins.
func (r *Rollouts) Create(ctx context.Context, ro domain.Rollout) error {
	rec := cloneRollout(ro).Record()
	rec.CreatedAt, rec.UpdatedAt = stamp(rec.CreatedAt), stamp(rec.UpdatedAt)
	return do(ctx, r.s, func() error {
		fw, err := found(r.s.firmwares, rec.FirmwareID)
		switch {
		case err != nil:
			return err
		case fw.Revoked():
			return domain.ErrFirmwareRevoked
		case has(r.s.rollouts, rec.ID):
			return errDuplicateID("rollout", rec.ID)
		}
		r.s.rollouts[rec.ID] = domain.RehydrateRollout(rec)
		return nil
	})
}

func (r *Rollouts) Get(ctx context.Context, id domain.UUID) (domain.Rollout, error) {
	return locked(ctx, r.s, func() (domain.Rollout, error) {
		ro, err := found(r.s.rollouts, id.String())
		return cloneRollout(ro), err
	})
}

// Update hands fn the rollout's firmware as stored now, and writes
// everything but the id, the firmware and the start time.
func (r *Rollouts) Update(ctx context.Context, id domain.UUID, fn func(*domain.Rollout, domain.Firmware) error) (domain.Rollout, error) {
	withFirmware := func(ro *domain.Rollout) error {
		*ro = cloneRollout(*ro)
		return fn(ro, r.s.firmwares[ro.FirmwareID().String()])
	}
	return update(ctx, r.s, r.s.rollouts, id.String(), withFirmware, func(old, c domain.Rollout) (domain.Rollout, error) {
		r.s.rollouts[id.String()] = mergeRollout(old, c)
		return cloneRollout(r.s.rollouts[id.String()]), nil
	})
}

// mergeRollout writes onto the stored rollout all a change may change.
func mergeRollout(stored, changed domain.Rollout) domain.Rollout {
	rec, c := stored.Record(), changed.Record()
	rec.Percentage, rec.MaxAttempts, rec.FailureThresholdPercent, rec.MinSample = c.Percentage, c.MaxAttempts, c.FailureThresholdPercent, c.MinSample
	rec.Status, rec.PausedReason, rec.UpdatedAt = c.Status, c.PausedReason, stamp(c.UpdatedAt)
	rec.Stage, rec.GateMetAt, rec.History = c.Stage, stamp(c.GateMetAt), c.History
	return cloneRollout(domain.RehydrateRollout(rec))
}

// Offers returns every active rollout of released firmware of model, in
// domain.SortOffers order.
func (r *Rollouts) Offers(ctx context.Context, model string) ([]domain.Offer, error) {
	return locked(ctx, r.s, func() ([]domain.Offer, error) {
		out := []domain.Offer{}
		for _, ro := range r.s.rollouts {
			fw, ok := r.s.firmwares[ro.FirmwareID().String()]
			if ok && ro.Status() == domain.RolloutActive && fw.Model() == model && fw.Status() == domain.FirmwareReleased {
				out = append(out, domain.Offer{Firmware: fw, Rollout: cloneRollout(ro)})
			}
		}
		domain.SortOffers(out)
		return out, nil
	})
}
