package memory

import (
	"context"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Firmwares is the in-memory ports.FirmwareRepository over a Store.
type Firmwares struct{ s *Store }

var _ ports.FirmwareRepository = (*Firmwares)(nil)

// NewFirmwares returns the firmware repository of s; repositories built over
// the same Store share data like tables of one database.
func NewFirmwares(s *Store) *Firmwares { return &Firmwares{s: s} }

// Create stores a new firmware; domain.ErrFirmwareExists if its model
// already has a firmware of the same version, build metadata ignored.
func (r *Firmwares) Create(ctx context.Context, f domain.Firmware) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id := f.ID().String()
	stored, err := domain.RehydrateFirmware(id, f.Spec(), f.Status(), stamp(f.CreatedAt()), stamp(f.UpdatedAt()))
	if err != nil {
		return err
	}
	key := firmwareKey{model: f.Model(), version: f.Version().Key()}
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, taken := s.firmwareKeys[key]; taken {
		return domain.ErrFirmwareExists
	}
	if _, taken := s.artifactLocked(f.Model(), f.ArtifactName()); taken {
		return domain.ErrFirmwareExists // artifact names are unique per model
	}
	if _, taken := s.firmwares[id]; taken {
		return errDuplicateID("firmware", id)
	}
	s.firmwares[id] = stored
	s.firmwareKeys[key] = id
	return nil
}

// Get loads a firmware by id; the zero id is domain.ErrNotFound.
func (r *Firmwares) Get(ctx context.Context, id domain.UUID) (domain.Firmware, error) {
	return read(ctx, &r.s.mu, func() (domain.Firmware, error) { return found(r.s.firmwares, id.String()) })
}

// List returns a model's firmware (all models when model is ""), newest
// first: by creation time descending, then id descending so that firmware
// published in the same microsecond still lists in a stable order.
func (r *Firmwares) List(ctx context.Context, model string) ([]domain.Firmware, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := r.s
	s.mu.Lock()
	out := make([]domain.Firmware, 0, len(s.firmwares))
	for _, f := range s.firmwares {
		if model == "" || f.Model() == model {
			out = append(out, f)
		}
	}
	s.mu.Unlock()
	return page(out, len(out), 0, func(a, b domain.Firmware) bool {
		return newer(a.CreatedAt(), b.CreatedAt(), a.ID().String(), b.ID().String())
	}), nil
}

// Update loads the firmware locked, lets fn change a copy, and stores it
// only if fn returns nil. As in the Postgres adapter, everything but the id
// and the publication time is written (in practice only the status changes);
// a (model, version) another firmware has is domain.ErrFirmwareExists.
func (r *Firmwares) Update(ctx context.Context, id domain.UUID, fn func(*domain.Firmware) error) (domain.Firmware, error) {
	s := r.s
	return update(ctx, s.writes, &s.mu, func() (domain.Firmware, error) { return found(s.firmwares, id.String()) }, fn, func(f, changed domain.Firmware) (domain.Firmware, error) {
		merged, err := domain.RehydrateFirmware(id.String(), changed.Spec(), changed.Status(), f.CreatedAt(), stamp(changed.UpdatedAt()))
		if err != nil {
			return domain.Firmware{}, err
		}
		oldKey := firmwareKey{model: f.Model(), version: f.Version().Key()}
		if newKey := (firmwareKey{model: merged.Model(), version: merged.Version().Key()}); newKey != oldKey {
			if _, taken := s.firmwareKeys[newKey]; taken {
				return domain.Firmware{}, domain.ErrFirmwareExists
			}
			delete(s.firmwareKeys, oldKey)
			s.firmwareKeys[newKey] = id.String()
		}
		s.firmwares[id.String()] = merged
		return merged, nil
	})
}
