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

// NewDevices returns the device repository of s; repositories built over the
// same Store share data like tables of one database.
func NewDevices(s *Store) *Devices { return &Devices{s: s} }

// storedDevice is d as Postgres would give it back: timestamps at
// microsecond precision in UTC.
func storedDevice(d domain.Device) domain.Device {
	return domain.RehydrateDevice(d.ID().String(), d.Model(), d.CurrentVersion(), d.TokenHash(), stamp(d.LastSeenAt()), stamp(d.CreatedAt()))
}

// Create stores a new device; domain.ErrDeviceExists if the id is taken. A
// token hash another device has is refused (errTokenTaken), as the unique
// key on token hashes refuses it in Postgres.
func (r *Devices) Create(ctx context.Context, d domain.Device) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.devices[d.ID().String()]; ok {
		return domain.ErrDeviceExists
	}
	return s.putDeviceLocked(storedDevice(d))
}

// Get loads a device by id.
func (r *Devices) Get(ctx context.Context, id domain.DeviceID) (domain.Device, error) {
	return read(ctx, &r.s.mu, func() (domain.Device, error) { return found(r.s.devices, id.String()) })
}

// GetByTokenHash finds the device a presented token belongs to.
func (r *Devices) GetByTokenHash(ctx context.Context, h domain.TokenHash) (domain.Device, error) {
	return read(ctx, &r.s.mu, func() (domain.Device, error) { return found(r.s.devices, r.s.byToken[h]) })
}

// Update loads the device under the store's writer lock, lets fn change a
// copy, and stores it only if fn returns nil. As in the Postgres adapter,
// everything but the id and the registration time is written; a token
// hash another device has is refused and nothing is stored.
func (r *Devices) Update(ctx context.Context, id domain.DeviceID, fn func(*domain.Device) error) (domain.Device, error) {
	return update(ctx, r.s.writes, &r.s.mu, func() (domain.Device, error) { return found(r.s.devices, id.String()) }, fn, func(d, changed domain.Device) (domain.Device, error) {
		merged := domain.RehydrateDevice(d.ID().String(), changed.Model(), changed.CurrentVersion(), changed.TokenHash(), stamp(changed.LastSeenAt()), d.CreatedAt())
		return merged, r.s.putDeviceLocked(merged)
	})
}

// RecordSeen stores the version a device reported and when. The memory
// store writes it at once, well within the port's one-second bound. As in
// the Postgres adapter, reports may arrive out of order (two replicas, a
// late batch), so last_seen_at only moves forward and the version follows
// the newest report. An unknown device is domain.ErrNotFound.
// The memory store writes every check (writing costs it nothing); stored
// serves for its id and to tell a new version from one that repeats what
// the caller read, which moves last_seen_at only
// (domain.Device.SeenChangesVersion).
func (r *Devices) RecordSeen(ctx context.Context, stored domain.Device, v domain.Version, at time.Time) error {
	s, id := r.s, stored.ID().String()
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.devices[id]
	if !ok {
		return domain.ErrNotFound
	}
	at = stamp(at)
	if last := d.LastSeenAt(); !last.IsZero() && last.After(at) {
		return nil // a newer report is already stored
	}
	if !stored.SeenChangesVersion(v) {
		v = d.CurrentVersion() // a repeat of a possibly stale read: the stored version stands
	}
	d.Seen(v, at)
	return s.putDeviceLocked(storedDevice(d))
}

// putDeviceLocked writes d and keeps the token index in step, refusing a
// token hash that belongs to another device. s.mu is held.
func (s *Store) putDeviceLocked(d domain.Device) error {
	if owner, taken := s.byToken[d.TokenHash()]; taken && owner != d.ID().String() {
		return errTokenTaken
	}
	if old, ok := s.devices[d.ID().String()]; ok && old.TokenHash() != d.TokenHash() {
		delete(s.byToken, old.TokenHash())
	}
	s.devices[d.ID().String()] = d
	s.byToken[d.TokenHash()] = d.ID().String()
	return nil
}
