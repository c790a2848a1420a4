package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Admissions is the in-memory ports.DeviceAdmissions over a Store.
type Admissions struct{ s *Store }

func NewAdmissions(s *Store) *Admissions { return &Admissions{s: s} }

func (r *Admissions) Get(ctx context.Context, device domain.DeviceID) (domain.DeviceAdmission, error) {
	return get(ctx, r.s, r.s.admissions, device)
}

func (r *Admissions) Generation(ctx context.Context, device domain.DeviceID) (int64, error) {
	a, err := r.Get(ctx, device)
	return a.Generation(), err
}

func (r *Admissions) CreateDevice(ctx context.Context, d domain.Device, a domain.DeviceAdmission, rec domain.AuditRecord) error {
	return write(ctx, r.s, rec, func() error {
		err := r.s.createDevice(d)
		if err == nil {
			r.s.admissions[d.ID().String()] = a
		}
		return err
	})
}

func (r *Admissions) Admit(ctx context.Context, device domain.DeviceID, fn func(*domain.DeviceAdmission) (domain.DeviceAdmission, error),
	rec domain.AuditRecord) (domain.DeviceAdmission, error) {
	return locked(ctx, r.s, func() (domain.DeviceAdmission, error) {
		if !has(r.s.devices, device.String()) {
			return domain.DeviceAdmission{}, fmt.Errorf("loading device: %w", domain.ErrNotFound)
		}
		next, err := r.s.admission(device.String(), fn)
		if err == nil {
			r.s.admissions[device.String()] = next
			r.s.record(rec)
		}
		return next, err
	})
}

// UpdateDevice changes the device and its admission, if it has one,
// together.
func (r *Admissions) UpdateDevice(ctx context.Context, device domain.DeviceID, fn func(*domain.Device) error,
	admit func(*domain.DeviceAdmission), rec domain.AuditRecord) (domain.Device, error) {
	return locked(ctx, r.s, func() (domain.Device, error) {
		d, err := found(r.s.devices, device.String())
		if err != nil {
			return domain.Device{}, fmt.Errorf("loading device: %w", err)
		}
		a, keyed := r.s.admissions[device.String()]
		if err := fn(&d); err != nil {
			return domain.Device{}, err
		}
		if err := r.s.tokenFree(d); err != nil {
			return domain.Device{}, err
		}
		if keyed {
			admit(&a)
			r.s.admissions[device.String()] = a
		}
		r.s.devices[device.String()] = d
		r.s.record(rec)
		return d, nil
	})
}

// admission is what fn makes of the device's admission, as it would be
// stored; nothing is written yet.
func (s *Store) admission(deviceID string, fn func(*domain.DeviceAdmission) (domain.DeviceAdmission, error)) (domain.DeviceAdmission, error) {
	var cur *domain.DeviceAdmission
	if a, ok := s.admissions[deviceID]; ok {
		cur = &a
	}
	return fn(cur)
}

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

func NewAuthRequests(s *Store) *AuthRequests { return &AuthRequests{s: s} }

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
		if err == nil && next != nil {
			r.s.requests[next.ID().String()] = *next
		}
		return err
	})
}

func (r *AuthRequests) Delete(ctx context.Context, id domain.UUID, rec domain.AuditRecord) error {
	return write(ctx, r.s, rec, func() error { return remove(r.s.requests, "auth request", id) })
}

func (r *AuthRequests) DeleteExpired(ctx context.Context, cutoff time.Time) (int, error) {
	return locked(ctx, r.s, func() (int, error) {
		n := len(r.s.requests)
		maps.DeleteFunc(r.s.requests, func(_ string, q domain.AuthRequest) bool { return q.ExpiredBy(cutoff) })
		return n - len(r.s.requests), nil
	})
}

func (r *AuthRequests) Get(ctx context.Context, id domain.UUID) (domain.AuthRequest, error) {
	return get(ctx, r.s, r.s.requests, id)
}

