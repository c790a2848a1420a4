package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Admissions is the in-memory ports.DeviceAdmissions over a Store.
type Admissions struct{ s *Store }

var _ ports.DeviceAdmissions = (*Admissions)(nil)

func NewAdmissions(s *Store) *Admissions { return &Admissions{s: s} }

func storedAdmission(a domain.DeviceAdmission) (domain.DeviceAdmission, error) {
	return domain.RehydrateDeviceAdmission(a.DeviceID().String(), a.Key().PEM(), a.Generation(), stamp(a.UpdatedAt()))
}

func (r *Admissions) Get(ctx context.Context, device domain.DeviceID) (domain.DeviceAdmission, error) {
	return locked(ctx, r.s, func() (domain.DeviceAdmission, error) { return found(r.s.admissions, device.String()) })
}

func (r *Admissions) Generation(ctx context.Context, device domain.DeviceID) (int64, error) {
	a, err := r.Get(ctx, device)
	return a.Generation(), err
}

// CreateDevice registers a device with its admission, atomically.
func (r *Admissions) CreateDevice(ctx context.Context, d domain.Device, a domain.DeviceAdmission) error {
	return do(ctx, r.s, func() error { return r.s.createAdmitted(d, a) })
}

func (s *Store) createAdmitted(d domain.Device, a domain.DeviceAdmission) error {
	stored, err := storedAdmission(a)
	if err == nil {
		err = s.createDevice(d)
	}
	if err == nil {
		s.admissions[d.ID().String()] = stored
	}
	return err
}

// Admit replaces a registered device's admission with what fn makes of it.
func (r *Admissions) Admit(ctx context.Context, device domain.DeviceID, fn func(*domain.DeviceAdmission) (domain.DeviceAdmission, error)) (domain.DeviceAdmission, error) {
	return locked(ctx, r.s, func() (domain.DeviceAdmission, error) {
		if !has(r.s.devices, device.String()) {
			return domain.DeviceAdmission{}, fmt.Errorf("loading device: %w", domain.ErrNotFound)
		}
		var cur *domain.DeviceAdmission
		if a, ok := r.s.admissions[device.String()]; ok {
			cur = &a
		}
		next, err := fn(cur)
		if err == nil {
			next, err = storedAdmission(next)
		}
		if err == nil {
			r.s.admissions[device.String()] = next
		}
		return next, err
	})
}

// Registered returns those of the devices that are registered, with their
// admissions.
func (r *Admissions) Registered(ctx context.Context, deviceIDs []domain.DeviceID) (map[domain.DeviceID]ports.RegisteredDevice, error) {
	return locked(ctx, r.s, func() (map[domain.DeviceID]ports.RegisteredDevice, error) {
		out := map[domain.DeviceID]ports.RegisteredDevice{}
		for _, id := range deviceIDs {
			if d, ok := r.s.devices[id.String()]; ok {
				rd := ports.RegisteredDevice{Model: d.Model()}
				if a, ok := r.s.admissions[id.String()]; ok {
					rd.Admission = &a
				}
				out[id] = rd
			}
		}
		return out, nil
	})
}

// AuthRequests is the in-memory ports.AuthRequests over a Store.
type AuthRequests struct{ s *Store }

var _ ports.AuthRequests = (*AuthRequests)(nil)

func NewAuthRequests(s *Store) *AuthRequests { return &AuthRequests{s: s} }

func storedRequest(q domain.AuthRequest) (domain.AuthRequest, error) {
	return domain.RehydrateAuthRequest(q.ID().String(), q.DeviceID().String(), q.Identity(), q.Key().PEM(), q.DeviceType(), q.Status(),
		stamp(q.CreatedAt()), stamp(q.UpdatedAt()))
}

// Ask hands fn the device's request with key, or else the number of
// pending requests, and stores what fn returns, as one step.
func (r *AuthRequests) Ask(ctx context.Context, device domain.DeviceID, key domain.DeviceKey,
	fn func(*domain.AuthRequest, int) (*domain.AuthRequest, error)) error {
	return do(ctx, r.s, func() error {
		var cur *domain.AuthRequest
		for _, q := range r.s.requests {
			if q.DeviceID().String() == device.String() && q.Key().Equal(key) {
				cur = &q
			}
		}
		pending := 0
		if cur == nil {
			pending = len(where(r.s.requests, func(q domain.AuthRequest) bool { return q.Status() == domain.AuthRequestPending }))
		}
		next, err := fn(cur, pending)
		if err != nil || next == nil {
			return err
		}
		stored, err := storedRequest(*next)
		if err == nil {
			r.s.requests[stored.ID().String()] = stored
		}
		return err
	})
}

func (r *AuthRequests) Delete(ctx context.Context, id domain.UUID) error {
	return do(ctx, r.s, func() error {
		if !has(r.s.requests, id.String()) {
			return fmt.Errorf("auth request %q: %w", id, domain.ErrNotFound)
		}
		delete(r.s.requests, id.String())
		return nil
	})
}

