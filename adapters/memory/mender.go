package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// menderTables are the tables Mender's device API adds (device keys,
// pending auth requests, task logs), kept beside a Store like ddiTables.
type menderTables struct {
	writes chan struct{} // held by each read-modify-write (lockCtx)
	// ask serialises AuthRequests.Ask, so that counting the pending
	// requests and storing a new one are one step.
	ask        sync.Mutex
	mu         sync.Mutex
	admissions map[string]domain.DeviceAdmission
	requests   map[string]domain.AuthRequest // id → request
	logs       map[string]domain.TaskLog
}

var menderByStore sync.Map // *Store → *menderTables

func menderOf(s *Store) *menderTables {
	t, _ := menderByStore.LoadOrStore(s, &menderTables{
		writes:     make(chan struct{}, 1),
		admissions: map[string]domain.DeviceAdmission{},
		requests:   map[string]domain.AuthRequest{},
		logs:       map[string]domain.TaskLog{},
	})
	return t.(*menderTables)
}

// Admissions is the in-memory mender.DeviceAdmissions over a Store.
type Admissions struct {
	s *Store
	t *menderTables
}

// NewAdmissions returns the device key repository of s.
func NewAdmissions(s *Store) *Admissions { return &Admissions{s: s, t: menderOf(s)} }

func storedAdmission(a domain.DeviceAdmission) (domain.DeviceAdmission, error) {
	return domain.RehydrateDeviceAdmission(a.DeviceID().String(), a.Key().PEM(), a.Generation(), stamp(a.UpdatedAt()))
}

// Get returns the device's admission.
func (r *Admissions) Get(ctx context.Context, device domain.DeviceID) (domain.DeviceAdmission, error) {
	return read(ctx, &r.t.mu, func() (domain.DeviceAdmission, error) { return found(r.t.admissions, device.String()) })
}

// Generation returns the device's current session token generation.
func (r *Admissions) Generation(ctx context.Context, device domain.DeviceID) (int64, error) {
	a, err := r.Get(ctx, device)
	if err != nil {
		return 0, err
	}
	return a.Generation(), nil
}

// createDeviceLocked stores a new device and its admission; the caller
// holds the store's mutex.
func (r *Admissions) createDeviceLocked(d domain.Device, a domain.DeviceAdmission) error {
	if _, ok := r.s.devices[d.ID().String()]; ok {
		return domain.ErrDeviceExists
	}
	stored, err := storedAdmission(a)
	if err != nil {
		return err
	}
	if err := r.s.putDeviceLocked(storedDevice(d)); err != nil {
		return err
	}
	r.t.mu.Lock()
	r.t.admissions[d.ID().String()] = stored
	r.t.mu.Unlock()
	return nil
}

// CreateDevice registers a device with its admission, atomically.
func (r *Admissions) CreateDevice(ctx context.Context, d domain.Device, a domain.DeviceAdmission) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.createDeviceLocked(d, a)
}

// Admit replaces a registered device's admission under the tables' writer lock.
func (r *Admissions) Admit(ctx context.Context, device domain.DeviceID, fn func(*domain.DeviceAdmission) (domain.DeviceAdmission, error)) (domain.DeviceAdmission, error) {
	deviceID := device.String()
	if _, err := NewDevices(r.s).Get(ctx, device); err != nil {
		return domain.DeviceAdmission{}, fmt.Errorf("loading device: %w", err)
	}
	unlock, err := lockCtx(ctx, r.t.writes)
	if err != nil {
		return domain.DeviceAdmission{}, err
	}
	defer unlock()
	var cur *domain.DeviceAdmission
	if a, err := r.Get(ctx, device); err == nil {
		cur = &a
	}
	next, err := fn(cur)
	if err != nil {
		return domain.DeviceAdmission{}, err
	}
	if next, err = storedAdmission(next); err != nil {
		return domain.DeviceAdmission{}, err
	}
	r.t.mu.Lock()
	r.t.admissions[deviceID] = next
	r.t.mu.Unlock()
	return next, nil
}

