// Package memory implements the OTA service's storage ports in process
// memory. It backs fast unit tests and the OTA_STORE=memory dev mode, so it
// mirrors what the Postgres adapter lets a caller observe: the same sentinel
// errors, the same uniqueness and reference checks, timestamps at microsecond
// precision, canonical lowercase UUIDs, one active task per device whatever
// the caller's locks do, and writes that never interleave. The
// tests in tests/contract run against both adapters to keep them alike.
package memory

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ai-device/ota/domain"
)

// Store holds every table of the in-process database behind one mutex. The
// repositories (Devices, Firmwares, Rollouts, Tasks) are thin views over one
// Store, so a task can check the device, firmware and rollout it references
// as Postgres foreign keys would.
//
// Every read-modify-write holds the writer lock (lockWrites) for its whole
// function. A task transaction (Tasks.InTaskTx) holds the mutex too; an
// Update does not while the caller's fn runs, so that fn may read other
// repositories, as it may inside a Postgres transaction.
type Store struct {
	writes chan struct{}

	mu           sync.Mutex
	devices      map[string]domain.Device
	byToken      map[domain.TokenHash]string // token hash → device id
	firmwares    map[string]domain.Firmware
	firmwareKeys map[firmwareKey]string
	rollouts     map[string]domain.Rollout
	tasks        map[string]domain.Task
	byDevice     map[string][]string // task ids of a device, in insertion order
	byRollout    map[string][]string // task ids of a rollout, in insertion order
	active       map[string]string   // device id → id of its one active task
	lastActionID int64

	// eventLog is each task's stored events (by task id), in the order
	// they were stored: the task's history.
	eventLog map[string][]loggedEvent
}

// firmwareKey is the identity of a firmware publication: build metadata is
// not part of it, so 1.2.0+a and 1.2.0+b collide.
type firmwareKey struct{ model, version string }

// loggedEvent is a stored event as a task's history reads it.
type loggedEvent struct {
	id, fingerprint string
	at              time.Time
}

// NewStore returns an empty store. Every repository built over it sees the
// same data, like repositories sharing one database.
func NewStore() *Store {
	return &Store{
		writes:       make(chan struct{}, 1),
		devices:      map[string]domain.Device{},
		byToken:      map[domain.TokenHash]string{},
		firmwares:    map[string]domain.Firmware{},
		firmwareKeys: map[firmwareKey]string{},
		rollouts:     map[string]domain.Rollout{},
		tasks:        map[string]domain.Task{},
		byDevice:     map[string][]string{},
		byRollout:    map[string][]string{},
		active:       map[string]string{},
		eventLog:     map[string][]loggedEvent{},
	}
}

// errActiveTaskTaken mirrors the partial unique index on active tasks
// refusing an update that would give a device a second active task. The
// domain's transitions never do that, so it signals a programming error.
var errActiveTaskTaken = errors.New("memory: the device already has another active task")

// errTokenTaken mirrors the unique key on token hashes. Tokens are 256
// random bits, so a collision means a caller reused a hash.
var errTokenTaken = errors.New("memory: another device has this token hash")

// stamp stores a time at Postgres precision (microseconds, truncated), in
// UTC. The zero time stays zero: it stands for NULL.
func stamp(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// lockWrites takes the store's writer lock, and returns its release: every
// read-modify-write of the store (a task transaction, an Update) holds it
// for its whole function, so none interleaves with another. Waiting
// respects ctx, as a Postgres statement blocked on a lock does.
func (s *Store) lockWrites(ctx context.Context) (func(), error) {
	return lockCtx(ctx, s.writes)
}

// lockCtx takes a one-slot semaphore unless ctx ends first.
func lockCtx(ctx context.Context, sem chan struct{}) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// read runs f under mu unless ctx has ended: every read of the store.
func read[T any](ctx context.Context, mu *sync.Mutex, f func() (T, error)) (T, error) {
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	mu.Lock()
	defer mu.Unlock()
	return f()
}

// found is m[k], or domain.ErrNotFound.
func found[K comparable, V any](m map[K]V, k K) (V, error) {
	v, ok := m[k]
	if !ok {
		return v, domain.ErrNotFound
	}
	return v, nil
}

// update is every Update's read-modify-write, under the tables' writer
// lock: load the row under mu, let fn change a copy without mu (fn may
// read other repositories, as inside a Postgres transaction), and, unless
// fn fails or ctx ends, store what put makes of the change, under mu.
func update[V any](ctx context.Context, writes chan struct{}, mu *sync.Mutex, load func() (V, error), fn func(*V) error, put func(old, changed V) (V, error)) (V, error) {
	var zero V
	unlock, err := lockCtx(ctx, writes)
	if err != nil {
		return zero, err
	}
	defer unlock()
	old, err := read(ctx, mu, load)
	if err != nil {
		return zero, err
	}
	changed := old
	if err := fn(&changed); err != nil {
		return zero, err
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	mu.Lock()
	defer mu.Unlock()
	return put(old, changed)
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

// errDuplicateID mirrors a primary-key violation. Ids are fresh UUIDs, so
// it signals a caller bug rather than a condition with a domain error.
func errDuplicateID(what, id string) error {
	return fmt.Errorf("memory: a %s with id %s is already stored", what, id)
}
