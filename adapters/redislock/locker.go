package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/ai-device/ota/ports"
)

// ErrClosed is the cause of the BusyError WithLock returns after Close.
var ErrClosed = errors.New("redislock: locker closed")

var (
	errWaitExpired = errors.New("lock wait expired")
	errLockLost    = errors.New("lock lost")
)

// Locker is a ports.Locker on Redis. It is safe for concurrent use; every
// replica of the service has one, and they exclude each other through Redis.
//
// Within one Locker, callers for the same name queue locally and only the
// one at the head talks to rueidislock, with TryWithContext; it waits for
// the key's invalidation between tries. rueidislock's own WithContext is not
// used: in v1.0.79 a failed try starts its monitor goroutine before counting
// the failure, so the monitor can take the "released" branch and decrement
// the name's waiter count a second time. The name's gate is then dropped
// while others still wait on it: they miss the release and sit out their
// whole wait (reproduced in about half of the runs of 16 goroutines on two
// clients under -race), and a holder sharing that gate stops hearing that
// its key was taken. With one caller per name and client at a time, no
// gate is ever shared, so the miscount cannot strand anyone.
type Locker struct {
	lk      rueidislock.Locker
	names   *nameTable
	spread  *keySpread // nil with a majority of 1: the lock is one key
	wait    time.Duration
	metrics ports.LockMetrics

	mu     sync.Mutex
	closed bool
	bg     sync.WaitGroup // acquisitions and releases still talking to Redis
	once   sync.Once
}

// New connects to Redis and returns a Locker, and a cleanup that closes it.
// It fails, rather than returning a Locker that would answer SERVICE_BUSY to
// everything, when the configuration is wrong or Redis cannot be reached now.
func New(cfg Config, metrics ports.LockMetrics) (*Locker, func(), error) {
	cfg = cfg.withDefaults()
	if metrics == nil {
		metrics = ports.NopLockMetrics{}
	}
	opt, err := cfg.clientOption()
	if err != nil {
		return nil, nil, err
	}
	// With more than one key per lock, the keys carry a hash tag that puts
	// each on its own cluster master (see keySpread): the prefix opens it.
	prefix := cfg.KeyPrefix
	if cfg.Majority > 1 {
		prefix += "{"
	}
	names := &nameTable{prefix: prefix + ":", states: make(map[string]*nameState)}
	lk, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: opt,
		ClientBuilder: func(o rueidis.ClientOption) (rueidis.Client, error) {
			// rueidislock's scripts read the key after every try, so the
			// connection is told when it changes; hear it as well.
			inner := o.OnInvalidations
			o.OnInvalidations = func(msgs []rueidis.RedisMessage) {
				if inner != nil {
					inner(msgs)
				}
				names.invalidated(msgs)
			}
			return rueidis.NewClient(o)
		},
		KeyPrefix:    prefix,
		KeyValidity:  cfg.TTL,
		KeyMajority:  cfg.Majority,
		TryNextAfter: tryNextAfter(cfg),
		// Redis >= 7.0.5: our own writes to a key do not echo back as
		// invalidations; local callers hand over through the name's turn.
		NoLoopTracking: true,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("redislock: connect to Redis at %s: %w", strings.Join(opt.InitAddress, ","), err)
	}
	l := &Locker{lk: lk, names: names, wait: cfg.Wait, metrics: metrics}
	if cfg.Majority > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), max(cfg.Wait, 2*time.Second))
		l.spread, err = readSpread(ctx, lk.Client(), cfg.Majority)
		cancel()
		if err != nil {
			lk.Close()
			return nil, nil, err
		}
	}
	return l, l.Close, nil
}

// WithLock runs fn while holding the lock name, shared with every Locker on
// the same Redis and key prefix.
//
// It tries at once; when the lock is held elsewhere it waits to be told the
// key changed (a client-side-caching invalidation) and tries again, for at
// most the configured Wait. It answers a *ports.BusyError without running fn
// when the wait runs out (LockTimeout) or Redis cannot be reached or does not
// answer within the wait (LockUnavailable); the caller's own cancellation
// returns the context's error. fn's context carries the caller's values,
// deadline and cancellation, and is also cancelled when the lock is lost; an
// error fn returns after such a loss becomes a BusyError with reason
// LockLost, any other error is returned unchanged. The lock is released when
// fn returns or panics.
func (l *Locker) WithLock(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.spread != nil {
		name = l.spread.rueidisName(name)
	}
	start := time.Now()
	lockCtx, release, err := l.acquire(ctx, name)
	if err != nil {
		if busy, ok := errors.AsType[*ports.BusyError](err); ok {
			l.metrics.LockFailed(busy.Reason)
		}
		return err
	}
	l.metrics.LockAcquired(time.Since(start))
	defer release()

	// lockCtx lives on context.WithoutCancel(ctx) and so lacks the caller's
	// deadline; fn gets the caller's context, cancelled also on a loss.
	fnCtx, cancelFn := context.WithCancelCause(ctx)
	defer cancelFn(nil)
	stop := context.AfterFunc(lockCtx, func() { cancelFn(errLockLost) })
	defer stop()

	err = fn(fnCtx)
	// The lock context ends before release only when rueidislock lost the
	// lock or the caller left (which is the caller's business, not a loss).
	if err != nil && lockCtx.Err() != nil && ctx.Err() == nil {
		l.metrics.LockFailed(ports.LockLost)
		return &ports.BusyError{Reason: ports.LockLost, Err: err}
	}
	return err
}

