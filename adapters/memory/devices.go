package memory

import (
	"context"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Devices is the in-memory ports.DeviceRepository over a Store.
type Devices struct{ s *Store }

var _ ports.DeviceRepository = (*Devices)(nil)

func NewDevices(s *Store) *Devices { return &Devices{s: s} }

// storedDevice is d with its times as the store keeps them.
func storedDevice(d domain.Device) domain.Device {
	return domain.RehydrateDevice(d.ID().String(), d.Model(), d.CurrentVersion(), d.TokenHash(), stamp(d.LastSeenAt()), stamp(d.CreatedAt()))
}

// putDevice writes d unless another device has its token hash.
func (s *Store) putDevice(d domain.Device) error {
	if owner, err := s.byToken(d.TokenHash()); err == nil && owner.ID() != d.ID() {
		return errTokenTaken
	}
	s.devices[d.ID().String()] = d
	return nil
}

func (s *Store) byToken(h domain.TokenHash) (domain.Device, error) {
	for _, d := range s.devices {
		if d.TokenHash() == h {
			return d, nil
		}
	}
	return domain.Device{}, domain.ErrNotFound
}

// Create stores a new device; a token hash another device has is refused
// (errTokenTaken).
func (r *Devices) Create(ctx context.Context, d domain.Device) error {
	return do(ctx, r.s, func() error { return r.s.createDevice(d) })
}

func (s *Store) createDevice(d domain.Device) error {
	if _, ok := s.devices[d.ID().String()]; ok {
		return domain.ErrDeviceExists
	}
	return s.putDevice(storedDevice(d))
}

func (r *Devices) Get(ctx context.Context, id domain.DeviceID) (domain.Device, error) {
	return locked(ctx, r.s, func() (domain.Device, error) { return found(r.s.devices, id.String()) })
}

func (r *Devices) GetByTokenHash(ctx context.Context, h domain.TokenHash) (domain.Device, error) {
	return locked(ctx, r.s, func() (domain.Device, error) { return r.s.byToken(h) })
}

// Update writes everything but the id and the registration time.
func (r *Devices) Update(ctx context.Context, id domain.DeviceID, fn func(*domain.Device) error) (domain.Device, error) {
	return update(ctx, r.s, r.s.devices, id.String(), fn, func(d, c domain.Device) (domain.Device, error) {
		merged := domain.RehydrateDevice(d.ID().String(), c.Model(), c.CurrentVersion(), c.TokenHash(), stamp(c.LastSeenAt()), d.CreatedAt())
		return merged, r.s.putDevice(merged)
	})
}

// RecordSeen writes every report at once (writing costs nothing here).
// Reports may arrive out of order, so last_seen_at only moves forward; a
// report that repeats what the caller read keeps the stored version
// (domain.Device.SeenChangesVersion).
func (r *Devices) RecordSeen(ctx context.Context, stored domain.Device, v domain.Version, at time.Time) error {
	return do(ctx, r.s, func() error {
		d, err := found(r.s.devices, stored.ID().String())
		if at = stamp(at); err != nil || d.LastSeenAt().After(at) {
			return err // unknown, or a newer report is stored already
		}
		if !stored.SeenChangesVersion(v) {
			v = d.CurrentVersion()
		}
		d.Seen(v, at)
		return r.s.putDevice(storedDevice(d))
	})
}
