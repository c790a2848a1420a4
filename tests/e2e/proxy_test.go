package e2e

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tcpProxy forwards connections to a target (the real Redis) and can be cut
// and restored, to play a Redis outage for one otad without touching the
// Redis other tests share. While cut, nothing listens on its address: a
// dial is refused, as it would be for a Redis that went away.
type tcpProxy struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup // accept loops and pipes
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.pipe(c) })
		}
	})
}

func (p *tcpProxy) pipe(down net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		down.Close()
		return
	}
	if !p.track(down, up) {
		down.Close()
		up.Close()
		return
	}
	var wg sync.WaitGroup
	copyThenClose := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
	}
	wg.Go(func() { copyThenClose(up, down) })
	wg.Go(func() { copyThenClose(down, up) })
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, down)
	delete(p.conns, up)
	p.mu.Unlock()
}

// track registers a connection pair unless the proxy was cut meanwhile.
func (p *tcpProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// cut stops listening and closes every forwarded connection, and returns
// once nothing is forwarded any more. It is idempotent.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// restore listens on the same address again.
func (p *tcpProxy) restore(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serve(ln)
			return
		}
		if time.Now().After(deadline) || !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("proxy: listening again on %s: %v", p.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