// attempt is what the acquiring goroutine hands back.
type attempt struct {
	ctx     context.Context
	release func() // deletes the key if still ours, then ends the local turn
	err     error
}

// acquire gets the lock or says why not, always within l.wait.
//
// The wait is a plain cancellable context ended by a timer, not a deadline:
// rueidislock shortens a lock's validity to the deadline of the context it
// is given, so a lock taken under a 500ms deadline would expire 500ms later
// while its holder still ran. For the same reason the caller's deadline is
// stripped (context.WithoutCancel) and only its cancellation is passed on.
//
// rueidislock itself runs in a goroutine because a silent Redis can hold it
// up well past the wait: after a failed or aborted acquire it deletes the
// key with a context bounded only by the lock's validity. acquire answers
// when the wait ends regardless; whatever the goroutine obtains after that
// it releases itself.
func (l *Locker) acquire(ctx context.Context, name string) (context.Context, func(), error) {
	if !l.track() {
		return nil, nil, &ports.BusyError{Reason: ports.LockUnavailable, Err: ErrClosed}
	}
	waitCtx, cancelWait := context.WithCancelCause(context.WithoutCancel(ctx))
	expiry := time.AfterFunc(l.wait, func() { cancelWait(errWaitExpired) })
	stopCaller := context.AfterFunc(ctx, func() { cancelWait(context.Cause(ctx)) })
	finish := func() {
		expiry.Stop()
		stopCaller()
		cancelWait(nil)
	}

	st := l.names.join(name)
	got := make(chan attempt)
	abandoned := make(chan struct{})
	go func() {
		defer l.bg.Done()
		a := l.obtain(waitCtx, name, st)
		select {
		case got <- a:
		case <-abandoned:
			if a.err == nil {
				a.release()
			}
		}
	}()

	select {
	case a := <-got:
		if a.err != nil {
			finish()
			return nil, nil, l.refusal(ctx, waitCtx, st, name, a.err)
		}
		if expiry.Stop() && ctx.Err() == nil {
			return a.ctx, func() {
				l.release(a.release)
				stopCaller()
				cancelWait(nil)
			}, nil
		}
		// The wait ran out, or the caller left, as the lock arrived: its
		// context is being cancelled, so it cannot guard fn. It is released
		// in the background: waiting for a slow release here would stretch
		// the wait to twice OTA_LOCK_WAIT.
		l.releaseLater(a.release)
		finish()
		return nil, nil, l.refusal(ctx, waitCtx, st, name, errWaitExpired)
	case <-waitCtx.Done():
		close(abandoned)
		finish()
		return nil, nil, l.refusal(ctx, waitCtx, st, name, context.Cause(waitCtx))
	}
}

// obtain waits for the name's local turn, then tries with rueidislock until
// it gets the lock, Redis fails, or ctx ends. Between tries it waits for the
// key's invalidation (or the connection's loss), not for a timer. A try that
// fails for any reason but "held by others" means Redis could not be asked:
// there is no point waiting for it. obtain leaves the name table when it
// returns without the lock, or when the lock it returns is released.
func (l *Locker) obtain(ctx context.Context, name string, st *nameState) attempt {
	select {
	case st.turn <- struct{}{}:
	case <-ctx.Done():
		l.names.leave(name, st)
		return attempt{err: ctx.Err()}
	}
	endTurn := func() {
		<-st.turn
		l.names.leave(name, st)
	}
	for {
		// Anything heard from here on may postdate the try below.
		select {
		case <-st.woken:
		default:
		}
		st.asking.Store(true)
		lockCtx, cancel, err := l.lk.TryWithContext(ctx, name)
		st.asking.Store(false)
		if err == nil {
			return attempt{ctx: lockCtx, release: func() { cancel(); endTurn() }}
		}
		if !errors.Is(err, rueidislock.ErrNotLocked) {
			endTurn()
			return attempt{err: err}
		}
		select {
		case <-st.woken:
		case <-ctx.Done():
			endTurn()
			return attempt{err: ctx.Err()}
		}
	}
}

