package local

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ai-device/ota/ports"
)

// Locker is an in-process ports.Locker: named mutexes with the Redis
// adapter's semantics (a bounded wait that ends in a BusyError with reason
// LockTimeout, the caller's cancellation ending the wait, release on return
// or panic), for the dev mode and for tests that do not need Redis. It only
// excludes callers within one process.
//
// Each name in use has a one-slot channel: holding the lock is having put a
// token in it, so a waiter is woken by the release itself, as a Redis waiter
// is by the key's invalidation, and a bounded wait is a plain select with a
// timer. A name's state is dropped when its last user leaves, so a service
// that locks a new name per device and firmware does not grow without bound.
type Locker struct {
	wait    time.Duration
	metrics ports.LockMetrics

	mu    sync.Mutex
	names map[string]*lockSlot
}

// lockSlot is one name's semaphore and how many callers hold or await it.
type lockSlot struct {
	sem   chan struct{}
	users int
}

// NewLocker returns a Locker whose WithLock waits at most wait for a name
// held by another caller. A nil metrics discards observations.
func NewLocker(wait time.Duration, metrics ports.LockMetrics) *Locker {
	if metrics == nil {
		metrics = ports.NopLockMetrics{}
	}
	return &Locker{wait: wait, metrics: metrics, names: make(map[string]*lockSlot)}
}

var _ ports.Locker = (*Locker)(nil)

// WithLock runs fn while holding the lock name. It waits at most the
// Locker's wait for another holder to leave and then answers a
// *ports.BusyError (LockTimeout) without running fn; a cancelled ctx ends the
// wait with ctx's error. fn's error is returned unchanged. An in-process lock
// cannot be lost, so fn simply gets ctx.
func (l *Locker) WithLock(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	s := l.join(name)
	defer l.leave(name, s)

	select {
	case s.sem <- struct{}{}:
	default:
		t := time.NewTimer(l.wait)
		select {
		case s.sem <- struct{}{}:
			t.Stop()
		case <-t.C:
			l.metrics.LockFailed(ports.LockTimeout)
			return &ports.BusyError{Reason: ports.LockTimeout, Err: fmt.Errorf("%q held elsewhere for the whole %v wait", name, l.wait)}
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	defer func() { <-s.sem }()
	// The token and ctx's end may have been ready together.
	if err := ctx.Err(); err != nil {
		return err
	}
	l.metrics.LockAcquired(time.Since(start))
	return fn(ctx)
}

// join returns name's slot, creating it, and counts the caller in.
func (l *Locker) join(name string) *lockSlot {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.names[name]
	if s == nil {
		s = &lockSlot{sem: make(chan struct{}, 1)}
		l.names[name] = s
	}
	s.users++
	return s
}

// leave counts the caller out and forgets the name when nobody uses it.
func (l *Locker) leave(name string, s *lockSlot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.users--; s.users == 0 {
		delete(l.names, name)
	}
}

// AlwaysGrantLocker is a ports.Locker that excludes nobody: WithLock just
// calls fn. It exists for the test that proves the database's partial
// unique index alone keeps a device at one active task when concurrent
// checks race with no lock at all (docs/DOMAIN.md check rule 2).
type AlwaysGrantLocker struct{}

var _ ports.Locker = AlwaysGrantLocker{}

// WithLock calls fn with ctx, without locking anything.
func (AlwaysGrantLocker) WithLock(ctx context.Context, _ string, fn func(ctx context.Context) error) error {
	return fn(ctx)
}
