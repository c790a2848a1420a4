package bootstrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/bootstrap"
)

// syncBuffer is an io.Writer tests can read while others write, counting
// the writes it gets (each would be a write(2) on a file).
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// Info lines wait in the buffer; a warning writes them and itself at once;
// Close writes the rest, and lines logged after Close are not lost.
func TestBufferedLoggerHoldsInfoFlushesWarningsAndFlushesAtClose(t *testing.T) {
	out := &syncBuffer{}
	logger, closeLog := bootstrap.NewBufferedLogger(out, slog.LevelInfo)
	for i := range 50 {
		logger.Info("http request", "status", 200, "i", i)
	}
	if got := out.String(); got != "" {
		t.Fatalf("info lines were written at once (unbuffered): %d bytes", len(got))
	}
	logger.Warn("http request", "status", 503)
	if got := strings.Count(out.String(), "\n"); got != 51 {
		t.Fatalf("after a warning: %d lines written, want the 50 before it and itself", got)
	}
	if w := out.Writes(); w > 2 {
		t.Errorf("51 lines took %d writes, want them batched", w)
	}
	logger.Info("http request", "status", 404, "error_code", "NOT_FOUND")
	logger.Info("stopped")
	if err := closeLog(); err != nil {
		t.Fatal(err)
	}
	logger.Info("after close")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 54 || !strings.Contains(lines[51], "NOT_FOUND") || !strings.Contains(lines[52], "stopped") ||
		!strings.Contains(lines[53], "after close") {
		t.Fatalf("got %d lines, want 54 in order ending with the 404, stopped, after close:\n%s", len(lines), strings.Join(lines[max(0, len(lines)-4):], "\n"))
	}
	for i, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("line %d is not one JSON object: %q", i, l)
		}
	}
	if err := closeLog(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// A quiet replica still writes its lines within the flush interval.
func TestLogBufferFlushesOnItsOwnWithinTheInterval(t *testing.T) {
	out := &syncBuffer{}
	b := bootstrap.NewLogBuffer(out, 1<<10, 20*time.Millisecond)
	defer b.Close()
	start := time.Now()
	if _, err := b.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	for out.String() != "one\n" {
		if time.Since(start) > 2*time.Second {
			t.Fatalf("a buffered line was not written within 2s (interval 20ms): %q", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// And again after the buffer emptied: the flush is re-armed.
	if _, err := b.Write([]byte("two\n")); err != nil {
		t.Fatal(err)
	}
	for out.String() != "one\ntwo\n" {
		if time.Since(start) > 4*time.Second {
			t.Fatalf("the second line was not written: %q", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A full buffer is written before a line that would not fit, so a line
// never straddles two writes; nothing is lost under concurrent writers.
func TestLogBufferKeepsLinesWholeUnderConcurrentWriters(t *testing.T) {
	out := &lineChecker{}
	b := bootstrap.NewLogBuffer(out, 256, time.Hour)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				line := fmt.Sprintf("{\"w\":%d,\"i\":%d,\"pad\":%q}\n", w, i, strings.Repeat("x", (w*i)%40))
				if _, err := b.Write([]byte(line)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if out.lines != 1600 || out.torn != 0 {
		t.Fatalf("%d lines written (want 1600), %d writes ending mid-line", out.lines, out.torn)
	}
}

// lineChecker counts lines and writes that end inside a line.
type lineChecker struct {
	lines, torn int
}

func (c *lineChecker) Write(p []byte) (int, error) {
	c.lines += bytes.Count(p, []byte("\n"))
	if len(p) > 0 && p[len(p)-1] != '\n' {
		c.torn++
	}
	return len(p), nil
}

// failingWriter fails its first n writes.
type failingWriter struct {
	n   int
	out bytes.Buffer
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.n > 0 {
		f.n--
		return 0, errors.New("disk full")
	}
	return f.out.Write(p)
}

// One failed write does not silence the log for good (bufio's error is
// sticky; the buffer starts afresh).
func TestLogBufferRecoversFromAFailedWrite(t *testing.T) {
	out := &failingWriter{n: 1}
	b := bootstrap.NewLogBuffer(out, 1<<10, time.Hour)
	_, _ = b.Write([]byte("lost\n"))
	if err := b.Flush(); err == nil {
		t.Fatal("the failed write was not reported")
	}
	_, _ = b.Write([]byte("kept\n"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if out.out.String() != "kept\n" {
		t.Fatalf("after a failed write: %q", out.out.String())
	}
}

// Every request's access line is written, errors included: nothing is
// sampled away. 4xx come from the edge itself (no services needed), and
// they are all there once the logger is closed at shutdown.
func TestAccessLogThroughTheBufferLosesNoLine(t *testing.T) {
	out := &syncBuffer{}
	logger, closeLog := bootstrap.NewBufferedLogger(out, slog.LevelInfo)
	srv := rest.NewServer(rest.Config{}, nil, nil, nil, nil, nil, logger)
	const n = 300
	for i := range n {
		var req *http.Request
		switch i % 3 {
		case 0:
			req = httptest.NewRequest(http.MethodGet, "/healthz", nil)
		case 1:
			req = httptest.NewRequest(http.MethodGet, "/no/such/route", nil)
		default:
			req = httptest.NewRequest(http.MethodPost, "/api/v1/devices/d1/ota/check", strings.NewReader(`{}`))
		}
		srv.ServeHTTP(httptest.NewRecorder(), req)
	}
	if err := closeLog(); err != nil {
		t.Fatal(err)
	}
	statuses := map[int]int{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec struct {
			Msg    string `json:"msg"`
			Status int    `json:"status"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		if rec.Msg == "http request" {
			statuses[rec.Status]++
		}
	}
	if statuses[http.StatusOK] != n/3 || statuses[http.StatusNotFound] != n/3 || statuses[http.StatusUnauthorized] != n/3 {
		t.Fatalf("access lines by status %v, want %d each of 200, 404 and 401", statuses, n/3)
	}
	if w := out.Writes(); w > n/10 {
		t.Errorf("%d lines took %d writes: not buffered", n, w)
	}
}

// BenchmarkAccessLog is what one request's access line costs the edge:
// /healthz through the Echo server, its line appended to a file (as when
// stderr is redirected to one: a real write(2) per line unbuffered) by the
// JSON logger, unbuffered and buffered, against no logger at all and a
// logger whose level drops the line.
// Run: go test -run '^$' -bench AccessLog -benchmem ./bootstrap/
func BenchmarkAccessLog(b *testing.B) {
	logFile, err := os.Create(b.TempDir() + "/otad.log")
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	cases := []struct {
		name   string
		logger func() (*slog.Logger, func() error)
	}{
		{"none", func() (*slog.Logger, func() error) { return slog.New(slog.DiscardHandler), func() error { return nil } }},
		{"level-error", func() (*slog.Logger, func() error) {
			return bootstrap.NewBufferedLogger(logFile, slog.LevelError)
		}},
		{"unbuffered", func() (*slog.Logger, func() error) {
			return bootstrap.NewLogger(logFile, slog.LevelInfo), func() error { return nil }
		}},
		{"buffered", func() (*slog.Logger, func() error) { return bootstrap.NewBufferedLogger(logFile, slog.LevelInfo) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			logger, closeLog := c.logger()
			defer closeLog()
			srv := rest.NewServer(rest.Config{}, nil, nil, nil, nil, nil, logger)
			req := httptest.NewRequest(http.MethodGet, "/healthz", nil).WithContext(context.Background())
			w := &discardResponse{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				srv.ServeHTTP(w, req)
			}
		})
	}
}

// discardResponse is a ResponseWriter that keeps nothing, so the benchmark
// measures the server and not a recorder.
type discardResponse struct{ h http.Header }

func (d *discardResponse) Header() http.Header         { return d.h }
func (d *discardResponse) Write(p []byte) (int, error) { return io.Discard.Write(p) }
func (d *discardResponse) WriteHeader(int)             {}
