package contract

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// RunLocker checks what the service relies on from a ports.Locker: mutual
// exclusion across replicas, a waiter getting in as soon as the holder
// leaves, a wait bounded by the configured wait (SERVICE_BUSY, fn not run), a
// lock that outlives the wait, fn's error passed through untouched, release
// after an error or a panic, and the caller's cancellation ending both the
// wait and fn.
//
// newLockers returns two lockers that share one lock space but are separate
// clients, like two replicas of the service (an in-process adapter may return
// the same instance twice), both with the bounded wait given; it registers
// its own cleanup on t. Every subtest runs in parallel on fresh lock names.
//
// Time bounds are generous (the suite runs under -race on small shared
// machines): it asserts ordering and "far below the wait", not speed.
func RunLocker(t *testing.T, newLockers func(t *testing.T, wait time.Duration) (ports.Locker, ports.Locker)) {
	t.Run("MutualExclusionAcrossReplicas", func(t *testing.T) {
		t.Parallel()
		a, b := newLockers(t, 30*time.Second)
		name := lockName()
		const workers, rounds = 8, 25 // per replica

		var inside, most atomic.Int32
		counter := 0 // deliberately unsynchronised: only the lock guards it
		var wg sync.WaitGroup
		errs := make(chan error, 2*workers)
		for i := range 2 * workers {
			lk := a
			if i%2 == 1 {
				lk = b
			}
			wg.Go(func() {
				for range rounds {
					err := lk.WithLock(context.Background(), name, func(context.Context) error {
						n := inside.Add(1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						v := counter
						runtime.Gosched() // widen the window a second holder would use
						counter = v + 1
						inside.Add(-1)
						return nil
					})
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		failed := 0
		for err := range errs {
			failed++
			t.Errorf("WithLock: %v", err)
		}
		if got := most.Load(); got != 1 {
			t.Errorf("at most %d callers were inside at once, want 1", got)
		}
		if want := 2 * workers * rounds; failed == 0 && counter != want {
			t.Errorf("counter = %d after %d guarded increments: updates were lost", counter, want)
		}
	})

	t.Run("WaiterGetsInWhenHolderLeaves", func(t *testing.T) {
		t.Parallel()
		const wait = 20 * time.Second
		a, b := newLockers(t, wait)
		for _, tc := range []struct {
			label          string
			holder, waiter ports.Locker
		}{{"other replica", a, b}, {"same replica", a, a}} {
			name := lockName()
			h := holdLock(t, tc.holder, name)

			var enteredAt time.Time
			done := make(chan error, 1)
			go func() {
				done <- tc.waiter.WithLock(context.Background(), name, func(context.Context) error {
					enteredAt = time.Now()
					return nil
				})
			}()
			// The waiter must stay out while the lock is held...
			select {
			case err := <-done:
				h.leave()
				t.Fatalf("%s: waiter finished while the lock was held: %v", tc.label, err)
			case <-time.After(300 * time.Millisecond):
			}
			// ...and get in once the holder leaves, long before its wait ends.
			leftAt := time.Now()
			if err := h.leave(); err != nil {
				t.Fatalf("%s: holder: %v", tc.label, err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s: waiter: %v", tc.label, err)
				}
			case <-time.After(wait + 10*time.Second):
				t.Fatalf("%s: waiter still blocked %v after the holder left", tc.label, wait+10*time.Second)
			}
			handoff := enteredAt.Sub(leftAt)
			if handoff < 0 {
				t.Errorf("%s: waiter entered %v before the holder left", tc.label, -handoff)
			}
			if handoff > wait/10 {
				t.Errorf("%s: waiter entered %v after the holder left; it should be woken by the release, not by its %v wait", tc.label, handoff, wait)
			}
			t.Logf("%s: hand-off %v", tc.label, handoff)
		}
	})

	t.Run("WaitIsBoundedAndLockOutlivesIt", func(t *testing.T) {
		t.Parallel()
		const wait = 300 * time.Millisecond
		a, b := newLockers(t, wait)
		name := lockName()
		h := holdLock(t, a, name)

		for _, tc := range []struct {
			label  string
			waiter ports.Locker
		}{{"other replica", b}, {"same replica", a}} {
			ran := false
			start := time.Now()
			err := tc.waiter.WithLock(context.Background(), name, func(context.Context) error {
				ran = true
				return nil
			})
			elapsed := time.Since(start)
			if ran {
				t.Errorf("%s: fn ran while another caller held the lock", tc.label)
			}
			assertBusy(t, err, ports.LockTimeout)
			if elapsed < wait {
				t.Errorf("%s: gave up after %v, before the %v wait", tc.label, elapsed, wait)
			}
			if limit := wait + 2*time.Second; elapsed > limit {
				t.Errorf("%s: answered after %v, want within %v", tc.label, elapsed, limit)
			}
		}
		// Two waits have passed; the holder must still hold a live lock.
		if err := h.ctx.Err(); err != nil {
			t.Errorf("holder's context ended while it held the lock past the wait: %v", context.Cause(h.ctx))
		}
		if err := h.leave(); err != nil {
			t.Errorf("holder: %v", err)
		}
	})

	t.Run("FnRunsOnceWithCallerContext", func(t *testing.T) {
		t.Parallel()
		a, _ := newLockers(t, 5*time.Second)
		type key struct{}
		ctx := context.WithValue(context.Background(), key{}, "request-42")
		calls := 0
		err := a.WithLock(ctx, lockName(), func(ctx context.Context) error {
			calls++
			if got := ctx.Value(key{}); got != "request-42" {
				t.Errorf("fn's context lost the caller's value: got %v", got)
			}
			if err := ctx.Err(); err != nil {
				t.Errorf("fn's context is already done: %v", err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("WithLock: %v", err)
		}
		if calls != 1 {
			t.Fatalf("fn ran %d times, want 1", calls)
		}
	})

	t.Run("FnErrorReturnedUnchangedAndLockReleased", func(t *testing.T) {
		t.Parallel()
		const wait = 2 * time.Second
		a, b := newLockers(t, wait)
		name := lockName()
		want := &fnError{msg: "task already exists"}
		err := a.WithLock(context.Background(), name, func(context.Context) error { return want })
		if err != error(want) {
			t.Fatalf("WithLock returned %v (%T), want fn's own error value", err, err)
		}
		if errors.Is(err, domain.ErrServiceBusy) {
			t.Fatalf("fn's error became SERVICE_BUSY: %v", err)
		}
		assertFree(t, b, name, wait)
	})

	t.Run("ReleasedAfterPanic", func(t *testing.T) {
		t.Parallel()
		const wait = 2 * time.Second
		a, b := newLockers(t, wait)
		name := lockName()
		got := func() (r any) {
			defer func() { r = recover() }()
			_ = a.WithLock(context.Background(), name, func(context.Context) error { panic("boom") })
			return nil
		}()
		if got != "boom" {
			t.Fatalf("recovered %v, want fn's panic to reach the caller", got)
		}
		assertFree(t, b, name, wait)
	})

	t.Run("DifferentNamesDoNotExclude", func(t *testing.T) {
		t.Parallel()
		const wait = 5 * time.Second
		a, b := newLockers(t, wait)
		h := holdLock(t, a, lockName())
		start := time.Now()
		if err := b.WithLock(context.Background(), lockName(), func(context.Context) error { return nil }); err != nil {
			t.Errorf("another name: %v", err)
		}
		if elapsed := time.Since(start); elapsed > wait/2 {
			t.Errorf("another name took %v: it waited for the held one", elapsed)
		}
		if err := h.leave(); err != nil {
			t.Errorf("holder: %v", err)
		}
	})

	t.Run("CallerCancellationEndsWait", func(t *testing.T) {
		t.Parallel()
		const wait = 20 * time.Second
		a, b := newLockers(t, wait)
		name := lockName()
		h := holdLock(t, a, name)
		defer h.leave()

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ran := atomic.Bool{}
		done := make(chan error, 1)
		go func() {
			done <- b.WithLock(ctx, name, func(context.Context) error { ran.Store(true); return nil })
		}()
		select {
		case err := <-done:
			t.Fatalf("waiter finished while the lock was held: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		cancelledAt := time.Now()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
			if errors.Is(err, domain.ErrServiceBusy) {
				t.Errorf("a caller that left was told SERVICE_BUSY: %v", err)
			}
			if d := time.Since(cancelledAt); d > wait/10 {
				t.Errorf("waiter noticed the cancellation after %v", d)
			}
		case <-time.After(wait / 2):
			t.Fatalf("waiter ignored its cancelled context")
		}
		if ran.Load() {
			t.Errorf("fn ran after the caller cancelled")
		}
	})

	t.Run("CallerDeadlineEndsWait", func(t *testing.T) {
		t.Parallel()
		const wait = 20 * time.Second
		a, b := newLockers(t, wait)
		name := lockName()
		h := holdLock(t, a, name)
		defer h.leave()

		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := b.WithLock(ctx, name, func(context.Context) error {
			t.Errorf("fn ran while another caller held the lock")
			return nil
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want context.DeadlineExceeded", err)
		}
		if elapsed := time.Since(start); elapsed > wait/10 {
			t.Errorf("waiter returned %v after a 300ms deadline", elapsed)
		}
	})

	t.Run("CancelledCallerDoesNotRunFn", func(t *testing.T) {
		t.Parallel()
		a, _ := newLockers(t, 5*time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := a.WithLock(ctx, lockName(), func(context.Context) error {
			t.Errorf("fn ran for a caller that had already left")
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})

	t.Run("CallerCancellationReachesFn", func(t *testing.T) {
		t.Parallel()
		const wait = 2 * time.Second
		a, b := newLockers(t, wait)
		name := lockName()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		entered := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- a.WithLock(ctx, name, func(ctx context.Context) error {
				close(entered)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(30 * time.Second):
					return errors.New("fn's context was not cancelled with the caller's")
				}
			})
		}()
		<-entered
		cancel()
		err := <-done
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want fn's context.Canceled", err)
		}
		if errors.Is(err, domain.ErrServiceBusy) {
			t.Errorf("a caller that left was reported as a lost lock: %v", err)
		}
		assertFree(t, b, name, wait)
	})
}

// fnError is a caller-defined error type, to check WithLock hands back the
// very value fn returned.
type fnError struct{ msg string }

func (e *fnError) Error() string { return e.msg }

func lockName() string { return "contract-" + uuid.NewString() }

// assertBusy checks err is SERVICE_BUSY for the given reason.
func assertBusy(t *testing.T, err error, reason string) {
	t.Helper()
	if !errors.Is(err, domain.ErrServiceBusy) {
		t.Errorf("err = %v, want domain.ErrServiceBusy", err)
		return
	}
	busy, ok := errors.AsType[*ports.BusyError](err)
	if !ok {
		t.Errorf("err = %v (%T), want a *ports.BusyError", err, err)
		return
	}
	if busy.Reason != reason {
		t.Errorf("BusyError reason = %q, want %q (%v)", busy.Reason, reason, err)
	}
}

// assertFree checks that lk gets name without waiting out its wait: a lock
// left behind would keep it out for the whole wait (and, on Redis, the TTL
// is longer than the waits the suite uses).
func assertFree(t *testing.T, lk ports.Locker, name string, wait time.Duration) {
	t.Helper()
	start := time.Now()
	if err := lk.WithLock(context.Background(), name, func(context.Context) error { return nil }); err != nil {
		t.Errorf("lock was not released: %v", err)
		return
	}
	if elapsed := time.Since(start); elapsed > wait/2 {
		t.Errorf("getting the released lock took %v", elapsed)
	}
}

// heldLock is a lock held by a goroutine until leave is called.
type heldLock struct {
	ctx   context.Context // the holder's fn context
	leave func() error    // lets fn return and waits for WithLock's result
}

// holdLock takes name with lk in a goroutine and keeps it until leave; the
// test's cleanup leaves if the test did not.
func holdLock(t *testing.T, lk ports.Locker, name string) heldLock {
	t.Helper()
	entered := make(chan context.Context, 1)
	exit := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		result <- lk.WithLock(context.Background(), name, func(ctx context.Context) error {
			entered <- ctx
			<-exit
			return nil
		})
	}()
	var once sync.Once
	var err error
	leave := func() error {
		once.Do(func() {
			close(exit)
			select {
			case err = <-result:
			case <-time.After(30 * time.Second):
				err = fmt.Errorf("holder's WithLock did not return 30s after fn did")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = leave() })
	select {
	case ctx := <-entered:
		return heldLock{ctx: ctx, leave: leave}
	case err := <-result:
		t.Fatalf("holder could not take %q: %v", name, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("holder could not take %q within 30s", name)
	}
	return heldLock{}
}
