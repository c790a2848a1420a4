// Package memory implements the OTA service's storage ports in process
// memory, for fast tests and the OTA_STORE=memory dev mode: a map per table
// behind one lock. It keeps what the contract suites in tests/contract pin
// for every store (the sentinel errors, uniqueness and reference checks),
// not how Postgres gets there. Domain values are immutable once built (a
// state change makes a new one; times are already at microseconds), so
// the maps hold them as given.
package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Store is every table of the in-process database, shared by the
// repositories built over it. Its one lock is held by each read and write
// for its whole function, a transaction's or an Update's fn included (fn
// reaches the store only through what it is given), so no change is ever
// seen half done and none needs row locks.
type Store struct {
	lock chan struct{} // a one-slot semaphore rather than a mutex: waiting respects ctx

	devices    map[string]domain.Device
	firmwares  map[string]domain.Firmware
	rollouts   map[string]domain.Rollout
	tasks      map[string]domain.Task
	events     map[string][]loggedEvent // task id → its events, as stored
	lastAction int64                    // the last action id given to a task
	attrs      map[string]domain.DeviceAttributes
	confirmed  map[string]time.Time // task id → when its cancel was confirmed
	tags       map[string][]string
	admissions map[string]domain.DeviceAdmission
	requests   map[string]domain.AuthRequest
	logs       map[string]domain.TaskLog
	artifacts  map[string]domain.Artifact
	counts     map[string]domain.TaskStats // countKey → a rollout's counters
	audit      []domain.AuditRecord        // in the order written; seq is the index + 1
	outbox     []storedEvent               // events, in the order written, each with its deliveries
	webhooks   map[string]domain.WebhookSubscription
	deliveries int64 // the last delivery id given
	users      map[string]domain.User
	tokens     map[string]domain.APIToken
}

// loggedEvent is a stored event as a task's history reads it.
type loggedEvent struct {
	id, fingerprint string
	at              time.Time
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{lock: make(chan struct{}, 1), devices: map[string]domain.Device{}, firmwares: map[string]domain.Firmware{},
		rollouts: map[string]domain.Rollout{}, tasks: map[string]domain.Task{}, events: map[string][]loggedEvent{},
		attrs: map[string]domain.DeviceAttributes{}, confirmed: map[string]time.Time{}, tags: map[string][]string{},
		admissions: map[string]domain.DeviceAdmission{}, requests: map[string]domain.AuthRequest{}, logs: map[string]domain.TaskLog{},
		artifacts: map[string]domain.Artifact{}, counts: map[string]domain.TaskStats{},
		webhooks: map[string]domain.WebhookSubscription{}, users: map[string]domain.User{}, tokens: map[string]domain.APIToken{}}
}

// errTokenTaken refuses a token hash another device has. Tokens are 256
// random bits, so a collision means a caller reused a hash.
var errTokenTaken = errors.New("memory: another device has this token hash")

// errDuplicateID refuses a second row with an id. Ids are fresh UUIDs, so
// it signals a caller bug rather than a condition with a domain error.
func errDuplicateID(what, id string) error {
	return fmt.Errorf("memory: a %s with id %s is already stored", what, id)
}

