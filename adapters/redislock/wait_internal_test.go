package redislock

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/ai-device/ota/ports"
)

// lateLocker stands in for rueidislock: each try answers "locked" after
// arrive(ctx), and releasing that lock takes release — Redis answering
// late, as when it stalls just as the wait runs out.
type lateLocker struct {
	arrive  func(ctx context.Context)
	release time.Duration
	wg      sync.WaitGroup
}

func (f *lateLocker) TryWithContext(ctx context.Context, _ string) (context.Context, context.CancelFunc, error) {
	f.arrive(ctx)
	lockCtx, cancel := context.WithCancel(ctx)
	f.wg.Add(1)
	return lockCtx, func() {
		defer f.wg.Done()
		time.Sleep(f.release)
		cancel()
	}, nil
}

func (f *lateLocker) WithContext(context.Context, string) (context.Context, context.CancelFunc, error) {
	return nil, nil, errors.New("not used")
}

func (f *lateLocker) ForceWithContext(context.Context, string) (context.Context, context.CancelFunc, error) {
	return nil, nil, errors.New("not used")
}
func (f *lateLocker) Client() rueidis.Client { return nil }
func (f *lateLocker) Close()                 {}

var _ rueidislock.Locker = (*lateLocker)(nil)

func lateTestLocker(f *lateLocker, wait time.Duration) *Locker {
	return &Locker{lk: f, names: &nameTable{prefix: "t:", states: map[string]*nameState{}}, wait: wait, metrics: ports.NopLockMetrics{}}
}

// TestWaitBoundedWhenTheLockArrivesLate: a lock that arrives just as the
// caller stops waiting cannot guard anything and is released; the caller
// must not wait for that release, or the wait for a lock would reach twice
// OTA_LOCK_WAIT when Redis is slow to answer it.
func TestWaitBoundedWhenTheLockArrivesLate(t *testing.T) {
	const (
		wait    = 150 * time.Millisecond
		release = 2 * time.Second // far longer than the wait
		slack   = 60 * time.Millisecond
	)

	t.Run("CallerLeavesAsTheLockArrives", func(t *testing.T) {
		// The caller's cancellation reaches the lock's wait through an
		// AfterFunc, so the lock is almost always received first: the
		// late-arrival path, deterministically enough to run it 20 times.
		var cancels sync.Map
		f := &lateLocker{release: release, arrive: func(ctx context.Context) {
			c, _ := cancels.Load(ctx.Value(nameKey{}))
			c.(context.CancelFunc)()
		}}
		l := lateTestLocker(f, wait)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := "late-" + strconv.Itoa(i)
				ctx, cancel := context.WithCancel(context.WithValue(context.Background(), nameKey{}, name))
				defer cancel()
				cancels.Store(name, cancel)
				start := time.Now()
				ran := false
				err := l.WithLock(ctx, name, func(context.Context) error { ran = true; return nil })
				if took := time.Since(start); took > slack {
					t.Errorf("WithLock returned %v after its caller left, waiting for a release (bound %v)", took, slack)
				}
				if ran || !errors.Is(err, context.Canceled) {
					t.Errorf("ran = %v, err = %v; want fn not run and the caller's cancellation", ran, err)
				}
			}()
		}
		wg.Wait()
		l.Close()
		f.wg.Wait()
	})

	t.Run("LockArrivesAsTheWaitExpires", func(t *testing.T) {
		// Locks arrive within a millisecond of the wait's end, on either
		// side: whether fn runs or SERVICE_BUSY is answered, the wait ends
		// within OTA_LOCK_WAIT and a few ms.
		f := &lateLocker{release: release, arrive: func(context.Context) {
			time.Sleep(wait - time.Millisecond + rand.N(2*time.Millisecond))
		}}
		l := lateTestLocker(f, wait)
		// As many goroutines only sleep as long, beside the waiters: how
		// late the machine wakes a sleeper (the race detector, other
		// processes on shared cores) is not the lock's wait, and is
		// allowed on top of the slack.
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			waits     []time.Duration
			sleepLate time.Duration
		)
		for i := range 100 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				start := time.Now()
				time.Sleep(wait)
				mu.Lock()
				sleepLate = max(sleepLate, time.Since(start)-wait)
				mu.Unlock()
			}()
			go func() {
				defer wg.Done()
				start := time.Now()
				var waited time.Duration
				err := l.WithLock(context.Background(), "edge-"+strconv.Itoa(i), func(context.Context) error {
					waited = time.Since(start)
					return nil
				})
				if err != nil {
					waited = time.Since(start)
					if busy, ok := errors.AsType[*ports.BusyError](err); !ok || busy.Reason == ports.LockLost {
						t.Errorf("err = %v, want fn run or a wait refusal", err)
					}
				}
				mu.Lock()
				waits = append(waits, waited)
				mu.Unlock()
			}()
		}
		wg.Wait()
		l.Close()
		f.wg.Wait()
		for _, waited := range waits {
			if waited > wait+slack+sleepLate {
				t.Errorf("waited %v for the lock, want at most %v + %v (+ %v, how late a plain sleep of as long woke)", waited, wait, slack, sleepLate)
			}
		}
	})
}

type nameKey struct{}
