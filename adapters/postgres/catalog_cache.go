package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lib/pq"
	"golang.org/x/sync/singleflight"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// CatalogCacheConfig tunes CatalogCache. Zero fields take the defaults.
type CatalogCacheConfig struct {
	// URL is the database the listener connection opens (the pool's).
	URL DatabaseURL
	// MaxStaleness bounds how long after an operator's change the cache
	// may still answer with what it replaced (default 1s): the cache is
	// trusted only while the listener proved, less than MaxStaleness ago,
	// that every notification committed before then had reached it.
	MaxStaleness time.Duration
	// PingInterval is how often that proof is renewed (default 200ms).
	PingInterval time.Duration
	// RefreshInterval is the safety net: every RefreshInterval the whole
	// catalog is reloaded whatever the notifications said (default 30s).
	RefreshInterval time.Duration
	// ConnectTimeout bounds the listener's first connection (default 10s).
	ConnectTimeout time.Duration
	// ReadIdleTimeout closes a listener connection that received nothing
	// (not even a ping's answer) for that long, so a silently dead
	// connection is noticed and replaced (default 5s).
	ReadIdleTimeout time.Duration
}

// Catalog cache defaults; see CatalogCacheConfig.
const (
	DefaultCatalogMaxStaleness    = time.Second
	DefaultCatalogPingInterval    = 200 * time.Millisecond
	DefaultCatalogRefreshInterval = 30 * time.Second
	DefaultCatalogConnectTimeout  = 10 * time.Second
	DefaultCatalogReadIdleTimeout = 5 * time.Second
)

func (c CatalogCacheConfig) withDefaults() CatalogCacheConfig {
	c.MaxStaleness = positiveOr(c.MaxStaleness, DefaultCatalogMaxStaleness)
	c.PingInterval = min(positiveOr(c.PingInterval, DefaultCatalogPingInterval), c.MaxStaleness/2)
	c.RefreshInterval = positiveOr(c.RefreshInterval, DefaultCatalogRefreshInterval)
	c.ConnectTimeout = positiveOr(c.ConnectTimeout, DefaultCatalogConnectTimeout)
	c.ReadIdleTimeout = positiveOr(c.ReadIdleTimeout, DefaultCatalogReadIdleTimeout)
	return c
}

// Bounds on what the cache keeps, so that a flood of lookups of distinct
// ids cannot grow it without end; beyond them lookups go to the database.
const (
	maxCachedModels    = 10_000
	maxCachedFirmwares = 100_000
	maxCachedRollouts  = 100_000
)

// CatalogCache keeps, in this process, the data every device check reads
// and operators rarely change: each model's offers (active rollouts of
// released firmware), and firmware and rollouts by id. CachedFirmwares and
// CachedRollouts put it in front of the repositories, behind the same
// ports, so the application does not know it is there (and the memory
// adapter has none).
//
// # Invalidation
//
// Every change to firmware or rollouts is announced by the repositories with
// NOTIFY ota_catalog, '<model>' in the changing transaction; Postgres
// delivers it at commit, to every replica's listener (a dedicated
// connection, lib/pq's Listener), and only if the transaction commits. On a
// notification the model's offers and every by-id entry are dropped, and
// the next read refills them. A replica's own writes also invalidate
// locally at once, after commit, so an operator reads their own change
// and a device's next check sees the stage its last event opened or the
// pause its failure caused (TaskRepository's rollout judgements,
// NewServingTaskRepository).
//
// Three guards keep a missed notification from serving stale data for long:
//   - Liveness: the listener pings its connection every PingInterval. A
//     ping's answer comes after every notification committed before it was
//     sent, so a successful ping started at t proves nothing committed
//     before t is unheard. The cache answers only until t + MaxStaleness;
//     past that (a dead or hung connection, a slow server) every read goes
//     to the database, uncached, until pings succeed again.
//   - Reconnection: when the listener loses its connection, or gets it
//     back (pq.ListenerEventDisconnected / ListenerEventReconnected),
//     everything is dropped: notifications sent meanwhile are lost.
//   - Refresh: every RefreshInterval the whole catalog is reloaded.
//
// A fill that raced an invalidation is not stored: each invalidation bumps
// a generation, and a fill stores its result only if the generation it
// started under is still current.
//
// # Why Postgres notifications, not Redis
//
// The changes live in Postgres, so the notification is part of the change:
// it is sent if and only if the transaction commits, after the commit, in
// commit order — no window where a replica is told before the data is
// visible, no change committed without its message when a second system is
// down, no dual write. Redis pub/sub would need the service to publish
// after committing (a crash between the two loses the message) and would
// make the cache's correctness depend on a second system's availability,
// when Redis is otherwise only the lock. The cost is one more connection
// per replica to Postgres, and the ping that proves it alive.
type CatalogCache struct {
	firmwares *FirmwareRepository
	rollouts  *RolloutRepository
	cfg       CatalogCacheConfig
	logger    *slog.Logger
	listener  *pq.Listener

	// aliveUntil is the unix-nano time until which the cache may answer
	// (the start of the last successful ping plus MaxStaleness; 0: never).
	aliveUntil atomic.Int64
	// epoch counts listener disconnects and reconnects, so a ping in flight
	// across one cannot renew liveness.
	epoch atomic.Uint64

	mu     sync.RWMutex
	gen    uint64
	offers map[string][]domain.Offer
	fws    map[string]domain.Firmware
	ros    map[string]domain.Rollout

	flights singleflight.Group
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once

	stats CatalogCacheStats
}

