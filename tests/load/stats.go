package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// call is a kind of request the simulator times separately.
type call int

const (
	callCheck call = iota // POST /devices/{id}/ota/check
	callEvent             // POST /devices/{id}/ota/tasks/{task}/events
	callAdmin             // every /admin call (registration, publishing)
	numCalls
)

var callNames = [numCalls]string{"check", "event", "admin"}

func (c call) String() string { return callNames[c] }

// codeKey names one kind of answer: an HTTP status with the error code of
// its body ("" on success), or status 0 with the kind of transport failure.
type codeKey struct {
	Call   call
	Status int
	Code   string
}

func (k codeKey) String() string {
	if k.Status == 0 {
		return k.Call.String() + " transport " + k.Code
	}
	s := k.Call.String() + " " + strconv.Itoa(k.Status)
	if k.Code != "" {
		s += " " + k.Code
	}
	return s
}

// stats gathers every answer: latencies per call, counts per code.
type stats struct {
	hist  [numCalls]histogram
	total atomic.Int64 // every recorded request, for the live rate

	mu    sync.Mutex
	codes map[codeKey]int64
}

func newStats() *stats { return &stats{codes: map[codeKey]int64{}} }

// record adds one answered (or failed) request.
func (s *stats) record(c call, status int, code string, d time.Duration) {
	s.hist[c].record(d)
	s.total.Add(1)
	s.mu.Lock()
	s.codes[codeKey{c, status, code}]++
	s.mu.Unlock()
}

// snapshot copies the counts by code.
func (s *stats) snapshot() map[codeKey]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[codeKey]int64, len(s.codes))
	for k, v := range s.codes {
		out[k] = v
	}
	return out
}

// transportCode classifies a request that got no HTTP answer.
func transportCode(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection_reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	default:
		return "other"
	}
}

// errorSummary lists the non-2xx answers, most frequent first, as
// "503 SERVICE_BUSY=12".
func errorSummary(codes map[codeKey]int64, limit int) string {
	agg := map[string]int64{}
	for k, v := range codes {
		if k.Status >= 200 && k.Status < 300 {
			continue
		}
		name := "transport:" + k.Code
		if k.Status != 0 {
			name = strconv.Itoa(k.Status)
			if k.Code != "" {
				name += " " + k.Code
			}
		}
		agg[name] += v
	}
	if len(agg) == 0 {
		return "errors none"
	}
	names := make([]string, 0, len(agg))
	for n := range agg {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if agg[names[i]] != agg[names[j]] {
			return agg[names[i]] > agg[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, 0, limit)
	for i, n := range names {
		if i == limit {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%s=%d", n, agg[n]))
	}
	return "errors " + strings.Join(parts, " ")
}

// progress writes a live line to w every second until ctx ends, then ends
// the line. phase names what is running.
func (s *stats) progress(ctx context.Context, w io.Writer, phase string, start time.Time) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := s.total.Load()
	lastAt := start
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return
		case now := <-t.C:
			total := s.total.Load()
			rate := float64(total-last) / now.Sub(lastAt).Seconds()
			last, lastAt = total, now
			line := fmt.Sprintf("[%s %4.0fs] requests %d  %.0f/s  check p99 %s",
				phase, now.Sub(start).Seconds(), total, rate, fmtDur(s.hist[callCheck].quantile(0.99)))
			if s.hist[callEvent].count() > 0 {
				line += "  event p99 " + fmtDur(s.hist[callEvent].quantile(0.99))
			}
			line += "  " + errorSummary(s.snapshot(), 4)
			// \r rewrites the line; the padding clears a longer previous one.
			fmt.Fprintf(w, "\r%-150s", line)
		}
	}
}

// fmtDur prints a latency in milliseconds with a precision that suits it.
func fmtDur(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return fmt.Sprintf("%.2fms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1fms", ms)
	default:
		return fmt.Sprintf("%.0fms", ms)
	}
}
