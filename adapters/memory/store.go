// Package memory implements the OTA service's storage ports in process
// memory, for fast tests and the OTA_STORE=memory dev mode: a map per table
// behind one lock. It keeps what the contract suites in tests/contract pin
// for every store (the sentinel errors, uniqueness and reference checks,
// timestamps at microsecond precision), not how Postgres gets there.
package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/ai-device/ota/domain"
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
		artifacts: map[string]domain.Artifact{}}
}

// errActiveTaskTaken refuses an update that would give a device a second
// active task. The domain's transitions never do that: a programming error.
var errActiveTaskTaken = errors.New("memory: the device already has another active task")

// errTokenTaken refuses a token hash another device has. Tokens are 256
// random bits, so a collision means a caller reused a hash.
var errTokenTaken = errors.New("memory: another device has this token hash")

// errDuplicateID refuses a second row with an id. Ids are fresh UUIDs, so
// it signals a caller bug rather than a condition with a domain error.
func errDuplicateID(what, id string) error {
	return fmt.Errorf("memory: a %s with id %s is already stored", what, id)
}

// stamp keeps a time at the precision the contract pins (microseconds,
// truncated), in UTC. The zero time stays zero: it stands for "never".
func stamp(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

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

// update is every Update: fn changes a copy of the stored row m[id], and
// what put makes of the change is stored, unless fn fails or ctx ends.
func update[V any](ctx context.Context, s *Store, m map[string]V, id string, fn func(*V) error, put func(old, changed V) (V, error)) (V, error) {
	return locked(ctx, s, func() (V, error) {
		old, err := found(m, id)
		if err != nil {
			return old, err
		}
		changed := old
		if err := cmp.Or(fn(&changed), ctx.Err()); err != nil { // fn first, then whether ctx ended meanwhile
			return *new(V), err
		}
		return put(old, changed)
	})
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