// CatalogCacheStats counts the cache's work, for metrics.
type CatalogCacheStats struct {
	Hits          atomic.Int64 // reads answered from memory
	Misses        atomic.Int64 // reads that filled an entry from the database
	Bypassed      atomic.Int64 // reads sent to the database while the listener was not proven alive
	Invalidations atomic.Int64 // notifications, local writes, reconnections and refreshes
}

// NewCatalogCache connects the listener and starts the cache over the two
// repositories. The returned cleanup stops it. It fails when the listener
// cannot connect within ConnectTimeout.
func NewCatalogCache(firmwares *FirmwareRepository, rollouts *RolloutRepository, cfg CatalogCacheConfig, logger *slog.Logger) (*CatalogCache, func(), error) {
	if firmwares == nil || rollouts == nil {
		return nil, nil, errors.New("postgres: the catalog cache needs the firmware and rollout repositories")
	}
	if cfg.URL == "" {
		return nil, nil, errors.New("postgres: the catalog cache needs the database URL for its listener")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &CatalogCache{
		firmwares: firmwares,
		rollouts:  rollouts,
		cfg:       cfg.withDefaults(),
		logger:    logger,
		offers:    map[string][]domain.Offer{},
		fws:       map[string]domain.Firmware{},
		ros:       map[string]domain.Rollout{},
		stop:      make(chan struct{}),
	}
	c.listener = pq.NewDialListener(idleDialer{idle: c.cfg.ReadIdleTimeout}, listenerDSN(cfg.URL),
		100*time.Millisecond, 2*time.Second, c.onEvent)
	listened := make(chan error, 1)
	go func() { listened <- c.listener.Listen(catalogChannel) }()
	select {
	case err := <-listened:
		if err != nil {
			_ = c.listener.Close()
			return nil, nil, fmt.Errorf("postgres: listening for catalog changes on %s: %w", describe(cfg.URL), err)
		}
	case <-time.After(c.cfg.ConnectTimeout):
		_ = c.listener.Close()
		return nil, nil, fmt.Errorf("postgres: listening for catalog changes on %s: no connection within %s", describe(cfg.URL), c.cfg.ConnectTimeout)
	}
	c.ping()
	c.wg.Add(3)
	go c.consume()
	go c.every(c.cfg.PingInterval, c.ping)
	go c.every(c.cfg.RefreshInterval, c.refresh)
	return c, c.Close, nil
}

// Close stops the listener and the loops. It is safe to call more than once.
func (c *CatalogCache) Close() {
	c.once.Do(func() {
		close(c.stop)
		c.aliveUntil.Store(0)
		_ = c.listener.Close()
		c.wg.Wait()
	})
}

// Stats are the cache's counters.
func (c *CatalogCache) Stats() *CatalogCacheStats { return &c.stats }

// Firmwares is the cached firmware repository.
func (c *CatalogCache) Firmwares() *CachedFirmwares { return &CachedFirmwares{c: c} }

// Rollouts is the cached rollout repository.
func (c *CatalogCache) Rollouts() *CachedRollouts { return &CachedRollouts{c: c} }

// live reports whether the cache may answer now.
func (c *CatalogCache) live() bool { return time.Now().UnixNano() < c.aliveUntil.Load() }

// Live reports whether the cache answers from memory now (false: every read
// goes to the database until the listener proves alive again).
func (c *CatalogCache) Live() bool { return c.live() }

func (c *CatalogCache) onEvent(ev pq.ListenerEventType, err error) {
	switch ev {
	case pq.ListenerEventDisconnected:
		c.epoch.Add(1) // a ping that started before this must not renew liveness
		c.aliveUntil.Store(0)
		c.invalidate("*")
		c.logger.Warn("catalog cache: listener disconnected; reading through to the database", "err", err)
	case pq.ListenerEventReconnected:
		c.invalidate("*")
		c.epoch.Add(1)
		c.logger.Info("catalog cache: listener reconnected; cache cleared")
	case pq.ListenerEventConnectionAttemptFailed:
		c.logger.Warn("catalog cache: listener cannot connect", "err", err)
	}
}

// consume applies notifications until the listener closes.
func (c *CatalogCache) consume() {
	defer c.wg.Done()
	for n := range c.listener.Notify {
		if n == nil {
			// Sent after a reconnection: anything may have been missed.
			c.invalidate("*")
			continue
		}
		c.invalidate(n.Extra)
	}
}

// every runs fn every interval until the cache stops.
func (c *CatalogCache) every(interval time.Duration, fn func()) {
	defer c.wg.Done()
	tickUntil(c.stop, interval, nil, fn)
}

// ping renews the cache's liveness when the listener answers.
//
// A ping that raced a disconnect (or a reconnect) proves nothing about the
// connection that follows it, so liveness is renewed only if no listener
// event happened while it was in flight.
func (c *CatalogCache) ping() {
	epoch := c.epoch.Load()
	start := time.Now()
	if err := c.listener.Ping(); err != nil {
		return
	}
	until := start.Add(c.cfg.MaxStaleness).UnixNano()
	for {
		cur := c.aliveUntil.Load()
		if c.epoch.Load() != epoch || cur >= until || c.aliveUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// refresh is the periodic Refresh, which has no caller to report to.
func (c *CatalogCache) refresh() {
	if err := c.Refresh(context.Background()); err != nil {
		c.logger.Warn("catalog cache: refresh failed; entries dropped", "err", err)
	}
}

// Refresh reloads every model's offers in one query and drops the by-id
// entries (the periodic safety net; tests call it directly).
func (c *CatalogCache) Refresh(ctx context.Context) error {
	c.mu.RLock()
	gen := c.gen
	c.mu.RUnlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	all, err := c.rollouts.AllOffers(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.stats.Invalidations.Add(1)
	clear(c.fws)
	clear(c.ros)
	if err != nil || c.gen != gen+1 || !c.live() || len(all) > maxCachedModels {
		clear(c.offers)
		return err
	}
	// Models with nothing to offer are left out and refill on demand.
	c.offers = all
	return nil
}

// invalidate drops what a change to model may have touched ("*": anything).
func (c *CatalogCache) invalidate(model string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.stats.Invalidations.Add(1)
	if model == "*" || model == "" {
		clear(c.offers)
	} else {
		delete(c.offers, model)
	}
	// By-id entries are few and cheap to reload: drop them all rather than
	// track which model each belongs to.
	clear(c.fws)
	clear(c.ros)
}

// fillContext detaches a fill from the caller that started it (others may
// wait for it) while bounding it.
func fillContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

// lookup serves key from the map m picks, or fills it with load, sharing
// one load among concurrent readers of the same key and generation.
func lookup[T any](ctx context.Context, c *CatalogCache, kind, key string, m func() map[string]T, limit int,
	load func(context.Context) (T, error)) (T, error) {
	if !c.live() {
		c.stats.Bypassed.Add(1)
		return load(ctx)
	}
	c.mu.RLock()
	v, ok := m()[key]
	gen := c.gen
	c.mu.RUnlock()
	if ok {
		c.stats.Hits.Add(1)
		return v, nil
	}
	c.stats.Misses.Add(1)
	ch := c.flights.DoChan(kind+"\x00"+strconv.FormatUint(gen, 10)+"\x00"+key, func() (any, error) {
		fctx, cancel := fillContext(ctx)
		defer cancel()
		v, err := load(fctx)
		if err != nil {
			return v, err
		}
		c.mu.Lock()
		if mm := m(); c.gen == gen && c.live() && len(mm) < limit {
			mm[key] = v
		}
		c.mu.Unlock()
		return v, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			var zero T
			return zero, r.Err
		}
		return r.Val.(T), nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func (c *CatalogCache) offersOf(ctx context.Context, model string) ([]domain.Offer, error) {
	if domain.ValidateIdentifier("model", model) != nil {
		return []domain.Offer{}, nil // no firmware can be published for it
	}
	offers, err := lookup(ctx, c, "offers", model, func() map[string][]domain.Offer { return c.offers }, maxCachedModels,
		func(ctx context.Context) ([]domain.Offer, error) { return c.rollouts.Offers(ctx, model) })
	if err != nil {
		return nil, err
	}
	// Callers own what they get: the cached slice is never handed out.
	return slices.Clone(offers), nil
}

func (c *CatalogCache) firmware(ctx context.Context, id domain.UUID) (domain.Firmware, error) {
	if id.IsZero() {
		return c.firmwares.Get(ctx, id) // not found, without a query
	}
	return lookup(ctx, c, "firmware", id.String(), func() map[string]domain.Firmware { return c.fws }, maxCachedFirmwares,
		func(ctx context.Context) (domain.Firmware, error) { return c.firmwares.Get(ctx, id) })
}

func (c *CatalogCache) rollout(ctx context.Context, id domain.UUID) (domain.Rollout, error) {
	if id.IsZero() {
		return c.rollouts.Get(ctx, id) // not found, without a query
	}
	return lookup(ctx, c, "rollout", id.String(), func() map[string]domain.Rollout { return c.ros }, maxCachedRollouts,
		func(ctx context.Context) (domain.Rollout, error) { return c.rollouts.Get(ctx, id) })
}

// CachedFirmwares is the FirmwareRepository in front of a CatalogCache:
// Get is cached, List and writes go to the database (writes invalidate).
type CachedFirmwares struct{ c *CatalogCache }

var _ ports.FirmwareRepository = (*CachedFirmwares)(nil)

// Create stores a new firmware.
func (f *CachedFirmwares) Create(ctx context.Context, fw domain.Firmware, rec domain.AuditRecord) error {
	err := f.c.firmwares.Create(ctx, fw, rec)
	f.c.invalidate(fw.Model())
	return err
}

// Get loads a firmware by id, from memory when the cache is live.
func (f *CachedFirmwares) Get(ctx context.Context, id domain.UUID) (domain.Firmware, error) {
	return f.c.firmware(ctx, id)
}

// List returns a model's firmware, from the database (an operator's call).
func (f *CachedFirmwares) List(ctx context.Context, model string) ([]domain.Firmware, error) {
	return f.c.firmwares.List(ctx, model)
}

// Update changes a firmware (revokes it); this replica forgets what it
// cached at once, the others when the notification reaches them.
func (f *CachedFirmwares) Update(ctx context.Context, id domain.UUID, fn func(*domain.Firmware) error, audit ports.Audit[domain.Firmware]) (domain.Firmware, error) {
	out, err := f.c.firmwares.Update(ctx, id, fn, audit)
	model := "*"
	if err == nil {
		model = out.Model()
	}
	f.c.invalidate(model)
	return out, err
}

// CachedRollouts is the RolloutRepository in front of a CatalogCache:
// Offers and Get are cached, writes go to the database (and invalidate).
type CachedRollouts struct{ c *CatalogCache }

var _ ports.RolloutRepository = (*CachedRollouts)(nil)

// Create stores a new rollout.
func (r *CachedRollouts) Create(ctx context.Context, ro domain.Rollout, rec domain.AuditRecord) error {
	err := r.c.rollouts.Create(ctx, ro, rec)
	r.c.invalidate("*")
	return err
}

// Get loads a rollout by id, from memory when the cache is live.
func (r *CachedRollouts) Get(ctx context.Context, id domain.UUID) (domain.Rollout, error) {
	return r.c.rollout(ctx, id)
}

// ByRequestKey loads the rollout of an Idempotency-Key from the database:
// a retry must see the start it repeats, however fresh.
func (r *CachedRollouts) ByRequestKey(ctx context.Context, key string) (domain.Rollout, error) {
	return r.c.rollouts.ByRequestKey(ctx, key)
}

// Offers returns a model's offers, from memory when the cache is live.
func (r *CachedRollouts) Offers(ctx context.Context, model string) ([]domain.Offer, error) {
	return r.c.offersOf(ctx, model)
}

// ListenerApplicationName names the cache's listener connection in
// pg_stat_activity (unless the URL names one).
const ListenerApplicationName = "otad-catalog-listener"

// listenerDSN is u with ListenerApplicationName unless u names one.
func listenerDSN(u DatabaseURL) string {
	s := string(u)
	if p, err := url.Parse(s); err == nil && (p.Scheme == "postgres" || p.Scheme == "postgresql") {
		q := p.Query()
		if q.Get("application_name") == "" {
			q.Set("application_name", ListenerApplicationName)
			p.RawQuery = q.Encode()
		}
		return p.String()
	}
	if strings.Contains(s, "application_name=") {
		return s
	}
	return strings.TrimSpace(s + " application_name=" + ListenerApplicationName)
}

// idleDialer dials the listener's connection with a read deadline renewed
// on every read: a connection on which nothing arrives for idle (the pings
// answer every PingInterval) is closed, and the listener reconnects,
// instead of waiting on a peer that silently went away.
type idleDialer struct{ idle time.Duration }

// Dial connects with the idle read deadline armed.
func (d idleDialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

// DialTimeout is Dial bounded by timeout.
func (d idleDialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, network, address)
}

// DialContext is Dial bounded by ctx.
func (d idleDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	conn, err := (&net.Dialer{KeepAlive: 5 * time.Second}).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &idleConn{Conn: conn, idle: d.idle}, nil
}

type idleConn struct {
	net.Conn
	idle time.Duration
}

// Read fails when nothing arrives for the idle period.
func (c *idleConn) Read(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}
