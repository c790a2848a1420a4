package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
)

// replica is one service instance's catalog cache: its own pool and
// listener on the test's database.
type replica struct {
	cache     *postgres.CatalogCache
	firmwares *postgres.CachedFirmwares
	rollouts  *postgres.CachedRollouts
	tasks     *postgres.TaskRepository // its rollout judgements invalidate cache
}

func (e *env) replica(t *testing.T, cfg postgres.CatalogCacheConfig) replica {
	t.Helper()
	db, err := sqlx.Open("postgres", e.url)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(4)
	t.Cleanup(func() { _ = db.Close() })
	repos, err := postgres.NewRepositories(db)
	if err != nil {
		t.Fatal(err)
	}
	cfg.URL = postgres.DatabaseURL(e.url)
	c, cleanup, err := postgres.NewCatalogCache(repos.Firmwares, repos.Rollouts, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	if !c.Live() {
		t.Fatal("a new cache is not live")
	}
	tasks, err := postgres.NewServingTaskRepository(db, nil, c)
	if err != nil {
		t.Fatal(err)
	}
	return replica{cache: c, firmwares: c.Firmwares(), rollouts: c.Rollouts(), tasks: tasks}
}

// offered lists the firmware ids a replica offers for a model.
func (r replica) offered(t *testing.T, model string) []string {
	t.Helper()
	offers, err := r.rollouts.Offers(context.Background(), model)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, o := range offers {
		ids = append(ids, o.Firmware.ID().String())
	}
	return ids
}

// within polls cond until it holds or d passes, and returns how long it took.
func within(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func equalIDs(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// An operator's change through one replica reaches every other replica's
// cache within a second: new firmware and rollouts appear, a revoked
// firmware and a paused or cancelled rollout stop being offered.
func TestCatalogCacheInvalidatesOtherReplicas(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.replica(t, postgres.CatalogCacheConfig{}), e.replica(t, postgres.CatalogCacheConfig{})
	const model = "cam-cache"

	if got := b.offered(t, model); len(got) != 0 {
		t.Fatalf("offers before publishing: %v", got)
	}
	hits := b.cache.Stats().Hits.Load()
	b.offered(t, model)
	if b.cache.Stats().Hits.Load() != hits+1 {
		t.Fatal("the second read of a model's offers was not answered from memory")
	}

	// Publish through a.
	fw, err := domain.NewFirmware(asUUID(newID()), domain.FirmwareSpec{Model: model, Version: "2.0.0",
		URL: "https://fw.example/2.bin", SizeBytes: 10, SHA256: sha(1)}, e.now)
	must(t, err)
	must(t, a.firmwares.Create(ctx, fw, domain.AuditRecord{}))
	ro, err := domain.NewRollout(asUUID(newID()), fw, domain.RolloutSpec{Percentage: 100}, e.now)
	must(t, err)
	must(t, a.rollouts.Create(ctx, ro, domain.AuditRecord{}))
	d := within(t, time.Second, "b sees the new rollout", func() bool { return equalIDs(b.offered(t, model), fw.ID().String()) })
	t.Logf("published: b saw it after %v", d)
	// b caches the firmware and the rollout by id.
	got, err := b.firmwares.Get(ctx, fw.ID())
	if err != nil || got.Revoked() {
		t.Fatalf("b firmware: %v %v", got.Status(), err)
	}
	if r, err := b.rollouts.Get(ctx, ro.ID()); err != nil || r.Status() != domain.RolloutActive {
		t.Fatalf("b rollout: %v %v", r.Status(), err)
	}

	// Pause through a: b stops offering it, and reads it paused.
	_, err = application.UpdateRollout(ctx, a.tasks, ro.ID(), func(r *domain.Rollout, _ domain.Firmware) error {
		return r.ChangeStatus(domain.RolloutPaused, fw, e.now)
	}, nil)
	must(t, err)
	d = within(t, time.Second, "b stops offering a paused rollout", func() bool {
		r, err := b.rollouts.Get(ctx, ro.ID())
		return len(b.offered(t, model)) == 0 && err == nil && r.Status() == domain.RolloutPaused
	})
	t.Logf("paused: b saw it after %v", d)
	_, err = application.UpdateRollout(ctx, a.tasks, ro.ID(), func(r *domain.Rollout, _ domain.Firmware) error {
		return r.ChangeStatus(domain.RolloutActive, fw, e.now)
	}, nil)
	must(t, err)
	within(t, time.Second, "b offers a resumed rollout", func() bool { return equalIDs(b.offered(t, model), fw.ID().String()) })

	// Revoke through a: b stops offering it, and reads it revoked.
	_, err = a.firmwares.Update(ctx, fw.ID(), func(f *domain.Firmware) error { f.Revoke(e.now); return nil }, nil)
	must(t, err)
	d = within(t, time.Second, "b stops offering a revoked firmware", func() bool {
		f, err := b.firmwares.Get(ctx, fw.ID())
		return len(b.offered(t, model)) == 0 && err == nil && f.Revoked()
	})
	t.Logf("revoked: b saw it after %v", d)

	// Cancel through a.
	fw2, err := domain.NewFirmware(asUUID(newID()), domain.FirmwareSpec{Model: model, Version: "2.1.0",
		URL: "https://fw.example/21.bin", SizeBytes: 10, SHA256: sha(2)}, e.now)
	must(t, err)
	must(t, a.firmwares.Create(ctx, fw2, domain.AuditRecord{}))
	ro2, err := domain.NewRollout(asUUID(newID()), fw2, domain.RolloutSpec{Percentage: 100}, e.now)
	must(t, err)
	must(t, a.rollouts.Create(ctx, ro2, domain.AuditRecord{}))
	within(t, time.Second, "b sees the second rollout", func() bool { return equalIDs(b.offered(t, model), fw2.ID().String()) })
	_, err = application.UpdateRollout(ctx, a.tasks, ro2.ID(), func(r *domain.Rollout, _ domain.Firmware) error {
		return r.ChangeStatus(domain.RolloutCancelled, fw2, e.now)
	}, nil)
	must(t, err)
	d = within(t, time.Second, "b stops offering a cancelled rollout", func() bool { return len(b.offered(t, model)) == 0 })
	t.Logf("cancelled: b saw it after %v", d)

	// a reads its own writes at once.
	if r, err := a.rollouts.Get(ctx, ro2.ID()); err != nil || r.Status() != domain.RolloutCancelled {
		t.Fatalf("a reads its own cancel: %v %v", r.Status(), err)
	}
	if _, err := b.firmwares.Get(ctx, asUUID(newID())); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown firmware: %v", err)
	}
	if _, err := b.rollouts.Get(ctx, asUUID("not-a-uuid")); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("bad rollout id: %v", err)
	}
}

// A notification lost while the listener was disconnected cannot leave a
// replica serving what it replaced: the cache reads through while the
// listener is down and forgets everything when it reconnects.
func TestCatalogCacheForgetsEverythingOnReconnect(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.replica(t, postgres.CatalogCacheConfig{})
	o := e.offer(t, "cam-reconnect", "3.0.0")
	within(t, time.Second, "b sees the offer", func() bool { return equalIDs(b.offered(t, "cam-reconnect"), o.Firmware.ID().String()) })
	if _, err := b.rollouts.Get(ctx, o.Rollout.ID()); err != nil {
		t.Fatal(err)
	}

	// Cut b's listener, then change the catalog without telling anyone:
	// a plain UPDATE, no NOTIFY.
	var killed int
	if err := e.db.Get(&killed, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1`, postgres.ListenerApplicationName); err != nil || killed != 1 {
		t.Fatalf("terminating the listener: %d %v", killed, err)
	}
	if _, err := e.db.Exec(`UPDATE rollouts SET status = 'paused', paused_reason = 'manual' WHERE id = $1`, o.Rollout.ID().String()); err != nil {
		t.Fatal(err)
	}
	d := within(t, 1500*time.Millisecond, "b stops offering the silently paused rollout", func() bool {
		r, err := b.rollouts.Get(ctx, o.Rollout.ID())
		return len(b.offered(t, "cam-reconnect")) == 0 && err == nil && r.Status() == domain.RolloutPaused
	})
	t.Logf("b saw the unannounced change after %v (listener down: reading through)", d)
	within(t, 5*time.Second, "the listener reconnects", b.cache.Live)
	if b.cache.Stats().Bypassed.Load() == 0 && b.cache.Stats().Invalidations.Load() == 0 {
		t.Error("neither bypassed nor invalidated while the listener was down")
	}
	// Live again: changes are heard again.
	if _, err := e.db.Exec(`UPDATE rollouts SET status = 'active', paused_reason = NULL WHERE id = $1`, o.Rollout.ID().String()); err != nil {
		t.Fatal(err)
	}
	b.offered(t, "cam-reconnect") // cached: still none
	if _, err := e.db.Exec(`SELECT pg_notify('ota_catalog', 'cam-reconnect')`); err != nil {
		t.Fatal(err)
	}
	within(t, time.Second, "b hears the notification after reconnecting", func() bool {
		return equalIDs(b.offered(t, "cam-reconnect"), o.Firmware.ID().String())
	})
}

// The periodic refresh catches what no notification announced.
func TestCatalogCacheRefresh(t *testing.T) {
	e := newEnv(t)
	b := e.replica(t, postgres.CatalogCacheConfig{})
	o := e.offer(t, "cam-refresh", "4.0.0")
	within(t, time.Second, "b sees the offer", func() bool { return equalIDs(b.offered(t, "cam-refresh"), o.Firmware.ID().String()) })
	// Let the publication's own notifications land, then cache the offer.
	time.Sleep(200 * time.Millisecond)
	b.offered(t, "cam-refresh")
	if _, err := e.db.Exec(`UPDATE firmwares SET status = 'revoked' WHERE id = $1`, o.Firmware.ID().String()); err != nil {
		t.Fatal(err)
	}
	if got := b.offered(t, "cam-refresh"); !equalIDs(got, o.Firmware.ID().String()) {
		t.Fatalf("an unannounced change reached the cache: %v", got)
	}
	must(t, b.cache.Refresh(context.Background()))
	if got := b.offered(t, "cam-refresh"); len(got) != 0 {
		t.Fatalf("after Refresh: %v", got)
	}
}

// A cache whose listener cannot prove it is alive reads through.
func TestCatalogCacheReadsThroughWhenNotLive(t *testing.T) {
	e := newEnv(t)
	b := e.replica(t, postgres.CatalogCacheConfig{})
	b.cache.Close()
	if b.cache.Live() {
		t.Fatal("a closed cache is live")
	}
	o := e.offer(t, "cam-closed", "5.0.0")
	if got := b.offered(t, "cam-closed"); !equalIDs(got, o.Firmware.ID().String()) {
		t.Fatalf("closed cache: %v", got)
	}
	if b.cache.Stats().Bypassed.Load() == 0 {
		t.Fatal("not counted as bypassed")
	}
}

// A final event or a check that ends a task, and so pauses its rollout
// (or opens its next stage), is read on the same instance at once: the
// instance's cache is told after the commit, not only by the NOTIFY,
// which reaches its listener later (here never: the listener is deaf).
func TestCatalogCacheSeesItsOwnRolloutJudgementsAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.replica(t, postgres.CatalogCacheConfig{})
	must(t, b.cache.Deafen())
	pauses := func(fw domain.Firmware) application.RolloutEvaluation {
		return func(r *domain.Rollout, _ func(time.Time) (domain.TaskStats, error)) (bool, error) {
			return true, r.ChangeStatus(domain.RolloutPaused, fw, e.now.Add(time.Second))
		}
	}
	// cached reads o's offer and rollout through b twice, the second time
	// from memory.
	cached := func(t *testing.T, model string, o domain.Offer) {
		t.Helper()
		for range 2 {
			if got := b.offered(t, model); !equalIDs(got, o.Firmware.ID().String()) {
				t.Fatalf("b offers %v, want %s", got, o.Firmware.ID())
			}
			if r, err := b.rollouts.Get(ctx, o.Rollout.ID()); err != nil || r.Status() != domain.RolloutActive {
				t.Fatalf("b rollout: %v %v", r.Status(), err)
			}
		}
		if !b.cache.Live() {
			t.Fatal("the cache is not live: reads went to the database")
		}
	}
	// seesPaused: the very next reads through b see the rollout paused.
	seesPaused := func(t *testing.T, model string, o domain.Offer) {
		t.Helper()
		hits := b.cache.Stats().Hits.Load()
		if got := b.offered(t, model); len(got) != 0 {
			t.Errorf("right after the judgement that paused it, b still offers %v", got)
		}
		if r, err := b.rollouts.Get(ctx, o.Rollout.ID()); err != nil || r.Status() != domain.RolloutPaused {
			t.Errorf("right after the judgement that paused it, b reads the rollout %v (%v)", r.Status(), err)
		}
		if !b.cache.Live() || b.cache.Stats().Hits.Load() != hits {
			t.Fatalf("the reads were not refills of a live cache (live %v, %d hits)", b.cache.Live(), b.cache.Stats().Hits.Load()-hits)
		}
	}

	// judged publishes a firmware with a 100% rollout that its tasks'
	// ends are judged against (a failure threshold).
	judged := func(t *testing.T, model string) domain.Offer {
		t.Helper()
		fw := e.firmware(t, model, "6.0.0")
		threshold := 50
		r, err := domain.NewRollout(asUUID(newID()), fw, domain.RolloutSpec{Percentage: 100, FailureThresholdPercent: &threshold}, e.now)
		must(t, err)
		must(t, e.rollouts.Create(ctx, r, domain.AuditRecord{}))
		return domain.Offer{Firmware: fw, Rollout: r}
	}

	t.Run("final event", func(t *testing.T) {
		o := judged(t, "cam-own-event")
		e.device(t, "own-event-1", "cam-own-event")
		tk := e.createTask(t, "own-event-1", o)
		cached(t, "cam-own-event", o)
		ev, err := domain.NewEvent("end-"+tk.ID().String(), "failed", nil, "", "")
		must(t, err)
		_, err = application.ApplyEvent(ctx, b.tasks, tk.ID(), ev, func(tk *domain.Task, prior *domain.Event) (bool, error) {
			return tk.ApplyEvent(ev, prior, e.now.Add(time.Second))
		}, pauses(o.Firmware))
		must(t, err)
		seesPaused(t, "cam-own-event", o)
	})
	t.Run("check ending the task", func(t *testing.T) {
		o := judged(t, "cam-own-check")
		e.device(t, "own-check-1", "cam-own-check")
		tk := e.createTask(t, "own-check-1", o)
		cached(t, "cam-own-check", o)
		_, _, err := application.ReplaceActive(ctx, b.tasks, tk.DeviceID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			return nil, active.Succeed(e.now.Add(time.Second))
		}), pauses(o.Firmware))
		must(t, err)
		seesPaused(t, "cam-own-check", o)
	})
}

// A refresh that began reading before an invalidation and finished after
// it is not kept: the invalidation's change may be missing from what it
// read. Here the refresh's query waits on a lock while the invalidation
// lands; the next read is a fill, not a hit.
func TestCatalogCacheDropsARefreshThatRacedAnInvalidation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.replica(t, postgres.CatalogCacheConfig{})
	must(t, b.cache.Deafen()) // the test's invalidation is the only one
	o := e.offer(t, "cam-refresh-race", "7.0.0")

	tx, err := e.db.BeginTxx(ctx, nil)
	must(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, `LOCK TABLE rollouts IN ACCESS EXCLUSIVE MODE`)
	must(t, err)
	refreshed := make(chan error, 1)
	go func() { refreshed <- b.cache.Refresh(ctx) }()
	within(t, 5*time.Second, "the refresh's query to wait on the lock", func() bool {
		var n int
		// The query's head: pg_stat_activity keeps only its first
		// track_activity_query_size bytes (1 kB by default), and the
		// offers' column list alone is nearly that.
		_ = e.db.Get(&n, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE 'SELECT f.id AS "f.id"%' AND pid <> pg_backend_pid()`)
		return n == 1
	})
	b.cache.Invalidate("cam-refresh-race")
	must(t, tx.Rollback())
	must(t, <-refreshed)

	hits, misses := b.cache.Stats().Hits.Load(), b.cache.Stats().Misses.Load()
	if got := b.offered(t, "cam-refresh-race"); !equalIDs(got, o.Firmware.ID().String()) {
		t.Fatalf("b offers %v", got)
	}
	if !b.cache.Live() || b.cache.Stats().Hits.Load() != hits || b.cache.Stats().Misses.Load() != misses+1 {
		t.Fatalf("the read after a refresh that raced an invalidation was answered from what the refresh stored (live %v, %d hits, %d misses)",
			b.cache.Live(), b.cache.Stats().Hits.Load()-hits, b.cache.Stats().Misses.Load()-misses)
	}
}

func newID() string { return uuid.NewString() }

// sha is a well-formed SHA-256 made of one repeated byte.
func sha(b byte) string { return strings.Repeat(fmt.Sprintf("%02x", b), 32) }
