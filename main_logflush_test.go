package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is stderr for a serve running in another goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serve's log is buffered (bootstrap.NewBufferedLogger); when serve
// returns after a stop signal, every line is out: the access line of the
// last request, a 4xx, and the final "stopped".
func TestServeWritesEveryLogLineBeforeItReturns(t *testing.T) {
	env := map[string]string{
		"OTA_STORE": "memory", "OTA_ADMIN_TOKEN": "0123456789abcdef", "OTA_HTTP_ADDR": "127.0.0.1:0",
	}
	var stdout bytes.Buffer
	stderr := &lockedBuffer{}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve"}, func(k string) string { return env[k] }, &stdout, stderr) }()

	addrRE := regexp.MustCompile(`"msg":"serving","addr":"([^"]+)"`)
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == ""; {
		if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no serving line within 10s: %q", stderr.String())
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	resp, err := http.Get("http://" + addr + "/no/such/route")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d", resp.StatusCode)
	}
	stop()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not return after the stop")
	}
	// Read at once: a line still in the buffer would only appear at the
	// next timer flush, which this check does not wait for.
	out := stderr.String()
	if !strings.Contains(out, `"status":404`) {
		t.Errorf("the 404's access line is missing:\n%s", out)
	}
	if !strings.HasSuffix(strings.TrimSpace(out), `"msg":"stopped"}`) {
		t.Errorf("the last line is not the final \"stopped\":\n%s", out)
	}
}
