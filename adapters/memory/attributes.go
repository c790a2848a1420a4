package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// ddiTables are the tables DDI adds (device attributes, cancel
// confirmations), kept beside a Store rather than in it so that every
// repository built over one Store shares them, like tables of one database.
type ddiTables struct {
	writes    chan struct{} // held by each read-modify-write (lockCtx)
	mu        sync.Mutex
	attrs     map[string]domain.DeviceAttributes
	confirmed map[string]time.Time // task id → when its cancel was confirmed
}

var ddiByStore sync.Map // *Store → *ddiTables

func ddiOf(s *Store) *ddiTables {
	t, _ := ddiByStore.LoadOrStore(s, &ddiTables{
		writes:    make(chan struct{}, 1),
		attrs:     map[string]domain.DeviceAttributes{},
		confirmed: map[string]time.Time{},
	})
	return t.(*ddiTables)
}

// Attributes is the in-memory ports.DeviceAttributes over a Store.
type Attributes struct {
	devices *Devices
	t       *ddiTables
}

var _ ports.DeviceAttributes = (*Attributes)(nil)

// NewAttributes returns the attribute repository of s.
func NewAttributes(s *Store) *Attributes { return &Attributes{devices: NewDevices(s), t: ddiOf(s)} }

// Get returns the device's attributes (the zero value if it has none).
func (r *Attributes) Get(ctx context.Context, deviceID domain.DeviceID) (domain.DeviceAttributes, error) {
	if err := ctx.Err(); err != nil {
		return domain.DeviceAttributes{}, err
	}
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	a := r.t.attrs[deviceID.String()]
	return domain.RehydrateDeviceAttributes(a.Values(), a.UpdatedAt()), nil
}

// Update changes the device's attributes under the tables' writer lock.
func (r *Attributes) Update(ctx context.Context, deviceID domain.DeviceID, fn func(*domain.DeviceAttributes) error) (domain.DeviceAttributes, error) {
	if _, err := r.devices.Get(ctx, deviceID); err != nil {
		return domain.DeviceAttributes{}, fmt.Errorf("loading device: %w", err)
	}
	unlock, err := lockCtx(ctx, r.t.writes)
	if err != nil {
		return domain.DeviceAttributes{}, err
	}
	defer unlock()
	a, err := r.Get(ctx, deviceID)
	if err != nil {
		return domain.DeviceAttributes{}, err
	}
	if err := fn(&a); err != nil {
		return domain.DeviceAttributes{}, err
	}
	a = domain.RehydrateDeviceAttributes(a.Values(), stamp(a.UpdatedAt()))
	r.t.mu.Lock()
	r.t.attrs[deviceID.String()] = a
	r.t.mu.Unlock()
	return a, nil
}

// TaskActions is the in-memory ddi.TaskActions over a Store. It reads
// tasks through the task repository and keeps cancel confirmations beside.
type TaskActions struct {
	tasks *Tasks
	t     *ddiTables
}

// NewTaskActions returns the action repository of s.
func NewTaskActions(s *Store) *TaskActions { return &TaskActions{tasks: NewTasks(s), t: ddiOf(s)} }

// deviceTasks lists every task of the device (optionally of one status).
// The zero id has none: it must not become the listing's "every device".
func (r *TaskActions) deviceTasks(ctx context.Context, deviceID domain.DeviceID, st *domain.TaskStatus) ([]domain.Task, error) {
	if deviceID.IsZero() {
		return nil, ctx.Err()
	}
	var (
		out   []domain.Task
		after *ports.TaskCursor
	)
	for {
		page, err := r.tasks.List(ctx, ports.TaskFilter{DeviceID: deviceID, Status: st, Limit: 500, After: after})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 500 {
			return out, nil
		}
		last := page[len(page)-1]
		after = &ports.TaskCursor{CreatedAt: last.CreatedAt(), ID: last.ID()}
	}
}

func (r *TaskActions) notice(t domain.Task) domain.CancelNotice {
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	return domain.RehydrateCancelNotice(t, r.t.confirmed[t.ID().String()])
}

// ByAction returns the device's task numbered actionID.
func (r *TaskActions) ByAction(ctx context.Context, deviceID domain.DeviceID, actionID int64) (domain.Task, error) {
	ts, err := r.deviceTasks(ctx, deviceID, nil)
	if err != nil {
		return domain.Task{}, err
	}
	for _, t := range ts {
		if t.ActionID() == actionID {
			return t, nil
		}
	}
	return domain.Task{}, fmt.Errorf("action %d: %w", actionID, domain.ErrNotFound)
}

// Cancel returns the notice of the device's task numbered actionID.
func (r *TaskActions) Cancel(ctx context.Context, deviceID domain.DeviceID, actionID int64) (domain.CancelNotice, error) {
	t, err := r.ByAction(ctx, deviceID, actionID)
	if err != nil {
		return domain.CancelNotice{}, err
	}
	return r.notice(t), nil
}

// PendingCancel returns the device's newest unconfirmed cancel, or nil.
func (r *TaskActions) PendingCancel(ctx context.Context, deviceID domain.DeviceID) (*domain.CancelNotice, error) {
	st := domain.TaskCancelled
	ts, err := r.deviceTasks(ctx, deviceID, &st)
	if err != nil {
		return nil, err
	}
	var best *domain.CancelNotice
	for _, t := range ts {
		n := r.notice(t)
		if !n.Pending() {
			continue
		}
		if best == nil || t.UpdatedAt().After(best.Task().UpdatedAt()) ||
			(t.UpdatedAt().Equal(best.Task().UpdatedAt()) && t.ID().String() > best.Task().ID().String()) {
			best = &n
		}
	}
	return best, nil
}

// UpdateCancel changes the notice under the tables' writer lock.
func (r *TaskActions) UpdateCancel(ctx context.Context, deviceID domain.DeviceID, actionID int64, fn func(*domain.CancelNotice) error) (domain.CancelNotice, error) {
	t, err := r.ByAction(ctx, deviceID, actionID)
	if err != nil {
		return domain.CancelNotice{}, err
	}
	unlock, err := lockCtx(ctx, r.t.writes)
	if err != nil {
		return domain.CancelNotice{}, err
	}
	defer unlock()
	if t, err = r.tasks.Get(ctx, t.ID()); err != nil {
		return domain.CancelNotice{}, err
	}
	n := r.notice(t)
	if err := fn(&n); err != nil {
		return domain.CancelNotice{}, err
	}
	r.t.mu.Lock()
	if at := stamp(n.ConfirmedAt()); at.IsZero() {
		delete(r.t.confirmed, t.ID().String())
	} else {
		r.t.confirmed[t.ID().String()] = at
	}
	r.t.mu.Unlock()
	return r.notice(t), nil
}
