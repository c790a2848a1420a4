package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/bootstrap"
	"github.com/ai-device/ota/domain"
)

func version(t *testing.T, s string) domain.Version {
	t.Helper()
	v, err := domain.ParseVersion("current_version", s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// stored reads a device's check record as the database has it.
func (e *env) stored(t *testing.T, id string) (string, time.Time) {
	t.Helper()
	var v *string
	var at *time.Time
	if err := e.db.QueryRow(`SELECT current_version, last_seen_at FROM devices WHERE device_id = $1`, id).Scan(&v, &at); err != nil {
		t.Fatal(err)
	}
	var vs string
	var ts time.Time
	if v != nil {
		vs = *v
	}
	if at != nil {
		ts = at.UTC()
	}
	return vs, ts
}

func (e *env) writeBehind(t *testing.T, cfg postgres.WriteBehindConfig) *postgres.WriteBehindDevices {
	t.Helper()
	w, cleanup, err := postgres.NewWriteBehindDevices(e.devices, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return w
}

func TestWriteBehindIsVisibleWithinASecond(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.device(t, "wb-1", "m")
	w := e.writeBehind(t, postgres.WriteBehindConfig{})
	at := e.now.Add(time.Minute)
	start := time.Now()
	if err := w.RecordSeen(ctx, unseen("wb-1"), version(t, "1.5.0"), at); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("RecordSeen took %v: it must not wait for the database", d)
	}
	// This replica shows it at once.
	if d, err := w.Get(ctx, asDeviceID("wb-1")); err != nil || d.CurrentVersion().String() != "1.5.0" || !d.LastSeenAt().Equal(at) {
		t.Fatalf("Get before the flush: %v %v %v", d.CurrentVersion(), d.LastSeenAt(), err)
	}
	// The database within a second.
	deadline := time.Now().Add(time.Second)
	for {
		v, seen := e.stored(t, "wb-1")
		if v == "1.5.0" && seen.Equal(at) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not stored within 1s: %q %v", v, seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if w.Stats().Batches.Load() == 0 || w.Stats().Written.Load() != 1 {
		t.Errorf("stats: %d batches, %d written", w.Stats().Batches.Load(), w.Stats().Written.Load())
	}
}

func TestWriteBehindFlushesOnShutdown(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, id := range []string{"sd-1", "sd-2", "sd-3"} {
		e.device(t, id, "m")
	}
	// No periodic flush during the test: only Flush and Close write.
	w, cleanup, err := postgres.NewWriteBehindDevices(e.devices, postgres.WriteBehindConfig{Interval: time.Hour, BatchSize: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	at := e.now.Add(time.Hour)
	// BatchSize 2 kicks a flush at the second device; Flush takes the rest.
	for _, id := range []string{"sd-1", "sd-2", "sd-3"} {
		if err := w.RecordSeen(ctx, unseen(id), version(t, "2.0.0"), at); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sd-1", "sd-2", "sd-3"} {
		if v, seen := e.stored(t, id); v != "2.0.0" || !seen.Equal(at) {
			t.Errorf("%s after Flush: %q %v", id, v, seen)
		}
	}
	// Close flushes what came after, and later checks are written at once.
	if err := w.RecordSeen(ctx, unseen("sd-1"), version(t, "2.1.0"), at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if v, _ := e.stored(t, "sd-1"); v != "2.1.0" {
		t.Errorf("after Close: %q", v)
	}
	if err := w.RecordSeen(ctx, unseen("sd-2"), version(t, "2.2.0"), at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if v, _ := e.stored(t, "sd-2"); v != "2.2.0" {
		t.Errorf("RecordSeen after Close: %q", v)
	}
	w.Close() // twice is fine
}

// TestWriteBehindFlushesAFullBatchAtOnce holds the batch size to its
// promise: a full batch is written without waiting for the interval (the
// kick of the flush loop), which no other test sees, since the interval or
// an explicit Flush writes it anyway.
func TestWriteBehindFlushesAFullBatchAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, id := range []string{"fb-1", "fb-2"} {
		e.device(t, id, "m")
	}
	w := e.writeBehind(t, postgres.WriteBehindConfig{Interval: time.Hour, BatchSize: 2})
	at := e.now.Add(time.Hour)
	for _, id := range []string{"fb-1", "fb-2"} {
		if err := w.RecordSeen(ctx, unseen(id), version(t, "2.0.0"), at); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.Stats().Written.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("a full batch not written within 5s of an hour's interval: %d written", w.Stats().Written.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range []string{"fb-1", "fb-2"} {
		if v, seen := e.stored(t, id); v != "2.0.0" || !seen.Equal(at) {
			t.Errorf("%s after the batch filled: %q %v", id, v, seen)
		}
	}
}

func TestWriteBehindKeepsTheNewestReport(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.device(t, "ooo-1", "m")
	w := e.writeBehind(t, postgres.WriteBehindConfig{Interval: time.Hour})
	t1, t2 := e.now.Add(time.Minute), e.now.Add(2*time.Minute)

	// Within one batch: the later report wins, whatever the arrival order.
	must(t, w.RecordSeen(ctx, unseen("ooo-1"), version(t, "3.0.0"), t2))
	must(t, w.RecordSeen(ctx, unseen("ooo-1"), version(t, "2.0.0"), t1))
	must(t, w.Flush(ctx))
	if v, seen := e.stored(t, "ooo-1"); v != "3.0.0" || !seen.Equal(t2) {
		t.Fatalf("one batch: %q %v, want 3.0.0 at %v", v, seen, t2)
	}
	// Across batches (another replica's late flush): the database keeps it.
	must(t, w.RecordSeen(ctx, unseen("ooo-1"), version(t, "2.0.0"), t1))
	must(t, w.Flush(ctx))
	if v, seen := e.stored(t, "ooo-1"); v != "3.0.0" || !seen.Equal(t2) {
		t.Fatalf("late batch: %q %v, want 3.0.0 at %v", v, seen, t2)
	}
	// The same through the batch statement directly, with an unknown
	// device (skipped) and a device that never reported a version.
	n, err := e.devices.RecordSeenBatch(ctx, []postgres.SeenReport{
		{DeviceID: "ooo-1", Version: version(t, "1.0.0"), At: t1},
		{DeviceID: "nobody", Version: version(t, "1.0.0"), At: t1},
	})
	if err != nil || n != 1 {
		t.Fatalf("batch: %d %v", n, err)
	}
	if v, _ := e.stored(t, "ooo-1"); v != "3.0.0" {
		t.Fatalf("batch went backwards: %q", v)
	}
	if _, err := e.devices.RecordSeenBatch(ctx, []postgres.SeenReport{
		{DeviceID: "ooo-1", At: t2}, {DeviceID: "ooo-1", At: t1},
	}); err == nil {
		t.Fatal("a device twice in one batch was accepted")
	}
	// (Read at 3.0.0: a report of no version over the version read is a
	// change; one that repeats what was read moves last_seen_at only.)
	read := domain.RehydrateDevice("ooo-1", "m", version(t, "3.0.0"), domain.TokenHash{}, time.Time{}, time.Time{})
	must(t, w.RecordSeen(ctx, read, domain.Version{}, t2.Add(time.Second)))
	must(t, w.Flush(ctx))
	if v, seen := e.stored(t, "ooo-1"); v != "" || !seen.Equal(t2.Add(time.Second)) {
		t.Fatalf("no version: %q %v", v, seen)
	}
}

func TestWriteBehindRetriesThenDrops(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.device(t, "rt-1", "m")
	e.device(t, "rt-2", "m")
	w := e.writeBehind(t, postgres.WriteBehindConfig{Interval: time.Hour, MaxRetries: 2, MaxPending: 2})
	must(t, w.RecordSeen(ctx, unseen("rt-1"), version(t, "1.1.0"), e.now.Add(time.Minute)))

	dead, cancel := context.WithCancel(ctx)
	cancel()
	// A failed flush keeps the report for the next one.
	if err := w.Flush(dead); err == nil {
		t.Fatal("flush on a cancelled context succeeded")
	}
	if w.Pending() != 1 || w.Stats().Failures.Load() == 0 {
		t.Fatalf("after one failure: %d pending, %d failures", w.Pending(), w.Stats().Failures.Load())
	}
	must(t, w.Flush(ctx))
	if v, _ := e.stored(t, "rt-1"); v != "1.1.0" {
		t.Fatalf("retried report not stored: %q", v)
	}

	// MaxRetries failures drop it, counted.
	must(t, w.RecordSeen(ctx, unseen("rt-1"), version(t, "1.2.0"), e.now.Add(2*time.Minute)))
	for w.Pending() > 0 {
		if err := w.Flush(dead); err == nil {
			t.Fatal("flush on a cancelled context succeeded")
		}
	}
	if got := w.Stats().Dropped.Load(); got != 1 {
		t.Fatalf("dropped %d, want 1", got)
	}
	// Beyond MaxPending devices, new devices' reports are dropped, not queued.
	must(t, w.RecordSeen(ctx, unseen("rt-1"), version(t, "1.3.0"), e.now.Add(3*time.Minute)))
	must(t, w.RecordSeen(ctx, unseen("rt-2"), version(t, "1.3.0"), e.now.Add(3*time.Minute)))
	must(t, w.RecordSeen(ctx, unseen("rt-3"), version(t, "1.3.0"), e.now.Add(3*time.Minute)))
	if w.Pending() != 2 || w.Stats().Dropped.Load() != 2 {
		t.Fatalf("over MaxPending: %d pending, %d dropped", w.Pending(), w.Stats().Dropped.Load())
	}
	// Ids are typed: the only impossible one a device can carry is the
	// zero id, refused without a queue entry.
	if err := w.RecordSeen(ctx, unseen(""), domain.Version{}, e.now); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("zero id: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// otad serve stores the checks still written behind when it stops, after
// requests drained and before the pool closes (bootstrap.NewPostgresApp
// registers the flush as a shutdown hook).
func TestServeFlushesChecksOnShutdown(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.device(t, "shut-1", "m")
	seen := e.writeBehind(t, postgres.WriteBehindConfig{Interval: time.Hour}) // only a flush writes
	catalog := e.replica(t, postgres.CatalogCacheConfig{}).cache
	app := bootstrap.NewPostgresApp(bootstrap.Config{}, echo.New(), slog.New(slog.DiscardHandler), bootstrap.NewMetrics(), seen, catalog, nil, nil, nil, nil)
	at := e.now.Add(time.Hour)
	must(t, seen.RecordSeen(ctx, unseen("shut-1"), version(t, "9.0.0"), at))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- app.Serve(sctx, ln) }()
	time.Sleep(50 * time.Millisecond)
	if v, _ := e.stored(t, "shut-1"); v == "9.0.0" {
		t.Fatal("stored before the shutdown: the test proves nothing")
	}
	stop()
	must(t, <-served)
	if v, seenAt := e.stored(t, "shut-1"); v != "9.0.0" || !seenAt.Equal(at) {
		t.Fatalf("after shutdown: %q %v", v, seenAt)
	}
}

// A database too slow to answer in time is not refusing the reports: they
// wait for it however many flushes time out, and are stored once it answers.
func TestWriteBehindWaitsOutASlowDatabase(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.device(t, "slow-1", "m")
	w := e.writeBehind(t, postgres.WriteBehindConfig{Interval: time.Hour, MaxRetries: 2, MaxPending: 10})
	must(t, w.RecordSeen(ctx, unseen("slow-1"), version(t, "1.4.0"), e.now.Add(time.Minute)))
	late, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	for i := 0; i < 5; i++ {
		if err := w.Flush(late); err == nil {
			t.Fatal("flush past its deadline succeeded")
		}
	}
	if w.Pending() != 1 || w.Stats().Dropped.Load() != 0 {
		t.Fatalf("after timeouts: %d pending, %d dropped", w.Pending(), w.Stats().Dropped.Load())
	}
	must(t, w.Flush(ctx))
	if v, _ := e.stored(t, "slow-1"); v != "1.4.0" {
		t.Fatalf("report not stored after the database answered: %q", v)
	}
}

// unseen is a device by id only, never seen: the write-behind has no
// reason to skip a check of it.
func unseen(id string) domain.Device {
	return domain.RehydrateDevice(id, "m", domain.Version{}, domain.TokenHash{}, time.Time{}, time.Time{})
}

// TestWriteBehindWritesNothingForUnchangedPollsWithinTheResolution: polls
// read the device as a check does (CheckViewOf, the check's one read) and
// record it; once a device's last_seen_at is stored, 1,000 more polls
// reporting the same version within the resolution write no row, a new
// version is written at once, and a poll a resolution later is written.
func TestWriteBehindWritesNothingForUnchangedPollsWithinTheResolution(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const devices, rounds, resolution = 100, 10, 5 * time.Minute
	ids := make([]string, devices)
	for i := range ids {
		ids[i] = "res-" + strconv.Itoa(i)
		e.device(t, ids[i], "m")
	}
	w, cleanup, err := postgres.NewWriteBehindDevices(e.devices, postgres.WriteBehindConfig{Interval: time.Hour, Resolution: resolution}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	v1 := version(t, "1.0.0")
	poll := func(id string, v domain.Version, at time.Time) {
		t.Helper()
		view, err := e.tasks.CheckViewOf(ctx, asDeviceID(id))
		if err != nil {
			t.Fatal(err)
		}
		must(t, w.RecordSeen(ctx, view.Device, v, at))
	}
	first := e.now.Add(time.Minute)
	for _, id := range ids {
		poll(id, v1, first)
	}
	must(t, w.Flush(ctx))
	if n := w.Stats().Written.Load(); n != devices {
		t.Fatalf("first polls: %d rows written, want %d (a device never seen is always written)", n, devices)
	}
	for r := 1; r <= rounds; r++ {
		for _, id := range ids {
			poll(id, v1, first.Add(time.Duration(r)*resolution/(rounds+1)))
		}
	}
	must(t, w.Flush(ctx))
	if n, s := w.Stats().Written.Load(), w.Stats().Skipped.Load(); n != devices || s != devices*rounds {
		t.Errorf("%d unchanged polls within the resolution: %d rows written in all, %d skipped; want %d and %d",
			devices*rounds, n, s, devices, devices*rounds)
	}
	if v, at := e.stored(t, ids[0]); v != "1.0.0" || !at.Equal(first) {
		t.Errorf("stored %q at %v, want 1.0.0 at the first poll %v", v, at, first)
	}
	// A new version is written at once; a poll one resolution after the
	// stored last_seen_at is written too.
	poll(ids[0], version(t, "1.1.0"), first.Add(time.Second))
	poll(ids[1], v1, first.Add(resolution))
	must(t, w.Flush(ctx))
	if v, at := e.stored(t, ids[0]); v != "1.1.0" || !at.Equal(first.Add(time.Second)) {
		t.Errorf("a new version: stored %q at %v, want 1.1.0 at %v", v, at, first.Add(time.Second))
	}
	if _, at := e.stored(t, ids[1]); !at.Equal(first.Add(resolution)) {
		t.Errorf("a poll one resolution later: last_seen_at %v, want %v", at, first.Add(resolution))
	}
}

// TestWriteBehindKeepsAVersionReportedBackWhileAnotherWaits: a device
// reports 2.0.0 (noted, not yet flushed) and then its stored version
// 1.0.0 again within the resolution; the second report must replace the
// first, though on its own it would have been skipped.
func TestWriteBehindKeepsAVersionReportedBackWhileAnotherWaits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d := e.device(t, "back-1", "m")
	w, cleanup, err := postgres.NewWriteBehindDevices(e.devices, postgres.WriteBehindConfig{Interval: time.Hour, Resolution: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	stored := domain.RehydrateDevice(d.ID().String(), d.Model(), version(t, "1.0.0"), d.TokenHash(), e.now, d.CreatedAt())
	must(t, w.RecordSeen(ctx, stored, version(t, "2.0.0"), e.now.Add(time.Second)))
	must(t, w.RecordSeen(ctx, stored, version(t, "1.0.0"), e.now.Add(2*time.Second)))
	must(t, w.Flush(ctx))
	if v, at := e.stored(t, "back-1"); v != "1.0.0" || !at.Equal(e.now.Add(2*time.Second)) {
		t.Errorf("stored %q at %v, want 1.0.0 at %v", v, at, e.now.Add(2*time.Second))
	}
}