func (r *AuthRequests) List(ctx context.Context, status domain.AuthRequestStatus, limit int) ([]domain.AuthRequest, error) {
	return locked(ctx, r.s, func() ([]domain.AuthRequest, error) {
		out := where(r.s.requests, func(q domain.AuthRequest) bool { return q.Status() == status })
		return page(out, max(limit, 0), 0, func(a, b domain.AuthRequest) bool {
			return newer(b.CreatedAt(), a.CreatedAt(), b.ID().String(), a.ID().String())
		}), nil
	})
}

func (r *AuthRequests) Update(ctx context.Context, id domain.UUID, fn func(*domain.AuthRequest) error, rec domain.AuditRecord) (domain.AuthRequest, error) {
	return update(ctx, r.s, r.s.requests, id.String(), fn, nil, recorded[domain.AuthRequest](rec))
}

func (r *AuthRequests) Accept(ctx context.Context, id domain.UUID, dev *domain.Device, admit func(*domain.DeviceAdmission) (domain.DeviceAdmission, error),
	rec domain.AuditRecord) error {
	return write(ctx, r.s, rec, func() error {
		s := r.s
		q, err := found(s.requests, id.String())
		if err != nil {
			return err
		}
		if q.Status() != domain.AuthRequestPending {
			return fmt.Errorf("auth request %s is no longer pending: %w", id, domain.ErrNotFound)
		}
		a, err := s.admission(q.DeviceID().String(), admit) // before any write: a failure leaves nothing half done
		switch {
		case err != nil:
			return err
		case dev != nil:
			err = s.createDevice(*dev)
		case !has(s.devices, a.DeviceID().String()):
			err = fmt.Errorf("device %q: %w", a.DeviceID().String(), domain.ErrNotFound)
		}
		if err == nil {
			s.admissions[a.DeviceID().String()] = a
			delete(s.requests, id.String())
		}
		return err
	})
}

// ArtifactCatalog is the in-memory ports.ArtifactCatalog over a Store.
type ArtifactCatalog struct{ s *Store }

func NewArtifactCatalog(s *Store) *ArtifactCatalog { return &ArtifactCatalog{s: s} }

func (r *ArtifactCatalog) ByArtifactName(ctx context.Context, model, name string) (domain.Firmware, error) {
	return locked(ctx, r.s, func() (domain.Firmware, error) {
		for _, f := range r.s.firmwares {
			if named(f, model, name) {
				return f, nil
			}
		}
		return domain.Firmware{}, fmt.Errorf("artifact %q of %q: %w", name, model, domain.ErrNotFound)
	})
}

// TaskLogs is the in-memory ports.TaskLogs over a Store.
type TaskLogs struct{ s *Store }

func NewTaskLogs(s *Store) *TaskLogs { return &TaskLogs{s: s} }

func (r *TaskLogs) Put(ctx context.Context, l domain.TaskLog) error {
	return do(ctx, r.s, func() error {
		if !has(r.s.tasks, l.TaskID().String()) {
			return domain.ErrNotFound
		}
		r.s.logs[l.TaskID().String()] = l
		return nil
	})
}

func (r *TaskLogs) Get(ctx context.Context, taskID domain.UUID) (domain.TaskLog, error) {
	return get(ctx, r.s, r.s.logs, taskID)
}

// Attributes is the in-memory ports.DeviceAttributes over a Store.
type Attributes struct{ s *Store }

var _ ports.DeviceAttributes = (*Attributes)(nil)

func NewAttributes(s *Store) *Attributes { return &Attributes{s: s} }

func (r *Attributes) Get(ctx context.Context, deviceID domain.DeviceID) (domain.DeviceAttributes, error) {
	return locked(ctx, r.s, func() (domain.DeviceAttributes, error) { return r.s.attrs[deviceID.String()], nil }) // Apply never changes a stored map
}

