package memory

import (
	"context"
	"fmt"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Firmwares is the in-memory ports.FirmwareRepository over a Store.
type Firmwares struct{ s *Store }

var _ ports.FirmwareRepository = (*Firmwares)(nil)

func NewFirmwares(s *Store) *Firmwares { return &Firmwares{s: s} }

// sameRelease reports whether a and b are one publication: the same model
// and version, build metadata ignored (1.2.0+a and 1.2.0+b collide).
func sameRelease(a, b domain.Firmware) bool {
	return a.Model() == b.Model() && a.Version().Key() == b.Version().Key()
}

// Create stores a new firmware; domain.ErrFirmwareExists if its model has
// one of the same version or artifact name already.
func (r *Firmwares) Create(ctx context.Context, f domain.Firmware) error {
	id := f.ID().String()
	stored, err := domain.RehydrateFirmware(id, f.Spec(), f.Status(), stamp(f.CreatedAt()), stamp(f.UpdatedAt()))
	if err != nil {
		return err
	}
	return do(ctx, r.s, func() error {
		for _, o := range r.s.firmwares {
			if sameRelease(o, f) || (f.ArtifactName() != "" && o.Model() == f.Model() && o.ArtifactName() == f.ArtifactName()) {
				return domain.ErrFirmwareExists
			}
		}
		if _, taken := r.s.firmwares[id]; taken {
			return errDuplicateID("firmware", id)
		}
		if a := f.ArtifactID(); !a.IsZero() && !has(r.s.artifacts, a.String()) {
			return fmt.Errorf("the artifact does not exist: %w", domain.ErrNotFound) // the foreign key
		}
		r.s.firmwares[id] = stored
		return nil
	})
}

func (r *Firmwares) Get(ctx context.Context, id domain.UUID) (domain.Firmware, error) {
	return locked(ctx, r.s, func() (domain.Firmware, error) { return found(r.s.firmwares, id.String()) })
}

// List returns a model's firmware (all when model is ""), newest first.
func (r *Firmwares) List(ctx context.Context, model string) ([]domain.Firmware, error) {
	return locked(ctx, r.s, func() ([]domain.Firmware, error) {
		out := where(r.s.firmwares, func(f domain.Firmware) bool { return model == "" || f.Model() == model })
		return page(out, len(out), 0, func(a, b domain.Firmware) bool {
			return newer(a.CreatedAt(), b.CreatedAt(), a.ID().String(), b.ID().String())
		}), nil
	})
}

// Update writes everything but the id and the publication time.
func (r *Firmwares) Update(ctx context.Context, id domain.UUID, fn func(*domain.Firmware) error) (domain.Firmware, error) {
	return update(ctx, r.s, r.s.firmwares, id.String(), fn, func(f, c domain.Firmware) (domain.Firmware, error) {
		merged, err := domain.RehydrateFirmware(id.String(), c.Spec(), c.Status(), f.CreatedAt(), stamp(c.UpdatedAt()))
		if err != nil {
			return domain.Firmware{}, err
		}
		for oid, o := range r.s.firmwares {
			if oid != id.String() && sameRelease(o, merged) {
				return domain.Firmware{}, domain.ErrFirmwareExists
			}
		}
		r.s.firmwares[id.String()] = merged
		return merged, nil
	})
}
