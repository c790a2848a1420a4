package memory

import (
	"context"
	"fmt"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Attributes is the in-memory ports.DeviceAttributes over a Store.
type Attributes struct{ s *Store }

var _ ports.DeviceAttributes = (*Attributes)(nil)

func NewAttributes(s *Store) *Attributes { return &Attributes{s: s} }

func (r *Attributes) Get(ctx context.Context, deviceID domain.DeviceID) (domain.DeviceAttributes, error) {
	return locked(ctx, r.s, func() (domain.DeviceAttributes, error) { return r.s.attributes(deviceID.String()), nil })
}

// attributes is the device's attributes, a copy (the zero value if none).
func (s *Store) attributes(deviceID string) domain.DeviceAttributes {
	a := s.attrs[deviceID]
	return domain.RehydrateDeviceAttributes(a.Values(), a.UpdatedAt())
}

func (r *Attributes) Update(ctx context.Context, deviceID domain.DeviceID, fn func(*domain.DeviceAttributes) error) (domain.DeviceAttributes, error) {
	return locked(ctx, r.s, func() (domain.DeviceAttributes, error) {
		if !has(r.s.devices, deviceID.String()) {
			return domain.DeviceAttributes{}, fmt.Errorf("loading device: %w", domain.ErrNotFound)
		}
		a := r.s.attributes(deviceID.String())
		if err := fn(&a); err != nil {
			return domain.DeviceAttributes{}, err
		}
		a = domain.RehydrateDeviceAttributes(a.Values(), stamp(a.UpdatedAt()))
		r.s.attrs[deviceID.String()] = a
		return a, nil
	})
}

// TaskActions is the in-memory ports.TaskActions over a Store.
type TaskActions struct{ s *Store }

var _ ports.TaskActions = (*TaskActions)(nil)

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

func (r *TaskActions) ByAction(ctx context.Context, deviceID domain.DeviceID, actionID int64) (domain.Task, error) {
	return locked(ctx, r.s, func() (domain.Task, error) { return r.s.byAction(deviceID, actionID) })
}

func (r *TaskActions) Cancel(ctx context.Context, deviceID domain.DeviceID, actionID int64) (domain.CancelNotice, error) {
	return locked(ctx, r.s, func() (domain.CancelNotice, error) {
		t, err := r.s.byAction(deviceID, actionID)
		return r.s.notice(t), err
	})
}

// PendingCancel returns the device's newest unconfirmed cancel, or nil.
func (r *TaskActions) PendingCancel(ctx context.Context, deviceID domain.DeviceID) (*domain.CancelNotice, error) {
	return locked(ctx, r.s, func() (*domain.CancelNotice, error) {
		var best *domain.CancelNotice
		for _, t := range r.s.tasks {
			n := r.s.notice(t)
			if t.DeviceID().String() != deviceID.String() || t.Status() != domain.TaskCancelled || !n.Pending() {
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
		if at := stamp(n.ConfirmedAt()); at.IsZero() {
			delete(r.s.confirmed, t.ID().String())
		} else {
			r.s.confirmed[t.ID().String()] = at
		}
		return r.s.notice(t), nil
	})
}