func (r *Attributes) Update(ctx context.Context, deviceID domain.DeviceID, fn func(*domain.DeviceAttributes) error) (domain.DeviceAttributes, error) {
	return locked(ctx, r.s, func() (domain.DeviceAttributes, error) {
		if !has(r.s.devices, deviceID.String()) {
			return domain.DeviceAttributes{}, fmt.Errorf("loading device: %w", domain.ErrNotFound)
		}
		a := r.s.attrs[deviceID.String()]
		if err := fn(&a); err != nil {
			return domain.DeviceAttributes{}, err
		}
		r.s.attrs[deviceID.String()] = a
		return a, nil
	})
}

// TaskActions is the in-memory ports.TaskActions over a Store.
type TaskActions struct{ s *Store }

func NewTaskActions(s *Store) *TaskActions { return &TaskActions{s: s} }

func (s *Store) notice(t domain.Task) domain.CancelNotice {
	return domain.RehydrateCancelNotice(t, s.confirmed[t.ID().String()])
}

func (s *Store) byAction(deviceID domain.DeviceID, actionID int64) (domain.Task, error) {
	for _, t := range s.tasks {
		if t.DeviceID().String() == deviceID.String() && t.ActionID() == actionID {
			return t, nil
		}
	}
	return domain.Task{}, fmt.Errorf("action %d: %w", actionID, domain.ErrNotFound)
}

func (r *TaskActions) Cancel(ctx context.Context, deviceID domain.DeviceID, actionID int64) (domain.CancelNotice, error) {
	return locked(ctx, r.s, func() (domain.CancelNotice, error) {
		t, err := r.s.byAction(deviceID, actionID)
		return r.s.notice(t), err
	})
}

func (r *TaskActions) PendingCancel(ctx context.Context, deviceID domain.DeviceID) (*domain.CancelNotice, error) {
	return locked(ctx, r.s, func() (*domain.CancelNotice, error) {
		var best *domain.CancelNotice
		for _, t := range r.s.tasks {
			n := r.s.notice(t)
			if t.DeviceID().String() != deviceID.String() || !n.Pending() {
				continue
			}
			if best == nil || newer(t.UpdatedAt(), best.Task().UpdatedAt(), t.ID().String(), best.Task().ID().String()) {
				best = &n
			}
		}
		return best, nil
	})
}

func (r *TaskActions) UpdateCancel(ctx context.Context, deviceID domain.DeviceID, actionID int64, fn func(*domain.CancelNotice) error) (domain.CancelNotice, error) {
	return locked(ctx, r.s, func() (domain.CancelNotice, error) {
		t, err := r.s.byAction(deviceID, actionID)
		if err != nil {
			return domain.CancelNotice{}, err
		}
		n := r.s.notice(t)
		if err := fn(&n); err != nil {
			return domain.CancelNotice{}, err
		}
		if at := n.ConfirmedAt(); at.IsZero() {
			delete(r.s.confirmed, t.ID().String())
		} else {
			r.s.confirmed[t.ID().String()] = at
		}
		return r.s.notice(t), nil
	})
}

// facts is what a check view carries beside the tasks: the device's tags
// and its stored attributes.
func (s *Store) facts(deviceID string) domain.DeviceFacts {
	f := domain.DeviceFacts{Tags: slices.Clone(s.tags[deviceID])}
	if a, ok := s.attrs[deviceID]; ok && a.Known() {
		f.Attributes = a.Values()
	}
	return f
}

// Directory is the in-memory ports.DeviceDirectory over a Store.
type Directory struct{ s *Store }

func NewDirectory(s *Store) *Directory { return &Directory{s: s} }

func (r *Directory) UpdateTags(ctx context.Context, ids []domain.DeviceID, fn func(domain.DeviceID, []string) ([]string, error),
	rec domain.AuditRecord) (map[domain.DeviceID][]string, error) {
	return locked(ctx, r.s, func() (map[domain.DeviceID][]string, error) {
		for _, id := range ids {
			if !has(r.s.devices, id.String()) {
				return nil, fmt.Errorf("device %q: %w", id, domain.ErrNotFound)
			}
		}
		out := make(map[domain.DeviceID][]string, len(ids))
		for _, id := range ids {
			cur, listed := out[id]
			if !listed {
				cur = r.s.tags[id.String()]
			}
			next, err := fn(id, slices.Clone(cur))
			if err != nil {
				return nil, err
			}
			out[id] = slices.Clone(next)
		}
		for id, t := range out {
			r.s.tags[id.String()] = t
		}
		r.s.record(rec)
		return out, nil
	})
}