// DeleteExpired deletes the requests expired by cutoff
// (domain.AuthRequest.ExpiredBy).
func (r *AuthRequests) DeleteExpired(ctx context.Context, cutoff time.Time) (int, error) {
	return locked(ctx, r.s, func() (int, error) {
		n := len(r.s.requests)
		for id, q := range r.s.requests {
			if q.ExpiredBy(cutoff) {
				delete(r.s.requests, id)
			}
		}
		return n - len(r.s.requests), nil
	})
}

func (r *AuthRequests) Get(ctx context.Context, id domain.UUID) (domain.AuthRequest, error) {
	return locked(ctx, r.s, func() (domain.AuthRequest, error) { return found(r.s.requests, id.String()) })
}

// List returns the requests with the status, oldest first.
func (r *AuthRequests) List(ctx context.Context, status domain.AuthRequestStatus, limit int) ([]domain.AuthRequest, error) {
	return locked(ctx, r.s, func() ([]domain.AuthRequest, error) {
		out := where(r.s.requests, func(q domain.AuthRequest) bool { return q.Status() == status })
		return page(out, max(limit, 0), 0, func(a, b domain.AuthRequest) bool {
			return newer(b.CreatedAt(), a.CreatedAt(), b.ID().String(), a.ID().String())
		}), nil
	})
}

func (r *AuthRequests) Update(ctx context.Context, id domain.UUID, fn func(*domain.AuthRequest) error) (domain.AuthRequest, error) {
	return update(ctx, r.s, r.s.requests, id.String(), fn, func(_, q domain.AuthRequest) (domain.AuthRequest, error) {
		q, err := storedRequest(q)
		if err == nil {
			r.s.requests[q.ID().String()] = q
		}
		return q, err
	})
}

// Accept registers the device if dev is set, stores its admission (a
// replaced key moves the generation on, the same key keeps it) and deletes
// the request, as one step; a request no longer pending is
// domain.ErrNotFound.
func (r *AuthRequests) Accept(ctx context.Context, id domain.UUID, dev *domain.Device, a domain.DeviceAdmission) error {
	return do(ctx, r.s, func() error {
		s := r.s
		q, err := found(s.requests, id.String())
		switch {
		case err != nil:
			return err
		case q.Status() != domain.AuthRequestPending:
			return fmt.Errorf("auth request %s is no longer pending: %w", id, domain.ErrNotFound)
		case dev != nil:
			err = s.createAdmitted(*dev, a)
		case !has(s.devices, a.DeviceID().String()):
			return fmt.Errorf("device %q: %w", a.DeviceID().String(), domain.ErrNotFound)
		default:
			gen := a.Generation()
			if cur, ok := s.admissions[a.DeviceID().String()]; ok {
				kept := cur.Generation()
				if !cur.Key().Equal(a.Key()) {
					kept++ // a replaced key ends the old key's sessions
				}
				gen = max(gen, kept)
			}
			var stored domain.DeviceAdmission
			if stored, err = domain.RehydrateDeviceAdmission(a.DeviceID().String(), a.Key().PEM(), gen, stamp(a.UpdatedAt())); err == nil {
				s.admissions[a.DeviceID().String()] = stored
			}
		}
		if err == nil {
			delete(s.requests, id.String())
		}
		return err
	})
}

// ArtifactCatalog is the in-memory ports.ArtifactCatalog over a Store.
type ArtifactCatalog struct{ s *Store }

var _ ports.ArtifactCatalog = (*ArtifactCatalog)(nil)

func NewArtifactCatalog(s *Store) *ArtifactCatalog { return &ArtifactCatalog{s: s} }

// ByArtifactName returns the model's firmware published under name.
func (r *ArtifactCatalog) ByArtifactName(ctx context.Context, model, name string) (domain.Firmware, error) {
	return locked(ctx, r.s, func() (domain.Firmware, error) {
		for _, f := range r.s.firmwares {
			if name != "" && f.Model() == model && f.ArtifactName() == name {
				return f, nil
			}
		}
		return domain.Firmware{}, fmt.Errorf("artifact %q of %q: %w", name, model, domain.ErrNotFound)
	})
}

// TaskLogs is the in-memory ports.TaskLogs over a Store.
type TaskLogs struct{ s *Store }

var _ ports.TaskLogs = (*TaskLogs)(nil)

func NewTaskLogs(s *Store) *TaskLogs { return &TaskLogs{s: s} }

// Put stores a task's log; domain.ErrNotFound if the task does not exist.
func (r *TaskLogs) Put(ctx context.Context, l domain.TaskLog) error {
	return do(ctx, r.s, func() error {
		if !has(r.s.tasks, l.TaskID().String()) {
			return domain.ErrNotFound
		}
		r.s.logs[l.TaskID().String()] = domain.RehydrateTaskLog(l.TaskID().String(), l.Lines(), stamp(l.UpdatedAt()))
		return nil
	})
}

func (r *TaskLogs) Get(ctx context.Context, taskID domain.UUID) (domain.TaskLog, error) {
	return locked(ctx, r.s, func() (domain.TaskLog, error) { return found(r.s.logs, taskID.String()) })
}
