package redislock_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/ai-device/ota/adapters/redislock"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

func TestContract(t *testing.T) {
	redisURL := testenv.RedisURL(t)
	raw := rawClient(t, redisURL)
	contract.RunLocker(t, func(t *testing.T, wait time.Duration) (ports.Locker, ports.Locker) {
		prefix := newPrefix()
		// Registered first, so it runs after both lockers have closed.
		t.Cleanup(func() { assertNoLockKeys(t, raw, prefix) })
		a := newLocker(t, redislock.Config{URL: redisURL, KeyPrefix: prefix, Wait: wait}, nil)
		b := newLocker(t, redislock.Config{URL: redisURL, KeyPrefix: prefix, Wait: wait}, nil)
		return a, b
	})
}

func TestKeyLayoutAndValidity(t *testing.T) {
	t.Parallel()
	redisURL := testenv.RedisURL(t)
	raw := rawClient(t, redisURL)
	ctx := context.Background()

	t.Run("DefaultPrefixIsTheDocumentedOne", func(t *testing.T) {
		t.Parallel()
		l := newLocker(t, redislock.Config{URL: redisURL}, nil)
		name := "device-" + uuid.NewString() + ":" + uuid.NewString()
		key := "ota:lock:0:" + name
		err := l.WithLock(ctx, name, func(context.Context) error {
			if v, err := raw.Do(ctx, raw.B().Get().Key(key).Build()).ToString(); err != nil || v == "" {
				t.Errorf("GET %s while held = %q, %v; want the holder's token", key, v, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := raw.Do(ctx, raw.B().Exists().Key(key).Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("EXISTS %s after release = %d, %v; want 0", key, n, err)
		}
	})

	t.Run("ValidityIsTheTTLNotTheWait", func(t *testing.T) {
		t.Parallel()
		const ttl, wait = 3 * time.Second, 100 * time.Millisecond
		prefix := newPrefix()
		t.Cleanup(func() { assertNoLockKeys(t, raw, prefix) })
		l := newLocker(t, redislock.Config{URL: redisURL, KeyPrefix: prefix, TTL: ttl, Wait: wait}, nil)
		name := uuid.NewString()
		// A caller deadline shorter than the TTL must not shorten it either.
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := l.WithLock(callCtx, name, func(fnCtx context.Context) error {
			pttl, err := raw.Do(ctx, raw.B().Pttl().Key(prefix+":0:"+name).Build()).AsInt64()
			if err != nil || time.Duration(pttl)*time.Millisecond < ttl/2 || time.Duration(pttl)*time.Millisecond > ttl {
				t.Errorf("PTTL while held = %dms, %v; want about the %v TTL (not the %v wait)", pttl, err, ttl, wait)
			}
			if dl, ok := fnCtx.Deadline(); !ok || time.Until(dl) < 5*time.Second {
				t.Errorf("fn's context deadline = %v, %v; want the caller's", dl, ok)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("LockIsExtendedWhileHeld", func(t *testing.T) {
		t.Parallel()
		const ttl, wait = time.Second, 100 * time.Millisecond
		prefix := newPrefix()
		t.Cleanup(func() { assertNoLockKeys(t, raw, prefix) })
		a := newLocker(t, redislock.Config{URL: redisURL, KeyPrefix: prefix, TTL: ttl, Wait: wait}, nil)
		b := newLocker(t, redislock.Config{URL: redisURL, KeyPrefix: prefix, TTL: ttl, Wait: wait}, nil)
		name := uuid.NewString()
		err := a.WithLock(ctx, name, func(fnCtx context.Context) error {
			for end := time.Now().Add(5 * ttl / 2); time.Now().Before(end); {
				err := b.WithLock(ctx, name, func(context.Context) error {
					t.Errorf("another replica got the lock %v into a hold (TTL %v)", time.Until(end), ttl)
					return nil
				})
				if !errors.Is(err, domain.ErrServiceBusy) {
					t.Errorf("other replica: err = %v, want SERVICE_BUSY", err)
				}
			}
			return fnCtx.Err()
		})
		if err != nil {
			t.Fatalf("holding for 2.5 TTLs: %v", err)
		}
	})
}

func TestLockLost(t *testing.T) {
	t.Parallel()
	redisURL := testenv.RedisURL(t)
	raw := rawClient(t, redisURL)
	ctx := context.Background()

	for _, tc := range []struct {
		name   string
		tamper func(key string) rueidis.Completed
		after  string // the key's value after WithLock returns; "" = absent
	}{
		{"KeyDeleted", func(key string) rueidis.Completed { return raw.B().Del().Key(key).Build() }, ""},
		// Release must not delete a lock that is no longer ours.
		{"KeyTakenOver", func(key string) rueidis.Completed {
			return raw.B().Set().Key(key).Value("intruder").PxMilliseconds(60_000).Build()
		}, "intruder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := newPrefix()
			name := uuid.NewString()
			key := prefix + ":0:" + name
			t.Cleanup(func() {
				raw.Do(ctx, raw.B().Del().Key(key).Build())
				assertNoLockKeys(t, raw, prefix)
			})
			m := &metricsRecorder{}
			l := newLocker(t, redislock.Config{URL: redisURL, KeyPrefix: prefix}, m)

			var fnErr error
			err := l.WithLock(ctx, name, func(fnCtx context.Context) error {
				if err := raw.Do(ctx, tc.tamper(key)).Error(); err != nil {
					t.Fatalf("tampering with %s: %v", key, err)
				}
				select {
				case <-fnCtx.Done():
					fnErr = fnCtx.Err()
				case <-time.After(10 * time.Second):
					fnErr = errors.New("fn's context still live 10s after the lock was lost")
					t.Error(fnErr)
				}
				return fnErr
			})
			assertBusy(t, err, ports.LockLost)
			if !errors.Is(err, fnErr) {
				t.Errorf("err = %v, want it to wrap fn's error %v", err, fnErr)
			}
			got, gerr := raw.Do(ctx, raw.B().Get().Key(key).Build()).ToString()
			if rueidis.IsRedisNil(gerr) {
				got, gerr = "", nil
			}
			if gerr != nil || got != tc.after {
				t.Errorf("after release %s = %q, %v; want %q", key, got, gerr, tc.after)
			}
			if f := m.failures(); !slices.Equal(f, []string{ports.LockLost}) {
				t.Errorf("LockFailed reasons = %v, want [lost]", f)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	redisURL := testenv.RedisURL(t)
	addr := redisAddr(t, redisURL)

	t.Run("Rejected", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			label string
			cfg   redislock.Config
			want  string
		}{
			{"nothing", redislock.Config{}, "no Redis URL or address"},
			{"both", redislock.Config{URL: redisURL, Addresses: []string{addr}}, "not both"},
			{"scheme", redislock.Config{URL: "http://" + addr}, "invalid URL scheme"},
			{"not host:port", redislock.Config{Addresses: []string{"localhost"}}, "not host:port"},
			{"bad list entry", redislock.Config{URL: "redis://" + addr + ",nohost/0"}, "not host:port"},
			{"no cache", redislock.Config{URL: "redis://" + addr + "/0?client_cache=0"}, "client_cache=0"},
			{"password kept out", redislock.Config{URL: "redis://u:s3cret@" + addr + ":x/0"}, "invalid Redis URL"},
			{"majority on one Redis", redislock.Config{URL: redisURL, Majority: 2}, "this Redis is not a cluster"},
		} {
			l, cleanup, err := redislock.New(tc.cfg, nil)
			if err == nil {
				cleanup()
				t.Errorf("%s: New accepted %+v", tc.label, tc.cfg)
				continue
			}
			if l != nil || cleanup != nil {
				t.Errorf("%s: New returned a locker or cleanup with its error", tc.label)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: err = %v, want it to mention %q", tc.label, err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: err leaks the password: %v", tc.label, err)
			}
		}
	})

	t.Run("AddressesForm", func(t *testing.T) {
		t.Parallel()
		l := newLocker(t, redislock.Config{Addresses: []string{addr}, KeyPrefix: newPrefix()}, nil)
		if err := l.WithLock(context.Background(), uuid.NewString(), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("HostListMeansCluster", func(t *testing.T) {
		t.Parallel()
		// Both hosts reach the cluster client (a standalone Redis says so),
		// rather than the list being taken as one odd host name.
		_, _, err := redislock.New(redislock.Config{URL: "redis://" + addr + "," + addr + "/0"}, nil)
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "cluster") {
			t.Fatalf("err = %v, want the standalone server refusing cluster mode", err)
		}
	})

	t.Run("UnreachableFailsFast", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := ln.Addr().String()
		ln.Close()
		start := time.Now()
		_, _, err = redislock.New(redislock.Config{Addresses: []string{closed}}, nil)
		if err == nil || !strings.Contains(err.Error(), closed) {
			t.Fatalf("err = %v, want a connection error naming %s", err, closed)
		}
		if elapsed := time.Since(start); elapsed > 2*time.Second {
			t.Errorf("New took %v to report a closed port", elapsed)
		}
	})
}

func TestPingAndClose(t *testing.T) {
	t.Parallel()
	redisURL := testenv.RedisURL(t)
	l, cleanup, err := redislock.New(redislock.Config{URL: redisURL, KeyPrefix: newPrefix()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	cleanup()
	l.Close() // idempotent
	if err := l.Ping(ctx); err == nil {
		t.Errorf("Ping after Close succeeded")
	}
	err = l.WithLock(ctx, "n", func(context.Context) error {
		t.Errorf("fn ran on a closed locker")
		return nil
	})
	assertBusy(t, err, ports.LockUnavailable)
	if !errors.Is(err, redislock.ErrClosed) {
		t.Errorf("err = %v, want it to wrap ErrClosed", err)
	}
}

// TestRedisOutage runs the lockers through a TCP proxy to the real Redis and
// breaks the proxy: closed (connections refused), silent (connections kept,
// nothing forwarded), and closed under a holder.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	redisURL := testenv.RedisURL(t)
	raw := rawClient(t, redisURL)
	const wait, ttl = 300 * time.Millisecond, time.Second
	const slack = time.Second // generous: -race on two shared cores

	setup := func(t *testing.T) (*proxy, *redislock.Locker, *metricsRecorder) {
		p := startProxy(t, redisAddr(t, redisURL))
		prefix := newPrefix()
		// Keys a lost release left behind expire within the TTL.
		t.Cleanup(func() { eventuallyNoLockKeys(t, raw, prefix, ttl+slack) })
		m := &metricsRecorder{}
		l := newLocker(t, redislock.Config{URL: viaProxy(t, redisURL, p.addr), KeyPrefix: prefix, TTL: ttl, Wait: wait}, m)
		if err := l.WithLock(context.Background(), "warm-up", func(context.Context) error { return nil }); err != nil {
			t.Fatalf("through the proxy before any outage: %v", err)
		}
		return p, l, m
	}
	// refused checks that WithLock answers SERVICE_BUSY (unavailable) within
	// the wait plus slack, without running fn.
	refused := func(t *testing.T, l *redislock.Locker) {
		t.Helper()
		start := time.Now()
		err := l.WithLock(context.Background(), uuid.NewString(), func(context.Context) error {
			t.Errorf("fn ran without Redis")
			return nil
		})
		elapsed := time.Since(start)
		t.Logf("answered %v after %v", err, elapsed)
		assertBusy(t, err, ports.LockUnavailable)
		if elapsed > wait+slack {
			t.Errorf("answered after %v, want within the %v wait (+%v slack)", elapsed, wait, slack)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := l.Ping(ctx); err == nil {
			t.Errorf("Ping succeeded during the outage")
		}
	}
	// recovers checks the locker works again once Redis is back, without
	// being recreated. Reconnecting takes a few attempts; each is bounded.
	recovers := func(t *testing.T, l *redislock.Locker) {
		t.Helper()
		deadline := time.Now().Add(ttl + 10*time.Second)
		for {
			err := l.WithLock(context.Background(), uuid.NewString(), func(context.Context) error { return nil })
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("still failing after Redis came back: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		p, l, m := setup(t)
		p.down()
		refused(t, l)
		if f := m.failures(); len(f) == 0 || f[0] != ports.LockUnavailable {
			t.Errorf("LockFailed reasons = %v, want [unavailable ...]", f)
		}
		p.up(t)
		recovers(t, l)
	})

	t.Run("Silent", func(t *testing.T) {
		t.Parallel()
		p, l, _ := setup(t)
		p.stall()
		refused(t, l)
		p.resume()
		recovers(t, l)
	})

	t.Run("GoneUnderHolder", func(t *testing.T) {
		t.Parallel()
		p, l, _ := setup(t)
		var lostAfter time.Duration
		err := l.WithLock(context.Background(), uuid.NewString(), func(fnCtx context.Context) error {
			downAt := time.Now()
			p.down()
			select {
			case <-fnCtx.Done():
				lostAfter = time.Since(downAt)
				return fnCtx.Err()
			case <-time.After(ttl + 10*time.Second):
				return errors.New("fn's context outlived the lock's Redis")
			}
		})
		assertBusy(t, err, ports.LockLost)
		// The holder must learn before its key could expire and someone
		// else take the lock (not asserted tightly: -race, shared cores).
		if lostAfter > ttl+slack {
			t.Errorf("holder learnt of the loss %v after Redis went away (TTL %v)", lostAfter, ttl)
		}
		t.Logf("holder's context cancelled %v after Redis went away", lostAfter)
		p.up(t)
		recovers(t, l)
	})

	t.Run("SilentUnderHolder", func(t *testing.T) {
		t.Parallel()
		p, l, _ := setup(t)
		var lostAfter time.Duration
		err := l.WithLock(context.Background(), uuid.NewString(), func(fnCtx context.Context) error {
			stallAt := time.Now()
			p.stall()
			select {
			case <-fnCtx.Done():
				lostAfter = time.Since(stallAt)
				return fnCtx.Err()
			case <-time.After(ttl + 10*time.Second):
				return errors.New("fn's context outlived the lock's Redis")
			}
		})
		assertBusy(t, err, ports.LockLost)
		// The key was fresh when Redis went silent: the holder must learn
		// before it could expire and another replica take the lock.
		if lostAfter >= ttl {
			t.Errorf("holder learnt of the loss %v after Redis went silent, after its key's %v validity", lostAfter, ttl)
		}
		t.Logf("holder's context cancelled %v after Redis went silent", lostAfter)
		p.resume()
		recovers(t, l)
	})
}

// --- helpers ---

func newPrefix() string { return "ota:test:" + uuid.NewString() }

func newLocker(t *testing.T, cfg redislock.Config, m ports.LockMetrics) *redislock.Locker {
	t.Helper()
	l, cleanup, err := redislock.New(cfg, m)
	if err != nil {
		t.Fatalf("redislock.New: %v", err)
	}
	t.Cleanup(cleanup)
	return l
}

// rawClient is a plain client for looking at and tampering with keys.
func rawClient(t testing.TB, redisURL string) rueidis.Client {
	t.Helper()
	opt, err := rueidis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("connecting to %s: %v", redisAddr(t, redisURL), err)
	}
	t.Cleanup(c.Close)
	return c
}

func redisAddr(t testing.TB, redisURL string) string {
	t.Helper()
	opt, err := rueidis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	return opt.InitAddress[0]
}

// viaProxy is redisURL (credentials, database) with the proxy as the host.
func viaProxy(t *testing.T, redisURL, proxyAddr string) string {
	t.Helper()
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxyAddr
	return u.String()
}

func lockKeys(t testing.TB, raw rueidis.Client, prefix string) []string {
	t.Helper()
	var keys []string
	ctx := context.Background()
	for cursor := uint64(0); ; {
		e, err := raw.Do(ctx, raw.B().Scan().Cursor(cursor).Match(prefix+":*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatalf("SCAN %s:*: %v", prefix, err)
		}
		keys = append(keys, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			return keys
		}
	}
}

func assertNoLockKeys(t testing.TB, raw rueidis.Client, prefix string) {
	t.Helper()
	if keys := lockKeys(t, raw, prefix); len(keys) != 0 {
		t.Errorf("lock keys left behind: %v", keys)
	}
}

func eventuallyNoLockKeys(t testing.TB, raw rueidis.Client, prefix string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		keys := lockKeys(t, raw, prefix)
		if len(keys) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("lock keys still there %v after the test: %v", within, keys)
			return
		}
	}
}

func assertBusy(t *testing.T, err error, reason string) {
	t.Helper()
	if !errors.Is(err, domain.ErrServiceBusy) {
		t.Errorf("err = %v, want domain.ErrServiceBusy", err)
		return
	}
	if busy, ok := errors.AsType[*ports.BusyError](err); !ok || busy.Reason != reason {
		t.Errorf("err = %v, want a *ports.BusyError with reason %q", err, reason)
	}
}

type metricsRecorder struct {
	mu       sync.Mutex
	acquired int
	failed   []string
}

func (m *metricsRecorder) LockAcquired(time.Duration) {
	m.mu.Lock()
	m.acquired++
	m.mu.Unlock()
}

func (m *metricsRecorder) LockFailed(reason string) {
	m.mu.Lock()
	m.failed = append(m.failed, reason)
	m.mu.Unlock()
}

func (m *metricsRecorder) failures() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.failed)
}

// proxy is a TCP proxy to Redis that a test can take down (refusing
// connections), bring back on the same address, or make silent (connections
// stay open, bytes are held back and delivered, in order, on resume).
type proxy struct {
	target, addr string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	gate  chan struct{} // closed while forwarding
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}, gate: make(chan struct{})}
	close(p.gate)
	p.serve(ln)
	t.Cleanup(func() {
		p.down()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.forward(c) })
		}
	})
}

func (p *proxy) forward(client net.Conn) {
	upstream, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // went down meanwhile
		p.mu.Unlock()
		client.Close()
		upstream.Close()
		return
	}
	p.conns[client], p.conns[upstream] = struct{}{}, struct{}{}
	p.mu.Unlock()
	closeBoth := func() {
		client.Close()
		upstream.Close()
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.copy(upstream, client); closeBoth() })
	wg.Go(func() { p.copy(client, upstream); closeBoth() })
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, upstream)
	p.mu.Unlock()
}

func (p *proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			<-gate // held back while silent; down() reopens the gate
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// down closes the listener and every connection: Redis refuses and resets.
func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.resumeLocked()
}

// up listens again on the same address.
func (p *proxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy back on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// stall keeps connections (and accepts new ones) but forwards nothing.
func (p *proxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // already silent
	}
}

// resume delivers what was held back and forwards again.
func (p *proxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resumeLocked()
}

func (p *proxy) resumeLocked() {
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}