// refusal classifies a failed acquisition. The caller leaving wins. An
// expired wait is a timeout, unless a try for this name was still waiting
// for Redis to answer; anything else is Redis failing.
func (l *Locker) refusal(ctx, waitCtx context.Context, st *nameState, name string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(context.Cause(waitCtx), errWaitExpired) {
		if st.asking.Load() {
			return &ports.BusyError{Reason: ports.LockUnavailable, Err: fmt.Errorf("redis did not answer within the %v wait", l.wait)}
		}
		return &ports.BusyError{Reason: ports.LockTimeout, Err: fmt.Errorf("%q held elsewhere for the whole %v wait", name, l.wait)}
	}
	if errors.Is(err, rueidislock.ErrLockerClosed) {
		err = ErrClosed
	}
	return &ports.BusyError{Reason: ports.LockUnavailable, Err: err}
}

// release deletes the lock if it is still ours (rueidislock checks the
// owner) and waits for that at most l.wait: a release never fails the
// request, and one Redis does not answer is bounded by the TTL anyway.
func (l *Locker) release(release func()) {
	if !l.track() {
		release() // closed: the client fails it at once
		return
	}
	done := make(chan struct{})
	go func() {
		defer l.bg.Done()
		release()
		close(done)
	}()
	t := time.NewTimer(l.wait)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
}

// releaseLater releases a lock nobody will use without waiting for Redis;
// Close still waits for it.
func (l *Locker) releaseLater(release func()) {
	if !l.track() {
		release()
		return
	}
	go func() {
		defer l.bg.Done()
		release()
	}()
}

// track registers background work unless the Locker is closed, so Close can
// wait for it instead of cutting a release short.
func (l *Locker) track() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.bg.Add(1)
	return true
}

// Ping asks Redis for a PONG over the lock client's connection, for
// readiness checks: a replica whose lock Redis is gone can only answer
// SERVICE_BUSY to checks. Pass a context with a deadline.
func (l *Locker) Ping(ctx context.Context) error {
	c := l.lk.Client()
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("redislock: ping: %w", err)
	}
	return nil
}

// Close stops the Locker. Releases in flight get up to the wait to finish,
// so a clean shutdown leaves no keys for others to wait out; then the
// client is closed and anything still waiting on Redis fails at once. Later
// WithLock calls answer a BusyError (LockUnavailable). Close is idempotent.
func (l *Locker) Close() {
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		drained := make(chan struct{})
		go func() {
			l.bg.Wait()
			close(drained)
		}()
		t := time.NewTimer(l.wait)
		select {
		case <-drained:
		case <-t.C:
		}
		t.Stop()
		l.lk.Close()
		<-drained
	})
}

// nameTable holds, for each lock name in use in this process, its local
// turn and wake-up signal. A name's entry goes when its last user leaves.
type nameTable struct {
	prefix string // KeyPrefix + ":"; keys are prefix + index + ":" + name

	mu     sync.Mutex
	states map[string]*nameState
}

// nameState is one name's local queue.
type nameState struct {
	turn   chan struct{} // holds a token while a caller works with rueidislock
	woken  chan struct{} // holds a token when the key may have changed
	asking atomic.Bool   // the turn's holder awaits Redis's answer to a try
	users  int           // callers holding or awaiting the turn; under mu
}

func (t *nameTable) join(name string) *nameState {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.states[name]
	if st == nil {
		st = &nameState{turn: make(chan struct{}, 1), woken: make(chan struct{}, 1)}
		t.states[name] = st
	}
	st.users++
	return st
}

func (t *nameTable) leave(name string, st *nameState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st.users--; st.users == 0 {
		delete(t.states, name)
	}
}

// invalidated wakes the waiter of every lock key in msgs; nil msgs (the
// connection was lost, or the database flushed) wake them all, so they try
// again and find out.
func (t *nameTable) invalidated(msgs []rueidis.RedisMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if msgs == nil {
		for _, st := range t.states {
			st.wake()
		}
		return
	}
	for _, m := range msgs {
		key, err := m.ToString()
		if err != nil {
			continue
		}
		rest, ok := strings.CutPrefix(key, t.prefix)
		if !ok {
			continue
		}
		if _, name, ok := strings.Cut(rest, ":"); ok {
			if st := t.states[name]; st != nil {
				st.wake()
			}
		}
	}
}

func (st *nameState) wake() {
	select {
	case st.woken <- struct{}{}:
	default:
	}
}