// Registered returns those of the devices that are registered, with their
// admissions.
func (r *Admissions) Registered(ctx context.Context, deviceIDs []domain.DeviceID) (map[domain.DeviceID]ports.RegisteredDevice, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := map[domain.DeviceID]ports.RegisteredDevice{}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	for _, id := range deviceIDs {
		d, ok := r.s.devices[id.String()]
		if !ok {
			continue
		}
		rd := ports.RegisteredDevice{Model: d.Model()}
		if a, ok := r.t.admissions[id.String()]; ok {
			rd.Admission = &a
		}
		out[id] = rd
	}
	return out, nil
}

// AuthRequests is the in-memory mender.AuthRequests over a Store.
type AuthRequests struct {
	adm *Admissions
	t   *menderTables
}

// NewAuthRequests returns the pending auth request repository of s.
func NewAuthRequests(s *Store) *AuthRequests {
	return &AuthRequests{adm: NewAdmissions(s), t: menderOf(s)}
}

func storedRequest(q domain.AuthRequest) (domain.AuthRequest, error) {
	return domain.RehydrateAuthRequest(q.ID().String(), q.DeviceID().String(), q.Identity(), q.Key().PEM(), q.DeviceType(), q.Status(),
		stamp(q.CreatedAt()), stamp(q.UpdatedAt()))
}

func (r *AuthRequests) byDeviceKeyLocked(deviceID string, key domain.DeviceKey) *domain.AuthRequest {
	for _, q := range r.t.requests {
		if q.DeviceID().String() == deviceID && q.Key().Equal(key) {
			return &q
		}
	}
	return nil
}

