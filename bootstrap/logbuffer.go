package bootstrap

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Log buffering defaults: a line waits at most LogFlushInterval before it
// is written, and LogBufferSize bytes of lines make one write(2).
const (
	LogFlushInterval = 100 * time.Millisecond
	LogBufferSize    = 64 << 10
)

// LogBuffer batches log lines into few writes. The access log writes one
// line per request; written straight to stderr that is one write(2) per
// request, which a profile of the check path under load put at several
// percent of the service's CPU. Buffered, a busy replica writes once per
// LogBufferSize bytes or once per flush interval, whichever comes first.
//
// Nothing is dropped or sampled: every line is written, in order, at the
// latest one interval after it was logged, at once when a record of
// warning level or above is logged (NewBufferedLogger), and at Close. What
// a crash of the process can lose is the last interval's lines below
// warning level.
type LogBuffer struct {
	mu     sync.Mutex
	out    io.Writer
	buf    *bufio.Writer
	every  time.Duration
	timer  *time.Timer
	armed  bool // a flush is scheduled
	closed bool // after Close, writes go straight through
}

// NewLogBuffer buffers up to size bytes for out and flushes them at the
// latest every interval after the first buffered line.
func NewLogBuffer(out io.Writer, size int, every time.Duration) *LogBuffer {
	if size <= 0 {
		size = LogBufferSize
	}
	if every <= 0 {
		every = LogFlushInterval
	}
	b := &LogBuffer{out: out, buf: bufio.NewWriterSize(out, size), every: every}
	b.timer = time.AfterFunc(time.Hour, b.scheduledFlush)
	b.timer.Stop()
	return b
}

// Write buffers p (a whole log line: slog handlers write one line per
// call) and schedules a flush when the buffer was empty.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.out.Write(p)
	}
	if len(p) > b.buf.Available() && b.buf.Buffered() > 0 {
		// Keep each line whole within one write(2), so another writer of
		// the same file (a crash's stack trace) cannot land mid-line.
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	n, err := b.buf.Write(p)
	if err != nil {
		// bufio keeps a failed write's error for good; start afresh so
		// that one failed write does not silence the log for ever.
		b.buf.Reset(b.out)
		return n, err
	}
	if !b.armed && b.buf.Buffered() > 0 {
		b.armed = true
		b.timer.Reset(b.every)
	}
	return n, nil
}

// Flush writes out what is buffered now.
func (b *LogBuffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *LogBuffer) flushLocked() error {
	if b.buf.Buffered() == 0 {
		return nil
	}
	err := b.buf.Flush()
	if err != nil {
		b.buf.Reset(b.out)
	}
	return err
}

func (b *LogBuffer) scheduledFlush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = false
	_ = b.flushLocked() // nowhere to report a failed log write
}

// Close flushes what is buffered and makes later writes unbuffered, so
// that lines logged while the process exits are not lost either. It is
// safe to call more than once.
func (b *LogBuffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timer.Stop()
	b.armed = false
	b.closed = true
	return b.flushLocked()
}

// NewBufferedLogger is NewLogger writing through a LogBuffer: JSON lines at
// the configured level, buffered, with every record at warning level or
// above flushed at once (together with the lines before it). Call the
// returned function when the process stops serving, after the last request
// drained, to write out the rest.
func NewBufferedLogger(w io.Writer, level slog.Level) (*slog.Logger, func() error) {
	buf := NewLogBuffer(w, LogBufferSize, LogFlushInterval)
	h := slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: level})
	return slog.New(flushingHandler{Handler: h, buf: buf, at: slog.LevelWarn}), buf.Close
}

// flushingHandler flushes the buffer after each record of level at or
// above at, so that warnings and errors are written when they happen.
type flushingHandler struct {
	slog.Handler
	buf *LogBuffer
	at  slog.Level
}

// Handle writes the record, then flushes when it is a warning or worse.
func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= h.at {
		if ferr := h.buf.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

// WithAttrs keeps the flushing behaviour on derived loggers.
func (h flushingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushingHandler{Handler: h.Handler.WithAttrs(attrs), buf: h.buf, at: h.at}
}

// WithGroup keeps the flushing behaviour on derived loggers.
func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{Handler: h.Handler.WithGroup(name), buf: h.buf, at: h.at}
}
