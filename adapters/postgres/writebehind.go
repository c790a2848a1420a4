package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/lib/pq"
)

// WriteBehindConfig tunes WriteBehindDevices. Zero fields take the defaults.
type WriteBehindConfig struct {
	// Interval is how often pending checks are flushed (default 200ms).
	// A check is visible in the database within Interval plus the time of
	// one flush, well within the one second docs/DOMAIN.md allows.
	Interval time.Duration
	// BatchSize is the most devices one UPDATE carries (default 2000); a
	// flush starts early when this many devices are pending.
	BatchSize int
	// MaxPending bounds the devices waiting for a flush (default 200,000,
	// a few tens of MB). Beyond it, reports of devices not already
	// waiting are dropped and counted, rather than blocking checks.
	MaxPending int
	// MaxRetries is how many failed flushes a report survives before it is
	// dropped and counted (default 10: two seconds of a database that
	// refuses the batch). A flush that failed because the database could
	// not be reached (domain.ErrServiceBusy) does not count: the reports
	// wait for it to come back, bounded by MaxPending — a check answered
	// 200 keeps its record through a restart of Postgres.
	MaxRetries int
	// FlushTimeout bounds one batch statement (default 5s).
	FlushTimeout time.Duration
	// Resolution is how precisely last_seen_at is kept (default
	// DefaultSeenResolution; SeenEveryCheck writes every check): a check
	// that reports the stored version within Resolution of the stored
	// last_seen_at is not written at all (domain.Device.SeenNeedsWrite on
	// the device as the check read it, so deciding costs no round trip).
	// A changed version is written at once.
	Resolution time.Duration
}

// Write-behind defaults; see WriteBehindConfig.
const (
	DefaultSeenInterval     = 200 * time.Millisecond
	DefaultSeenBatchSize    = 2000
	DefaultSeenMaxPending   = 200_000
	DefaultSeenMaxRetries   = 10
	DefaultSeenFlushTimeout = 5 * time.Second
	DefaultSeenResolution   = 5 * time.Minute
	// SeenEveryCheck as Resolution writes every check.
	SeenEveryCheck time.Duration = -1
)

func (c WriteBehindConfig) withDefaults() WriteBehindConfig {
	c.Interval = positiveOr(c.Interval, DefaultSeenInterval)
	c.BatchSize = positiveOr(c.BatchSize, DefaultSeenBatchSize)
	c.MaxPending = positiveOr(c.MaxPending, DefaultSeenMaxPending)
	c.MaxRetries = positiveOr(c.MaxRetries, DefaultSeenMaxRetries)
	c.FlushTimeout = positiveOr(c.FlushTimeout, DefaultSeenFlushTimeout)
	// Resolution's negative values mean something (SeenEveryCheck): only
	// the zero one is unset.
	if c.Resolution == 0 {
		c.Resolution = DefaultSeenResolution
	}
	return c
}

// WriteBehindDevices is a ports.DeviceRepository whose RecordSeen does not
// write: it notes the check in memory and returns, and a background loop
// stores every noted check in one UPDATE per batch (RecordSeenBatch) every
// Interval, or sooner when BatchSize devices wait. A device that checks
// many times between two flushes costs one row in the batch (the newest
// report wins; an older report arriving late is ignored, and the database
// keeps the newest too). Everything else goes to the wrapped repository;
// Get shows this process's not yet flushed checks, so an operator reading
// a device through the replica that served its check sees it at once.
//
// A flush that fails is logged and its reports retried on the next one; a
// report is dropped (and counted) only after MaxRetries refusals by the
// database (an unreachable database does not count) or when MaxPending
// devices already wait. Flush stores everything pending (wire
// it to the server's shutdown, after requests drained); Close stops the
// loop and flushes.
type WriteBehindDevices struct {
	inner  *DeviceRepository
	cfg    WriteBehindConfig
	logger *slog.Logger

	mu       sync.Mutex
	pending  map[string]seenEntry
	inflight map[string]seenEntry // the batch being written, for Get
	closed   bool

	flushMu sync.Mutex // one flush at a time
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}

	stats         WriteBehindStats
	loggedDropped int64
}

// WriteBehindStats counts what the write-behind did, for metrics.
type WriteBehindStats struct {
	Written  atomic.Int64 // device rows updated
	Batches  atomic.Int64 // batch statements that succeeded
	Failures atomic.Int64 // batch statements that failed (their reports retried)
	Dropped  atomic.Int64 // reports given up (retries spent, or too many pending)
	Skipped  atomic.Int64 // checks that changed nothing within the resolution, not written
}

