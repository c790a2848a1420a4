package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// ReadReplicaConfig says where a streaming replica is and how stale a read
// from it may be.
type ReadReplicaConfig struct {
	// URL is the replica's; empty means no replica (every read goes to
	// the primary).
	URL DatabaseURL
	// MaxLag is the most a read from the replica may be behind the
	// primary (default 1s, as the catalog cache): beyond it the primary
	// answers.
	MaxLag time.Duration
	// Probe is how often the replica's replay position is compared with
	// the primary's (default 250ms).
	Probe time.Duration
	// MaxOpenConns caps the replica's pool (default DefaultMaxOpenConns).
	MaxOpenConns int
}

// Read-replica defaults; see ReadReplicaConfig.
const (
	DefaultReadMaxLag = time.Second
	DefaultReadProbe  = 250 * time.Millisecond
)

// ReadReplica routes the check's lock-free read (TaskRepository.CheckView
// and CheckViewOf: the device's authentication and its task state) to a
// streaming replica while the replica is provably no more than MaxLag
// behind the primary, and to the primary otherwise. Nothing that decides
// or writes reads from it: the creation under the lock, events and admin
// changes re-read on the primary in their own transactions.
//
// How far behind the replica is, is measured, not asked of the replica
// alone: now() - pg_last_xact_replay_timestamp() grows on a replica of an
// idle primary that is perfectly up to date. Every Probe the primary's
// pg_current_wal_lsn() is sampled, then the replica's
// pg_last_wal_replay_lsn(). When the replica has replayed past the
// primary's position sampled at instant t, it holds every transaction
// committed before t, so a read from it now is at most now - t stale.
// The replica is read from while now - t < MaxLag for the newest such t;
// a replica that stops replaying (paused, cut off, down) or a probe that
// stops running ages past the bound on its own, and reads go back to the
// primary. A read's answer, not only its start, must come before t +
// MaxLag (freshUntil), so the bound holds when the repository returns,
// read time included: a device is never handed, from the replica, a task
// that the primary cancelled or superseded more than MaxLag before the
// read returned. (It assumes commits are flushed before they are visible,
// synchronous_commit on, the default: the primary's position sampled is
// its WAL write position.)
type ReadReplica struct {
	db      *sqlx.DB
	primary *sqlx.DB
	cfg     ReadReplicaConfig
	logger  *slog.Logger
	epoch   time.Time // monotonic origin of caughtUp

	// caughtUp is when (nanoseconds since epoch) the primary's sampled
	// position that the replica has replayed was taken; 0: never, or the
	// replica failed since.
	caughtUp atomic.Int64
	samples  []lsnSample // the probe's own: primary positions not yet replayed

	mu    sync.Mutex
	stmts map[string]*sqlx.Stmt // prepared on the replica at first use

	stats ReadReplicaStats
	stop  chan struct{}
	done  chan struct{}
}

// ReadReplicaStats counts where the check's reads went, for metrics.
type ReadReplicaStats struct {
	Reads     atomic.Int64 // answered by the replica
	Primary   atomic.Int64 // sent to the primary: replica too far behind or failing
	Fallbacks atomic.Int64 // tried on the replica, answered by the primary (error or not found there)
}

type lsnSample struct {
	at  int64 // nanoseconds since epoch
	lsn uint64
}

// OpenReadReplica opens the replica's pool and starts measuring its lag
// against primary. With no URL it returns nil (no replica) and no error.
// A replica that cannot be reached at start is not an error: reads go to
// the primary until it catches up. The cleanup stops the probe and closes
// the pool.
func OpenReadReplica(cfg ReadReplicaConfig, primary *sqlx.DB, logger *slog.Logger) (*ReadReplica, func(), error) {
	if strings.TrimSpace(string(cfg.URL)) == "" {
		return nil, func() {}, nil
	}
	if primary == nil {
		return nil, nil, errors.New("postgres: a read replica needs the primary's pool to measure its lag")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg.MaxLag = positiveOr(cfg.MaxLag, DefaultReadMaxLag)
	cfg.Probe = positiveOr(cfg.Probe, DefaultReadProbe)
	cfg.MaxOpenConns = positiveOr(cfg.MaxOpenConns, DefaultMaxOpenConns)
	db, err := sqlx.Open("postgres", string(cfg.URL))
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: invalid read replica URL for %s: %w", describe(cfg.URL), err)
	}
	db.SetMaxOpenConns(cfg.MaxOpenConns)
	db.SetMaxIdleConns(cfg.MaxOpenConns)
	db.SetConnMaxLifetime(DefaultConnMaxLifetime)
	db.SetConnMaxIdleTime(DefaultConnMaxIdleTime)
	r := &ReadReplica{db: db, primary: primary, cfg: cfg, logger: logger, epoch: time.Now(),
		stmts: map[string]*sqlx.Stmt{}, stop: make(chan struct{}), done: make(chan struct{})}
	r.probe()
	go r.run()
	return r, r.close, nil
}