func (r *Directory) Tags(ctx context.Context, device domain.DeviceID) ([]string, error) {
	return locked(ctx, r.s, func() ([]string, error) { return append([]string{}, r.s.tags[device.String()]...), nil })
}

func (r *Directory) List(ctx context.Context, f ports.DeviceFilter) ([]ports.DeviceListing, error) {
	return locked(ctx, r.s, func() ([]ports.DeviceListing, error) {
		out := []ports.DeviceListing{}
		for id, d := range r.s.devices {
			if l := (ports.DeviceListing{Device: d, Tags: append([]string{}, r.s.tags[id]...), Attributes: r.s.attrs[id]}); id > f.After.String() && f.Admits(l) {
				out = append(out, l)
			}
		}
		return page(out, f.Limit, ports.DefaultListLimit, func(a, b ports.DeviceListing) bool { return a.Device.ID().String() < b.Device.ID().String() }), nil
	})
}

// Fleet is the in-memory ports.FleetReader over a Store: each answer is
// computed under the store's lock, one consistent snapshot.
type Fleet struct{ s *Store }

func NewFleet(s *Store) *Fleet { return &Fleet{s: s} }

func (r *Fleet) ListRollouts(ctx context.Context, f ports.RolloutFilter) ([]ports.RolloutSummary, error) {
	return locked(ctx, r.s, func() ([]ports.RolloutSummary, error) {
		out := []ports.RolloutSummary{}
		for _, ro := range r.s.rollouts {
			if fw := r.s.firmwares[ro.FirmwareID().String()]; f.Model == "" || fw.Model() == f.Model {
				out = append(out, ports.RolloutSummary{Rollout: ro, Model: fw.Model(), Version: fw.Version().String(),
					Stats: r.s.counts[countKey(ro.ID(), time.Time{})]})
			}
		}
		return page(out, f.Limit, ports.DefaultRolloutLimit, func(a, b ports.RolloutSummary) bool {
			return newer(a.Rollout.CreatedAt(), b.Rollout.CreatedAt(), a.Rollout.ID().String(), b.Rollout.ID().String())
		}), nil
	})
}

func (r *Fleet) VersionCounts(ctx context.Context, q ports.VersionCountQuery) ([]ports.VersionCount, error) {
	q.HourAgo, q.DayAgo = us(q.HourAgo), us(q.DayAgo)
	return locked(ctx, r.s, func() ([]ports.VersionCount, error) {
		counts := map[[2]string]ports.VersionCount{}
		for _, d := range r.s.devices {
			if k := [2]string{d.Model(), d.CurrentVersion().String()}; q.Model == "" || d.Model() == q.Model {
				c := counts[k]
				c.Model, c.Version = k[0], k[1]
				counts[k] = q.Count(c, d.LastSeenAt())
			}
		}
		return slices.AppendSeq([]ports.VersionCount{}, maps.Values(counts)), nil
	})
}

func (r *Fleet) RecentFailures(ctx context.Context, rolloutID domain.UUID, limit int) ([]domain.Task, error) {
	return locked(ctx, r.s, func() ([]domain.Task, error) {
		out := where(r.s.tasks, func(t domain.Task) bool {
			return !rolloutID.IsZero() && t.RolloutID().String() == rolloutID.String() && t.Status() == domain.TaskFailed
		})
		return page(out, max(limit, 0), 0, func(a, b domain.Task) bool {
			return newer(a.UpdatedAt(), b.UpdatedAt(), a.ID().String(), b.ID().String())
		}), nil
	})
}
