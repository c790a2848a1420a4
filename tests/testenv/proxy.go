package testenv

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a target (a Postgres or Redis server)
// and plays its failures for the one client pointed at it, without touching
// the server other tests share:
//
//   - Cut: every forwarded connection is reset (RST on both sides, so the
//     server aborts its sessions' open transactions) and the listener
//     closes, so new connections are refused - what clients see while a
//     server restarts;
//   - Restore: listen on the same address again;
//   - SetLatency: delay every chunk of bytes, in each direction, by a
//     one-way latency (a request and its answer take twice that longer).
//
// It is safe for concurrent use.
type Proxy struct {
	target string
	addr   string

	latency atomic.Int64 // one-way, nanoseconds

	mu     sync.Mutex
	ln     net.Listener
	pairs  map[*proxyPair]struct{}
	closed bool
	wg     sync.WaitGroup // accept loops and pairs

	accepted atomic.Int64
}

// proxyPair is one client connection and its connection to the target.
type proxyPair struct {
	down, up net.Conn
	done     chan struct{} // closed when the pair is torn down
	once     sync.Once
}

func (pp *proxyPair) close(reset bool) {
	pp.once.Do(func() {
		if reset {
			setLinger0(pp.down)
			setLinger0(pp.up)
		}
		pp.down.Close()
		pp.up.Close()
		close(pp.done)
	})
}

func setLinger0(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}

// StartProxy listens on a free loopback port and forwards to target
// (host:port). It is closed when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// NewProxy is StartProxy for callers without a testing.TB; Close it.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), pairs: map[*proxyPair]struct{}{}}
	p.serve(ln)
	return p, nil
}

// Addr is the proxy's host:port, to put in the client's URL instead of the
// target's.
func (p *Proxy) Addr() string { return p.addr }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Accepted counts the connections accepted since the proxy started.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Conns is the number of connections being forwarded now.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

// SetLatency delays every chunk read from now on, in each direction, by d
// (0 removes the delay). Bytes keep their order.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// Latency is the one-way delay in force.
func (p *Proxy) Latency() time.Duration { return time.Duration(p.latency.Load()) }

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			p.wg.Go(func() { p.handle(c) })
		}
	})
}

func (p *Proxy) handle(down net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		setLinger0(down)
		down.Close()
		return
	}
	pp := &proxyPair{down: down, up: up, done: make(chan struct{})}
	if !p.track(pp) {
		pp.close(true)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.forward(pp, up, down) })
	wg.Go(func() { p.forward(pp, down, up) })
	wg.Wait()
	pp.close(false)
	p.mu.Lock()
	delete(p.pairs, pp)
	p.mu.Unlock()
}

// track registers a pair unless the proxy was cut or closed meanwhile.
func (p *Proxy) track(pp *proxyPair) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil || p.closed {
		return false
	}
	p.pairs[pp] = struct{}{}
	return true
}

// chunk is bytes read from one side, due on the other at due.
type chunk struct {
	b   []byte
	due time.Time
}

// forward copies src to dst, each chunk delayed by the latency in force
// when it was read. When either side ends, the pair is torn down.
func (p *Proxy) forward(pp *proxyPair, dst, src net.Conn) {
	queue := make(chan chunk, 64)
	go func() {
		defer close(queue)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				c := chunk{b: buf[:n], due: time.Now().Add(p.Latency())}
				select {
				case queue <- c:
				case <-pp.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		pp.close(false)
		for range queue { // let the reader end
		}
	}()
	for c := range queue {
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-pp.done:
				t.Stop()
				return
			}
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}

// Cut resets every forwarded connection and stops listening, and returns
// once nothing is forwarded any more: clients see their connections reset
// and new ones refused. It is idempotent; Restore ends it.
func (p *Proxy) Cut() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	pairs := make([]*proxyPair, 0, len(p.pairs))
	for pp := range p.pairs {
		pairs = append(pairs, pp)
	}
	p.mu.Unlock()
	for _, pp := range pairs {
		pp.close(true)
	}
	p.wg.Wait()
}

// Restore listens on the same address again (after Cut), retrying for up
// to 2s while the port is still in use.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	up := p.ln != nil
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return errors.New("proxy: closed")
	}
	if up {
		return nil
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serve(ln)
			return nil
		}
		if time.Now().After(deadline) || !errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("proxy: listening again on %s: %w", p.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close cuts the proxy for good.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Cut()
}