// Stats are the replica's counters.
func (r *ReadReplica) Stats() *ReadReplicaStats { return &r.stats }

// Lag is how stale a read from the replica would be now, and false when
// the replica has never caught up or failed its last probe.
func (r *ReadReplica) Lag() (time.Duration, bool) {
	c := r.caughtUp.Load()
	if c == 0 {
		return 0, false
	}
	return time.Since(r.epoch) - time.Duration(c), true
}

// Usable reports whether a read from the replica now is within MaxLag.
func (r *ReadReplica) Usable() bool {
	_, ok := r.freshUntil()
	return ok
}

// freshUntil is the instant until which an answer from the replica is
// within MaxLag of the primary — the newest primary position it has
// replayed was sampled at t, so it holds every commit before t; t + MaxLag
// — and whether that is still ahead. An answer must arrive before it, not
// only a read start: a read begun just inside the bound and answered later
// would hand out what the primary changed more than MaxLag before.
func (r *ReadReplica) freshUntil() (time.Time, bool) {
	c := r.caughtUp.Load()
	if c == 0 {
		return time.Time{}, false
	}
	until := r.epoch.Add(time.Duration(c) + r.cfg.MaxLag) // monotonic, as epoch
	return until, time.Now().Before(until)
}

func (r *ReadReplica) close() {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	for _, s := range r.stmts {
		_ = s.Close()
	}
	r.mu.Unlock()
	_ = r.db.Close()
}

func (r *ReadReplica) run() {
	defer close(r.done)
	wasUsable := r.Usable()
	tickUntil(r.stop, r.cfg.Probe, nil, func() {
		r.probe()
		if u := r.Usable(); u != wasUsable {
			lag, _ := r.Lag()
			r.logger.Info("read replica", "usable", u, "lag", lag.String(), "max_lag", r.cfg.MaxLag.String())
			wasUsable = u
		}
	})
}

// probe samples the primary's WAL position, then the replica's replay
// position, and moves caughtUp to the newest primary sample the replica
// has replayed past.
func (r *ReadReplica) probe() {
	timeout := min(r.cfg.MaxLag, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	at := int64(time.Since(r.epoch))
	var primaryLSN string
	if err := r.primary.QueryRowContext(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&primaryLSN); err != nil {
		return // no new sample; the replica ages past the bound if this lasts
	}
	p, err := parseLSN(primaryLSN)
	if err != nil {
		r.logger.Warn("read replica: unreadable primary WAL position", "lsn", primaryLSN)
		return
	}
	r.samples = append(r.samples, lsnSample{at: at, lsn: p})
	var replayed sql.NullString
	var recovering bool
	err = r.db.QueryRowContext(ctx, `SELECT pg_last_wal_replay_lsn()::text, pg_is_in_recovery()`).Scan(&replayed, &recovering)
	if err != nil || !recovering || !replayed.Valid {
		// Down, or not a standby (any more): nothing it says is known fresh.
		r.caughtUp.Store(0)
		r.trimSamples()
		return
	}
	rl, err := parseLSN(replayed.String)
	if err != nil {
		r.caughtUp.Store(0)
		return
	}
	newest := -1
	for i, s := range r.samples {
		if s.lsn <= rl {
			newest = i
		}
	}
	if newest >= 0 {
		if c := r.samples[newest].at; c > r.caughtUp.Load() {
			r.caughtUp.Store(max(c, 1))
		}
		r.samples = append(r.samples[:0], r.samples[newest+1:]...)
	}
	r.trimSamples()
}

// trimSamples keeps the probe's memory bounded while the replica is far
// behind (256 samples, a minute at the default probe): it drops the
// oldest, so a replica that far behind is proven fresh again only once it
// replays past a kept sample — erring on the stale side.
func (r *ReadReplica) trimSamples() {
	const keep = 256
	if len(r.samples) > keep {
		r.samples = append(r.samples[:0], r.samples[len(r.samples)-keep:]...)
	}
}

// parseLSN reads a pg_lsn's text form, "XXXXXXXX/XXXXXXXX".
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("not an LSN: %q", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("not an LSN: %q", s)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("not an LSN: %q", s)
	}
	return h<<32 | l, nil
}