type seenEntry struct {
	version  domain.Version
	at       time.Time
	repeat   bool // the check repeated the version it read: only at is written
	failures int
}

var _ ports.DeviceRepository = (*WriteBehindDevices)(nil)

// NewWriteBehindDevices starts the write-behind over inner. The returned
// cleanup stops it and flushes what is pending (bounded by FlushTimeout).
func NewWriteBehindDevices(inner *DeviceRepository, cfg WriteBehindConfig, logger *slog.Logger) (*WriteBehindDevices, func(), error) {
	if inner == nil {
		return nil, nil, errors.New("postgres: write-behind needs a device repository")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &WriteBehindDevices{
		inner:   inner,
		cfg:     cfg.withDefaults(),
		logger:  logger,
		pending: map[string]seenEntry{},
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go w.run()
	return w, w.Close, nil
}

// Stats are the write-behind's counters.
func (w *WriteBehindDevices) Stats() *WriteBehindStats { return &w.stats }

// Create stores a new device.
func (w *WriteBehindDevices) Create(ctx context.Context, d domain.Device, rec domain.AuditRecord) error {
	return w.inner.Create(ctx, d, rec)
}

// Get loads a device, with any check of it this process has not yet
// written applied.
func (w *WriteBehindDevices) Get(ctx context.Context, id domain.DeviceID) (domain.Device, error) {
	d, err := w.inner.Get(ctx, id)
	if err != nil {
		return d, err
	}
	w.mu.Lock()
	e, ok := w.pending[id.String()]
	if f, fok := w.inflight[id.String()]; fok && (!ok || f.at.After(e.at)) {
		e, ok = f, true
	}
	w.mu.Unlock()
	if ok && (d.LastSeenAt().IsZero() || !e.at.Before(d.LastSeenAt())) {
		v := e.version
		if e.repeat {
			v = d.CurrentVersion()
		}
		d.Seen(v, e.at)
	}
	return d, nil
}

// Update changes a device in a transaction.
func (w *WriteBehindDevices) Update(ctx context.Context, id domain.DeviceID, fn func(*domain.Device) error, rec domain.AuditRecord) (domain.Device, error) {
	return w.inner.Update(ctx, id, fn, rec)
}

// RecordSeen notes a check for the next flush and returns at once; it
// never waits for the database. A check that changes nothing within the
// resolution (stored, the device as the check read it, already says so)
// is not noted at all, unless a report of the device waits or is being
// written: then the newest report replaces it, so that a version reported
// back (a rollback) is not lost behind the one it replaced. The zero
// device id is domain.ErrNotFound; an unknown one is skipped by the flush. After Close it writes synchronously.
//
// Two replicas may each hold a report of one device; if one of them
// skips a check because its read predates the other's flush (or was made
// on a read replica that had not yet replayed it), the stored version may
// show that older report until the device's next write, at most one
// resolution later. It takes a device reporting a version and then the
// previous one again within about a second.
func (w *WriteBehindDevices) RecordSeen(ctx context.Context, stored domain.Device, v domain.Version, at time.Time) error {
	id := stored.ID().String()
	if stored.ID().IsZero() {
		return fmt.Errorf("recording a check: %w", domain.ErrNotFound)
	}
	needed := stored.SeenNeedsWrite(v, at, w.cfg.Resolution)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		if !needed {
			w.stats.Skipped.Add(1)
			return nil
		}
		return w.inner.RecordSeen(ctx, stored, v, at)
	}
	cur, ok := w.pending[id]
	_, writing := w.inflight[id]
	switch {
	case !needed && !ok && !writing:
		w.stats.Skipped.Add(1)
	case ok && at.Before(cur.at):
		// An older report that arrived late: the newer one stands.
	case !ok && len(w.pending) >= w.cfg.MaxPending:
		w.stats.Dropped.Add(1)
	default:
		w.pending[id] = seenEntry{version: v, at: at, repeat: !stored.SeenChangesVersion(v)}
	}
	full := len(w.pending) >= w.cfg.BatchSize
	w.mu.Unlock()
	if full {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// Pending is how many devices wait for a flush.
func (w *WriteBehindDevices) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

func (w *WriteBehindDevices) run() {
	defer close(w.done)
	tickUntil(w.stop, w.cfg.Interval, w.kick, func() { _ = w.flushOnce(context.Background()) })
}

// Flush stores every check noted so far, retrying failed batches until
// they are stored, dropped after MaxRetries, or ctx ends; it returns an
// error if checks are left unstored or its last attempt failed (dropping
// them). The server calls it on shutdown, after in-flight requests drained
// and before the pool closes.
func (w *WriteBehindDevices) Flush(ctx context.Context) error {
	for {
		err := w.flushOnce(ctx)
		if w.Pending() == 0 {
			return err
		}
		wait := time.NewTimer(w.cfg.Interval / 4)
		select {
		case <-ctx.Done():
			wait.Stop()
			return fmt.Errorf("flushing device checks: %d left unwritten: %w", w.Pending(), errors.Join(err, ctx.Err()))
		case <-wait.C:
		}
	}
}

// Close stops the flush loop and flushes what is pending (bounded by
// FlushTimeout); later RecordSeen calls write synchronously. It is safe to
// call more than once.
func (w *WriteBehindDevices) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.FlushTimeout)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		w.logger.Error("write-behind: checks lost at shutdown", "err", err)
	}
}

