package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/ai-device/ota/ports"
)

// Defaults New applies to zero Config fields. They match OTA_LOCK_TTL and
// OTA_LOCK_WAIT in PRODUCT.md, and the key layout the product documents
// ("ota:lock:0:{device_id}:{firmware_id}").
const (
	DefaultKeyPrefix       = "ota:lock"
	DefaultTTL             = 5 * time.Second
	DefaultWait            = 500 * time.Millisecond
	DefaultMajority  int32 = 1
)

// Config says where Redis is and how the locks behave. Exactly one of URL and
// Addresses must be set; zero durations and counts take the defaults above.
type Config struct {
	// Addresses lists Redis nodes as host:port. One address is a single Redis
	// (or a cluster node: rueidis asks the node and switches to cluster mode
	// by itself); several must be nodes of one cluster.
	Addresses []string
	// URL is redis://[user:pass@]host:port[/db] (rediss:// for TLS). The host
	// part may be a comma-separated host:port list, the form cluster URLs are
	// usually written in, on top of the ?addr= form rueidis.ParseURL knows.
	URL string
	// KeyPrefix namespaces the lock keys; rueidislock stores a lock named n
	// as KeyPrefix + ":0:" + n. Tests give each run its own prefix.
	KeyPrefix string
	// TTL is the lock's validity. rueidislock extends it every TTL/2 while
	// the holder runs, so it only bounds how long a crashed holder blocks
	// others, not how long a critical section may take.
	TTL time.Duration
	// Wait bounds how long WithLock waits for a lock held elsewhere before it
	// answers SERVICE_BUSY. It also bounds an answer when Redis is down or
	// silent, and how long a release may hold up the caller.
	Wait time.Duration
	// Majority is how many of 2*Majority-1 keys must be acquired. Against
	// one Redis (or one cluster) keep 1: more keys on the same server add
	// round trips, not safety.
	Majority int32
}

func (c Config) withDefaults() Config {
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.Wait <= 0 {
		c.Wait = DefaultWait
	}
	if c.Majority <= 0 {
		c.Majority = DefaultMajority
	}
	return c
}

// clientOption turns the Config into rueidis options tuned so that a dead or
// silent Redis is noticed quickly and never retried into a late answer.
func (c Config) clientOption() (rueidis.ClientOption, error) {
	var opt rueidis.ClientOption
	switch {
	case c.URL != "" && len(c.Addresses) > 0:
		return opt, errors.New("redislock: set either URL or Addresses, not both")
	case c.URL != "":
		var err error
		if opt, err = parseURL(c.URL); err != nil {
			return opt, err
		}
	case len(c.Addresses) > 0:
		for _, a := range c.Addresses {
			a = strings.TrimSpace(a)
			if _, _, err := net.SplitHostPort(a); err != nil {
				return opt, fmt.Errorf("redislock: address %q is not host:port: %w", a, err)
			}
			opt.InitAddress = append(opt.InitAddress, a)
		}
	default:
		return opt, errors.New("redislock: no Redis URL or address configured")
	}
	if opt.DisableCache {
		// Without client-side caching rueidislock cannot be told when a key
		// goes away and falls back to polling every TryNextAfter.
		return opt, errors.New("redislock: client_cache=0 is not supported: waiting for a lock relies on client-side caching invalidations")
	}
	// Retries would re-send a failed acquire or release until its deadline
	// (the whole TTL for a release), turning "Redis is down" into an answer
	// seconds late. A lock call fails fast instead; the caller retries.
	opt.DisableRetry = true
	// How fast a silent Redis is noticed. An idle connection is PINGed every
	// KeepAlive and dropped when a PING goes ConnWriteTimeout unanswered
	// (rueidis's default is 10s); rueidislock extends a lock with a context
	// that runs to the new validity, so without this a holder would not
	// learn that Redis went silent before its key had expired. On the drop,
	// rueidislock tries to extend or delete once more, which reconnects,
	// bounded by the dial timeout, and then cancels the holder's context.
	// With a TTL of 5s: a PING after at most 1s of silence, 500ms for its
	// answer, 500ms to dial, so a holder hears of a silent Redis within 2s,
	// while its key, extended every 2.5s, was valid for at least 2.5s more.
	// The price: a Redis that stalls for more than about TTL/10 (a big fork)
	// loses the connection and the locks held on it (SERVICE_BUSY, LockLost).
	probe := clamp(c.TTL/10, 100*time.Millisecond, time.Second)
	if opt.Dialer.KeepAlive == 0 {
		opt.Dialer.KeepAlive = probe
	}
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = probe
	}
	// Connecting, HELLO included, is bounded the same way: New fails fast
	// on a silent host, and a reconnect under a held lock ends in time.
	if opt.Dialer.Timeout == 0 {
		opt.Dialer.Timeout = clamp(min(c.Wait, c.TTL/10), 100*time.Millisecond, time.Second)
	}
	if opt.ClientName == "" {
		opt.ClientName = "ota-lock"
	}
	return opt, nil
}

// parseURL accepts what rueidis.ParseURL does plus a comma-separated host
// list, and keeps the password out of its errors.
func parseURL(raw string) (rueidis.ClientOption, error) {
	first, extra := splitHostList(raw)
	opt, err := rueidis.ParseURL(first)
	if err != nil {
		// *url.Error quotes the whole URL, password included.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return opt, fmt.Errorf("redislock: invalid Redis URL: %w", err)
	}
	for _, h := range extra {
		h = strings.TrimSpace(h)
		if _, _, err := net.SplitHostPort(h); err != nil {
			return opt, fmt.Errorf("redislock: invalid Redis URL: host %q is not host:port", h)
		}
		opt.InitAddress = append(opt.InitAddress, h)
	}
	return opt, nil
}

// splitHostList rewrites "redis://u:p@h1:1,h2:2/0" to "redis://u:p@h1:1/0"
// and returns the other hosts, ["h2:2"].
func splitHostList(raw string) (string, []string) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw, nil
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	at := strings.LastIndexByte(authority, '@')
	userinfo, hosts := authority[:at+1], authority[at+1:]
	if !strings.Contains(hosts, ",") {
		return raw, nil
	}
	list := strings.Split(hosts, ",")
	return scheme + "://" + userinfo + list[0] + tail, list[1:]
}

// tryNextAfter is rueidislock's timeout for acquiring one key. With a single
// key there is no next key to try, so it is only the acquire command's
// timeout, and its 20ms default would call a briefly slow Redis (a fork, a GC
// pause here) unavailable. Give the keys the wait between them instead.
func tryNextAfter(c Config) time.Duration {
	return max(c.Wait/time.Duration(2*c.Majority-1), 20*time.Millisecond)
}

func clamp(d, lo, hi time.Duration) time.Duration {
	return min(max(d, lo), hi)
}

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
	names := &nameTable{prefix: cfg.KeyPrefix + ":", states: make(map[string]*nameState)}
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
		KeyPrefix:    cfg.KeyPrefix,
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
		// context is being cancelled, so it cannot guard fn.
		l.release(a.release)
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
