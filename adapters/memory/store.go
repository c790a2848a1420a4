// Package memory implements the OTA service's storage ports in process
// memory. It backs fast unit tests and the OTA_STORE=memory dev mode, so it
// mirrors what the Postgres adapter lets a caller observe: the same sentinel
// errors, the same uniqueness and reference checks, timestamps at microsecond
// precision, canonical lowercase UUIDs, one active task per device whatever
// the caller's locks do, and row locks held while a caller's fn runs. The
// tests in tests/contract run against both adapters to keep them alike.
package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ai-device/ota/domain"
)

// Store holds every table of the in-process database behind one mutex. The
// repositories (Devices, Firmwares, Rollouts, Tasks) are thin views over one
// Store, so a task can check the device, firmware and rollout it references
// as Postgres foreign keys would.
//
// The mutex is never held while a caller's fn runs: fn may read other
// repositories, as it may inside a Postgres transaction. Read-modify-write
// cycles are instead serialised per row by a separate set of row locks,
// which play the part of SELECT … FOR UPDATE.
type Store struct {
	rows rowLocks

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
	events       map[eventKey]string // (task, event id) → the event's fingerprint
	lastActionID int64

	// eventLog is each task's stored events (by task id), in the order
	// they were stored: the task's history.
	eventLog map[string][]loggedEvent

	// artifacts are the uploaded artifacts by id (artifacts.go).
	artifacts map[string]domain.Artifact
}

// firmwareKey is the identity of a firmware publication: build metadata is
// not part of it, so 1.2.0+a and 1.2.0+b collide.
type firmwareKey struct{ model, version string }

// eventKey scopes a device-made event id to one task, as the contract does.
type eventKey struct{ taskID, eventID string }

// loggedEvent is a stored event as a task's history reads it.
type loggedEvent struct {
	id, fingerprint string
	at              time.Time
}

// NewStore returns an empty store. Every repository built over it sees the
// same data, like repositories sharing one database.
func NewStore() *Store {
	return &Store{
		rows:         rowLocks{held: map[string]*rowLock{}},
		devices:      map[string]domain.Device{},
		byToken:      map[domain.TokenHash]string{},
		firmwares:    map[string]domain.Firmware{},
		firmwareKeys: map[firmwareKey]string{},
		rollouts:     map[string]domain.Rollout{},
		tasks:        map[string]domain.Task{},
		byDevice:     map[string][]string{},
		byRollout:    map[string][]string{},
		active:       map[string]string{},
		events:       map[eventKey]string{},
		eventLog:     map[string][]loggedEvent{},
		artifacts:    map[string]domain.Artifact{},
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

// rowLocks serialises read-modify-write cycles on one row the way SELECT …
// FOR UPDATE does. Waiting respects the caller's context, as a Postgres
// query blocked on a row lock does.
type rowLocks struct {
	mu   sync.Mutex
	held map[string]*rowLock
}

// rowLock is one row's lock: a one-slot semaphore, and how many callers hold
// or wait for it so that idle entries can be dropped.
type rowLock struct {
	sem  chan struct{}
	refs int
}

// lock waits for the row named key and returns its release function.
func (l *rowLocks) lock(ctx context.Context, key string) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	e := l.held[key]
	if e == nil {
		e = &rowLock{sem: make(chan struct{}, 1)}
		l.held[key] = e
	}
	e.refs++
	l.mu.Unlock()
	select {
	case e.sem <- struct{}{}:
		return func() {
			<-e.sem
			l.drop(key, e)
		}, nil
	case <-ctx.Done():
		l.drop(key, e)
		return nil, ctx.Err()
	}
}

func (l *rowLocks) drop(key string, e *rowLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.refs--
	if e.refs == 0 {
		delete(l.held, key)
	}
}

// Row-lock names. Tasks are locked per device: every task write of a device
// serialises on it, which covers both the one-active-task rule and
// concurrent events on one task. Where one path takes several, it takes
// them in this order — a device's tasks, then rollouts (two in id order),
// then a firmware — so no two paths can wait for each other
// (ReplaceActive: tasks, the ended task's rollout and the new task's, its
// firmware; ApplyEvent: tasks, the task's rollout; Rollouts.Update: the
// rollout, its firmware).
func deviceRow(id string) string   { return "device\x00" + id }
func firmwareRow(id string) string { return "firmware\x00" + id }
func rolloutRow(id string) string  { return "rollout\x00" + id }
func taskRows(deviceID string) string {
	return "tasks\x00" + deviceID
}

// errDuplicateID mirrors a primary-key violation. Ids are fresh UUIDs, so
// it signals a caller bug rather than a condition with a domain error.
func errDuplicateID(what, id string) error {
	return fmt.Errorf("memory: a %s with id %s is already stored", what, id)
}