// us is a query's time bound at the precision stored times have: domain
// values are kept at microseconds, a caller's bound need not be.
func us(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// locked runs f holding the store's lock, unless ctx ends first.
func locked[T any](ctx context.Context, s *Store, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	defer func() { <-s.lock }()
	return f()
}

// do is locked for a function with no result.
func do(ctx context.Context, s *Store, f func() error) error {
	_, err := locked(ctx, s, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// tx runs fn holding the lock and, when fn fails, puts back the tables a
// task or account transaction writes, and the audit log and outbox, as
// they were: copies taken at the start, cheap at the sizes of tests and
// dev mode. Ids given meanwhile (action, delivery) stay given, as a
// Postgres sequence's do.
func (s *Store) tx(ctx context.Context, fn func() error) error {
	return do(ctx, s, func() error {
		restores := []func(){saved(s.devices), saved(s.rollouts), saved(s.tasks), saved(s.events), saved(s.counts),
			saved(s.users), saved(s.tokens)}
		audit, outbox := s.audit, s.outbox
		err := fn()
		if err != nil {
			for _, restore := range restores {
				restore()
			}
			s.audit, s.outbox = audit, outbox
		}
		return err
	})
}

// saved copies m and returns what puts the copy back, in place: the
// repositories take a table's map before they take the lock.
func saved[V any](m map[string]V) func() {
	c := maps.Clone(m)
	return func() {
		clear(m)
		maps.Copy(m, c)
	}
}

// write runs f holding the lock and, if f succeeds, records rec: the
// change's audit record, written with it as Postgres writes it in the
// change's transaction.
func write(ctx context.Context, s *Store, rec domain.AuditRecord, f func() error) error {
	return do(ctx, s, func() error {
		err := f()
		if err == nil {
			s.record(rec)
		}
		return err
	})
}

// update is every Update: fn changes a copy of the stored row m[id], which
// is stored unless fn fails, ctx ends, or check (if any) refuses it; then
// audit's record of the change (nil: none) is recorded with it.
func update[V any](ctx context.Context, s *Store, m map[string]V, id string, fn func(*V) error, check func(V) error,
	audit ports.Audit[V]) (V, error) {
	return locked(ctx, s, func() (V, error) {
		v, err := found(m, id)
		before, rec := v, domain.AuditRecord{}
		if err == nil {
			err = cmp.Or(fn(&v), ctx.Err()) // fn first, then whether ctx ended meanwhile
		}
		if err == nil && check != nil {
			err = check(v)
		}
		if err == nil && audit != nil {
			rec, err = audit(before, v)
		}
		if err != nil {
			return *new(V), err
		}
		m[id] = v
		s.record(rec)
		return v, nil
	})
}

// recorded is the audit of a change whose record is made before it.
func recorded[V any](rec domain.AuditRecord) ports.Audit[V] {
	return func(V, V) (domain.AuditRecord, error) { return rec, nil }
}

// get is m[k] under the lock, or domain.ErrNotFound.
func get[V any](ctx context.Context, s *Store, m map[string]V, k fmt.Stringer) (V, error) {
	return locked(ctx, s, func() (V, error) { return found(m, k.String()) })
}

// remove deletes m[id], or says it is not there.
func remove[V any](m map[string]V, what string, id domain.UUID) error {
	if !has(m, id.String()) {
		return fmt.Errorf("%s %s: %w", what, id, domain.ErrNotFound)
	}
	delete(m, id.String())
	return nil
}

// found is m[k], or domain.ErrNotFound.
func found[K comparable, V any](m map[K]V, k K) (V, error) {
	v, ok := m[k]
	if !ok {
		return v, domain.ErrNotFound
	}
	return v, nil
}

func has[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

// where lists the values of m that keep accepts, in no order.
func where[K comparable, V any](m map[K]V, keep func(V) bool) []V {
	out := []V{}
	for _, v := range m {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// page sorts out by less and keeps its first limit (def when limit <= 0).
func page[T any](out []T, limit, def int, less func(a, b T) bool) []T {
	sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	if limit <= 0 {
		limit = def
	}
	return out[:min(len(out), limit)]
}

// newer orders newest first: by time, then by id, both descending
// (canonical UUID strings sort as Postgres sorts uuid values).
func newer(a, b time.Time, aID, bID string) bool {
	if c := a.Compare(b); c != 0 {
		return c > 0
	}
	return aID > bID
}

// Devices is the in-memory ports.DeviceRepository over a Store.
type Devices struct{ s *Store }

var _ ports.DeviceRepository = (*Devices)(nil)

func NewDevices(s *Store) *Devices { return &Devices{s: s} }

// tokenFree refuses d when another device has its token hash.
func (s *Store) tokenFree(d domain.Device) error {
	if owner, err := s.byToken(d.TokenHash()); err == nil && owner.ID() != d.ID() {
		return errTokenTaken
	}
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

func (r *Devices) Create(ctx context.Context, d domain.Device, rec domain.AuditRecord) error {
	return write(ctx, r.s, rec, func() error { return r.s.createDevice(d) })
}

func (s *Store) createDevice(d domain.Device) error {
	if has(s.devices, d.ID().String()) {
		return domain.ErrDeviceExists
	}
	err := s.tokenFree(d)
	if err == nil {
		s.devices[d.ID().String()] = d
	}
	return err
}

func (r *Devices) Get(ctx context.Context, id domain.DeviceID) (domain.Device, error) {
	return get(ctx, r.s, r.s.devices, id)
}

func (r *Devices) Update(ctx context.Context, id domain.DeviceID, fn func(*domain.Device) error, rec domain.AuditRecord) (domain.Device, error) {
	return update(ctx, r.s, r.s.devices, id.String(), fn, r.s.tokenFree, recorded[domain.Device](rec))
}

// RecordSeen writes every report at once: writing costs nothing here.
func (r *Devices) RecordSeen(ctx context.Context, stored domain.Device, v domain.Version, at time.Time) error {
	return do(ctx, r.s, func() error {
		d, err := found(r.s.devices, stored.ID().String())
		if err != nil || d.LastSeenAt().After(at) {
			return err // unknown, or a newer report is stored already
		}
		if !stored.SeenChangesVersion(v) {
			v = d.CurrentVersion()
		}
		d.Seen(v, at)
		r.s.devices[d.ID().String()] = d
		return nil
	})
}

// Firmwares is the in-memory ports.FirmwareRepository over a Store.
type Firmwares struct{ s *Store }

var _ ports.FirmwareRepository = (*Firmwares)(nil)

func NewFirmwares(s *Store) *Firmwares { return &Firmwares{s: s} }

// sameRelease reports whether a and b are one publication: the same model
// and version, build metadata ignored (1.2.0+a and 1.2.0+b collide).
func sameRelease(a, b domain.Firmware) bool {
	return a.Model() == b.Model() && a.Version().Key() == b.Version().Key()
}

// named reports whether f is the model's firmware of the named artifact
// (no firmware is that of the empty name).
func named(f domain.Firmware, model, name string) bool {
	return name != "" && f.Model() == model && f.ArtifactName() == name
}

func (r *Firmwares) Create(ctx context.Context, f domain.Firmware, rec domain.AuditRecord) error {
	id := f.ID().String()
	return write(ctx, r.s, rec, func() error {
		for _, o := range r.s.firmwares {
			switch {
			case sameRelease(o, f):
				return domain.ErrFirmwareExists
			case named(o, f.Model(), f.ArtifactName()):
				return domain.ErrArtifactNameTaken
			}
		}
		if _, taken := r.s.firmwares[id]; taken {
			return errDuplicateID("firmware", id)
		}
		if a := f.ArtifactID(); !a.IsZero() && !has(r.s.artifacts, a.String()) {
			return fmt.Errorf("the artifact does not exist: %w", domain.ErrNotFound) // the foreign key
		}
		r.s.firmwares[id] = f
		return nil
	})
}

func (r *Firmwares) Get(ctx context.Context, id domain.UUID) (domain.Firmware, error) {
	return get(ctx, r.s, r.s.firmwares, id)
}

func (r *Firmwares) List(ctx context.Context, model string) ([]domain.Firmware, error) {
	return locked(ctx, r.s, func() ([]domain.Firmware, error) {
		out := where(r.s.firmwares, func(f domain.Firmware) bool { return model == "" || f.Model() == model })
		return page(out, len(out), 0, func(a, b domain.Firmware) bool {
			return newer(a.CreatedAt(), b.CreatedAt(), a.ID().String(), b.ID().String())
		}), nil
	})
}

func (r *Firmwares) Update(ctx context.Context, id domain.UUID, fn func(*domain.Firmware) error, audit ports.Audit[domain.Firmware]) (domain.Firmware, error) {
	return update(ctx, r.s, r.s.firmwares, id.String(), fn, func(c domain.Firmware) error {
		for oid, o := range r.s.firmwares {
			if oid != id.String() && sameRelease(o, c) {
				return domain.ErrFirmwareExists
			}
		}
		return nil
	}, audit)
}

// Rollouts is the in-memory ports.RolloutRepository over a Store.
type Rollouts struct{ s *Store }

var _ ports.RolloutRepository = (*Rollouts)(nil)

func NewRollouts(s *Store) *Rollouts { return &Rollouts{s: s} }

func (r *Rollouts) Create(ctx context.Context, ro domain.Rollout, rec domain.AuditRecord) error {
	id := ro.ID().String()
	return write(ctx, r.s, rec, func() error {
		fw, err := found(r.s.firmwares, ro.FirmwareID().String())
		switch {
		case err != nil:
			return err
		case fw.Revoked():
			return domain.ErrFirmwareRevoked
		case has(r.s.rollouts, id):
			return errDuplicateID("rollout", id)
		case !ro.RequestKey().IsZero() && len(r.s.keyed(ro.RequestKey().Key())) > 0:
			return domain.ErrRequestKeyTaken
		}
		r.s.rollouts[id] = ro
		return nil
	})
}

func (r *Rollouts) Get(ctx context.Context, id domain.UUID) (domain.Rollout, error) {
	return get(ctx, r.s, r.s.rollouts, id)
}

func (r *Rollouts) ByRequestKey(ctx context.Context, key string) (domain.Rollout, error) {
	return locked(ctx, r.s, func() (domain.Rollout, error) {
		for _, ro := range r.s.keyed(key) {
			return ro, nil
		}
		return domain.Rollout{}, fmt.Errorf("the rollout of an Idempotency-Key: %w", domain.ErrNotFound)
	})
}

// keyed lists the rollouts started with key (at most one).
func (s *Store) keyed(key string) []domain.Rollout {
	return where(s.rollouts, func(ro domain.Rollout) bool { return key != "" && ro.RequestKey().Key() == key })
}

func (r *Rollouts) Offers(ctx context.Context, model string) ([]domain.Offer, error) {
	all, err := r.AllOffers(ctx)
	return append([]domain.Offer{}, all[model]...), err
}

// AllOffers is Offers for every model, by model (models without offers
// are absent).
func (r *Rollouts) AllOffers(ctx context.Context) (map[string][]domain.Offer, error) {
	return locked(ctx, r.s, func() (map[string][]domain.Offer, error) {
		out := map[string][]domain.Offer{}
		for _, ro := range r.s.rollouts {
			if o := (domain.Offer{Firmware: r.s.firmwares[ro.FirmwareID().String()], Rollout: ro}); o.Open() {
				out[o.Firmware.Model()] = append(out[o.Firmware.Model()], o)
			}
		}
		for _, offers := range out {
			domain.SortOffers(offers)
		}
		return out, nil
	})
}

// Artifacts is ports.ArtifactRepository over a Store (with the firmwares).
type Artifacts struct{ s *Store }

func NewArtifacts(s *Store) *Artifacts { return &Artifacts{s: s} }

func (r *Artifacts) Create(ctx context.Context, a domain.Artifact, rec domain.AuditRecord) (stored domain.Artifact, created bool, err error) {
	err = do(ctx, r.s, func() error {
		same := where(r.s.artifacts, func(o domain.Artifact) bool { return o.Digest().SHA256 == a.Digest().SHA256 })
		if stored, created = a, len(same) == 0; created {
			r.s.artifacts[a.ID().String()] = a
			r.s.record(rec)
		} else {
			stored = same[0]
		}
		return nil
	})
	return stored, created, err
}

func (r *Artifacts) Get(ctx context.Context, id domain.UUID) (domain.Artifact, error) {
	return get(ctx, r.s, r.s.artifacts, id)
}

func (r *Artifacts) List(ctx context.Context) ([]domain.Artifact, error) {
	return locked(ctx, r.s, func() ([]domain.Artifact, error) {
		out := where(r.s.artifacts, func(domain.Artifact) bool { return true })
		return page(out, len(out), 0, func(a, b domain.Artifact) bool {
			return newer(a.CreatedAt(), b.CreatedAt(), a.ID().String(), b.ID().String())
		}), nil
	})
}

func (r *Artifacts) Delete(ctx context.Context, id domain.UUID, audit ports.Audit[domain.Artifact]) error {
	return do(ctx, r.s, func() error {
		a, err := found(r.s.artifacts, id.String())
		if err != nil {
			return fmt.Errorf("artifact %s: %w", id, err)
		}
		if len(where(r.s.firmwares, func(f domain.Firmware) bool { return f.ArtifactID() == id })) > 0 {
			return domain.ErrArtifactInUse
		}
		rec, err := audit(a, domain.Artifact{})
		if err != nil {
			return err
		}
		delete(r.s.artifacts, id.String())
		r.s.record(rec)
		return nil
	})
}