// Ask runs one request at a time: it loads the device's request with key
// (or counts the pending ones) and stores what fn returns.
func (r *AuthRequests) Ask(ctx context.Context, device domain.DeviceID, key domain.DeviceKey,
	fn func(*domain.AuthRequest, int) (*domain.AuthRequest, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.t.ask.Lock()
	defer r.t.ask.Unlock()
	r.t.mu.Lock()
	cur, pending := r.byDeviceKeyLocked(device.String(), key), 0
	if cur == nil {
		for _, q := range r.t.requests {
			if q.Status() == domain.AuthRequestPending {
				pending++
			}
		}
	}
	r.t.mu.Unlock()
	next, err := fn(cur, pending)
	if err != nil || next == nil {
		return err
	}
	stored, err := storedRequest(*next)
	if err != nil {
		return err
	}
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	r.t.requests[stored.ID().String()] = stored
	return nil
}

// Delete deletes a request.
func (r *AuthRequests) Delete(ctx context.Context, id domain.UUID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	if _, ok := r.t.requests[id.String()]; !ok {
		return fmt.Errorf("auth request %q: %w", id, domain.ErrNotFound)
	}
	delete(r.t.requests, id.String())
	return nil
}

// DeleteExpired deletes the requests last changed before cutoff.
func (r *AuthRequests) DeleteExpired(ctx context.Context, cutoff time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	n := 0
	for id, q := range r.t.requests {
		if q.ExpiredBy(cutoff) {
			delete(r.t.requests, id)
			n++
		}
	}
	return n, nil
}

// Get returns a request by id.
func (r *AuthRequests) Get(ctx context.Context, id domain.UUID) (domain.AuthRequest, error) {
	return read(ctx, &r.t.mu, func() (domain.AuthRequest, error) { return found(r.t.requests, id.String()) })
}

// List returns the requests with the status, oldest first.
func (r *AuthRequests) List(ctx context.Context, status domain.AuthRequestStatus, limit int) ([]domain.AuthRequest, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.t.mu.Lock()
	out := []domain.AuthRequest{}
	for _, q := range r.t.requests {
		if q.Status() == status {
			out = append(out, q)
		}
	}
	r.t.mu.Unlock()
	return page(out, max(limit, 0), 0, func(a, b domain.AuthRequest) bool { // oldest first
		return newer(b.CreatedAt(), a.CreatedAt(), b.ID().String(), a.ID().String())
	}), nil
}

// Update changes a request under the tables' writer lock.
func (r *AuthRequests) Update(ctx context.Context, id domain.UUID, fn func(*domain.AuthRequest) error) (domain.AuthRequest, error) {
	load := func() (domain.AuthRequest, error) { return found(r.t.requests, id.String()) }
	return update(ctx, r.t.writes, &r.t.mu, load, fn, func(_, q domain.AuthRequest) (domain.AuthRequest, error) {
		q, err := storedRequest(q)
		if err == nil {
			r.t.requests[q.ID().String()] = q
		}
		return q, err
	})
}

// Accept registers the device if dev is set, stores its admission (a
// replaced key moves the generation on) and deletes the request, as one
// step.
func (r *AuthRequests) Accept(ctx context.Context, id domain.UUID, dev *domain.Device, a domain.DeviceAdmission) error {
	unlock, err := lockCtx(ctx, r.t.writes)
	if err != nil {
		return err
	}
	defer unlock()
	q, err := r.Get(ctx, id)
	if err != nil {
		return err
	}
	if q.Status() != domain.AuthRequestPending {
		return fmt.Errorf("auth request %s is no longer pending: %w", id, domain.ErrNotFound)
	}
	s := r.adm.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if dev != nil {
		if err := r.adm.createDeviceLocked(*dev, a); err != nil {
			return err
		}
	} else {
		if _, ok := s.devices[a.DeviceID().String()]; !ok {
			return fmt.Errorf("device %q: %w", a.DeviceID().String(), domain.ErrNotFound)
		}
		r.t.mu.Lock()
		gen := a.Generation()
		if cur, ok := r.t.admissions[a.DeviceID().String()]; ok && cur.Generation() >= gen {
			gen = cur.Generation() + 1
		}
		stored, err := domain.RehydrateDeviceAdmission(a.DeviceID().String(), a.Key().PEM(), gen, stamp(a.UpdatedAt()))
		if err != nil {
			r.t.mu.Unlock()
			return err
		}
		r.t.admissions[a.DeviceID().String()] = stored
		r.t.mu.Unlock()
	}
	r.t.mu.Lock()
	delete(r.t.requests, id.String())
	r.t.mu.Unlock()
	return nil
}

// ArtifactCatalog is the in-memory mender.ArtifactCatalog over a Store.
type ArtifactCatalog struct{ s *Store }

// NewArtifactCatalog returns the artifact-name lookup of s.
func NewArtifactCatalog(s *Store) *ArtifactCatalog { return &ArtifactCatalog{s: s} }

// ByArtifactName returns the model's firmware published under name.
func (r *ArtifactCatalog) ByArtifactName(ctx context.Context, model, name string) (domain.Firmware, error) {
	if err := ctx.Err(); err != nil {
		return domain.Firmware{}, err
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if f, ok := r.s.artifactLocked(model, name); ok {
		return f, nil
	}
	return domain.Firmware{}, fmt.Errorf("artifact %q of %q: %w", name, model, domain.ErrNotFound)
}

// artifactLocked finds the model's firmware named name; the caller holds
// the store's mutex.
func (s *Store) artifactLocked(model, name string) (domain.Firmware, bool) {
	if name == "" {
		return domain.Firmware{}, false
	}
	for _, f := range s.firmwares {
		if f.Model() == model && f.ArtifactName() == name {
			return f, true
		}
	}
	return domain.Firmware{}, false
}

// TaskLogs is the in-memory mender.TaskLogs over a Store.
type TaskLogs struct {
	tasks *Tasks
	t     *menderTables
}

// NewTaskLogs returns the task log repository of s.
func NewTaskLogs(s *Store) *TaskLogs { return &TaskLogs{tasks: NewTasks(s), t: menderOf(s)} }

// Put stores a task's log; domain.ErrNotFound if the task does not exist.
func (r *TaskLogs) Put(ctx context.Context, l domain.TaskLog) error {
	if _, err := r.tasks.Get(ctx, l.TaskID()); err != nil {
		return err
	}
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	r.t.logs[l.TaskID().String()] = domain.RehydrateTaskLog(l.TaskID().String(), l.Lines(), stamp(l.UpdatedAt()))
	return nil
}

// Get returns a task's log.
func (r *TaskLogs) Get(ctx context.Context, taskID domain.UUID) (domain.TaskLog, error) {
	return read(ctx, &r.t.mu, func() (domain.TaskLog, error) { return found(r.t.logs, taskID.String()) })
}