// flushOnce writes what is pending now, in batches of at most BatchSize
// devices, and puts back the reports of failed batches for the next flush
// (dropping those that failed MaxRetries times).
func (w *WriteBehindDevices) flushOnce(ctx context.Context) error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	batch := w.pending
	if len(batch) == 0 {
		w.mu.Unlock()
		return nil
	}
	w.pending = make(map[string]seenEntry, len(batch))
	w.inflight = batch
	w.mu.Unlock()

	reports := make([]SeenReport, 0, len(batch))
	for id, e := range batch {
		reports = append(reports, SeenReport{DeviceID: id, Version: e.version, At: e.at, Repeat: e.repeat})
	}
	slices.SortFunc(reports, func(a, b SeenReport) int { return strings.Compare(a.DeviceID, b.DeviceID) })
	var failed, waiting []SeenReport // refused by the database; database unreachable
	var errs []error
	for chunk := range slices.Chunk(reports, w.cfg.BatchSize) {
		bctx, cancel := context.WithTimeout(ctx, w.cfg.FlushTimeout)
		n, err := w.inner.RecordSeenBatch(bctx, chunk)
		cancel()
		if err != nil {
			w.stats.Failures.Add(1)
			// Unreachable or merely slow (the flush timed out, or Postgres
			// cancelled the statement for it): the reports wait. Only a
			// database that answers and refuses counts against them.
			if errors.Is(err, domain.ErrServiceBusy) || errors.Is(err, context.DeadlineExceeded) || isQueryCanceled(err) {
				waiting = append(waiting, chunk...)
			} else {
				failed = append(failed, chunk...)
			}
			errs = append(errs, err)
			continue
		}
		w.stats.Batches.Add(1)
		w.stats.Written.Add(n)
	}

	w.mu.Lock()
	dropped := 0
	requeue := func(r SeenReport, refused bool) {
		e := batch[r.DeviceID]
		if refused {
			e.failures++
		}
		if cur, ok := w.pending[r.DeviceID]; ok && !cur.at.Before(e.at) {
			return // a newer report of the device waits already
		}
		if e.failures >= w.cfg.MaxRetries {
			dropped++
			return
		}
		w.pending[r.DeviceID] = e
	}
	for _, r := range failed {
		requeue(r, true)
	}
	for _, r := range waiting {
		requeue(r, false)
	}
	w.inflight = nil
	w.mu.Unlock()
	if dropped > 0 {
		w.stats.Dropped.Add(int64(dropped))
	}
	err := errors.Join(errs...)
	if err != nil {
		w.logger.Warn("write-behind: storing device checks failed; retrying on the next flush",
			"devices", len(failed)+len(waiting), "dropped", dropped, "err", err)
	}
	if d := w.stats.Dropped.Load(); d != w.loggedDropped {
		w.logger.Warn("write-behind: device checks dropped", "total", d, "since_last_flush", d-w.loggedDropped)
		w.loggedDropped = d
	}
	return err
}

// isQueryCanceled reports Postgres cancelling a statement (57014), which is
// how lib/pq ends one whose context ran out.
func isQueryCanceled(err error) bool {
	var pe *pq.Error
	return errors.As(err, &pe) && pe.Code == "57014"
}