// stmt is q prepared on the replica, or nil when the replica cannot
// prepare it before until (its answers' freshness bound).
func (r *ReadReplica) stmt(q string, until time.Time) *sqlx.Stmt {
	r.mu.Lock()
	s, ok := r.stmts[q]
	r.mu.Unlock()
	if ok {
		return s
	}
	// Prepared outside the lock: a replica that hangs holds up only the
	// reads that found no statement, each until its bound (under MaxLag).
	ctx, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	s, err := r.db.PreparexContext(ctx, q)
	if err != nil {
		r.logger.Warn("read replica: preparing the check's read failed; reading from the primary", "err", err)
		r.caughtUp.Store(0)
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prior, ok := r.stmts[q]; ok {
		_ = s.Close()
		return prior
	}
	r.stmts[q] = s
	return s
}

// NewServingTaskRepository is NewTaskRepository whose check reads
// (CheckView, CheckViewOf) go to reads while it is fresh enough, and whose
// rollout judgements (an event or a check that ends a task and so pauses
// the rollout or opens its next stage) reach catalog at once, after
// commit, not only through the NOTIFY. reads may be nil (no replica
// configured), catalog too (no cache).
func NewServingTaskRepository(db *sqlx.DB, reads *ReadReplica, catalog *CatalogCache) (*TaskRepository, error) {
	r, err := NewTaskRepository(db)
	if err != nil {
		return nil, err
	}
	r.reads = reads
	r.catalog = catalog
	return r, nil
}

// routedCheckView reads the check view with the statement for q: on the
// replica when it is fresh enough, else, or when the replica fails or does
// not know the key, on the primary (primary, q prepared there). A key the
// replica does not know is asked of the primary too: a device registered
// or given a new token within the lag must still authenticate.
func (s *TaskRepository) routedCheckView(ctx context.Context, q string, primary *sqlx.Stmt, key any) (ports.CheckView, error) {
	if s.reads == nil {
		return s.checkView(ctx, primary, key)
	}
	until, fresh := s.reads.freshUntil()
	var stmt *sqlx.Stmt
	if fresh {
		stmt = s.reads.stmt(q, until)
	}
	if stmt != nil {
		v, late, err := s.replicaRead(ctx, stmt, key, until)
		if err == nil {
			s.reads.stats.Reads.Add(1)
			v.AsOf = until.Add(-s.reads.cfg.MaxLag).Round(0) // the wall clock's reading: Auth compares it with its clock's
			return v, nil
		}
		if ctx.Err() != nil {
			return ports.CheckView{}, err
		}
		if late || errors.Is(err, domain.ErrServiceBusy) {
			s.reads.caughtUp.Store(0) // the probe decides when to come back
		}
		s.reads.stats.Fallbacks.Add(1)
	} else {
		s.reads.stats.Primary.Add(1)
	}
	return s.checkView(ctx, primary, key)
}

type replicaAnswer struct {
	v   ports.CheckView
	err error
}

// replicaRead reads the check view on the replica, giving up at until
// (late), the instant past which its answer could be more than MaxLag
// behind the primary (freshUntil): a slow answer is as stale as a lagging
// replica's, and a replica that stops answering without refusing (cut
// off, a lost network) must not hold the check. An answer that arrives
// after until is dropped too. lib/pq ends a cancelled query only when the
// server answers the cancel, so the read runs in its own goroutine and is
// abandoned, not waited for; it ends, and gives its connection back, when
// the replica answers or the connection breaks.
func (s *TaskRepository) replicaRead(ctx context.Context, stmt *sqlx.Stmt, key any, until time.Time) (v ports.CheckView, late bool, err error) {
	rctx, cancel := context.WithDeadline(ctx, until)
	done := make(chan replicaAnswer, 1)
	go func() {
		defer cancel()
		v, err := s.checkView(rctx, stmt, key)
		done <- replicaAnswer{v, err}
	}()
	select {
	case a := <-done:
		if a.err == nil && !time.Now().Before(until) {
			return ports.CheckView{}, true, errors.New("reading the replica: answered past its freshness bound")
		}
		return a.v, false, a.err
	case <-rctx.Done():
		return ports.CheckView{}, ctx.Err() == nil, fmt.Errorf("reading the replica: %w", rctx.Err())
	}
}
