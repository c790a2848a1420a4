package postgres_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/tests/testenv"
)

// walBytes runs fn and returns the WAL bytes the server wrote meanwhile
// (pg_current_wal_lsn() before and after; a private server, so nothing
// else writes).
func walBytes(t *testing.T, db *sqlx.DB, checkpoint bool, fn func()) int64 {
	t.Helper()
	if checkpoint {
		if _, err := db.Exec(`CHECKPOINT`); err != nil {
			t.Fatal(err)
		}
	}
	var start string
	if err := db.Get(&start, `SELECT pg_current_wal_lsn()::text`); err != nil {
		t.Fatal(err)
	}
	fn()
	var n int64
	if err := db.Get(&n, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, start); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWALPerThousandPolls measures, on a private Postgres server
// (testenv.StartPrivatePrimary), the WAL that 1,000 polls of distinct
// devices write through the write-behind, with every check written (as
// before OTA_LAST_SEEN_RESOLUTION) and with the default resolution, and
// asserts the reduction; it logs the figures docs/SCALING.md quotes, with
// the WAL of a task creation and of an event for the capacity model:
//
//	go test ./adapters/postgres -run TestWALPerThousandPolls -v
func TestWALPerThousandPolls(t *testing.T) {
	pg := testenv.StartPrivatePrimary(t)
	db := pg.Open(t, pg.PrimaryURL)
	db.SetMaxOpenConns(8)
	ctx := context.Background()
	repos, err := postgres.NewRepositories(db)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: db, devices: repos.Devices, firmwares: repos.Firmwares, rollouts: repos.Rollouts, tasks: repos.Tasks,
		now: time.Now().UTC().Truncate(time.Microsecond)}
	const n = 1000
	seenAt := e.now.Add(-time.Minute)
	if _, err := db.Exec(`INSERT INTO devices (device_id, model, current_version, token_hash, last_seen_at, created_at)
		SELECT 'wal-' || i, 'm', '1.0.0', sha256(('wal-' || i)::bytea), $1, $1 FROM generate_series(1, $2) i`, seenAt, n); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`VACUUM ANALYZE devices`); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "wal-" + strconv.Itoa(i+1)
	}
	v1 := domain.MustParseVersion("1.0.0")
	polls := func(resolution time.Duration, at time.Time) (written int64) {
		w, cleanup, err := postgres.NewWriteBehindDevices(repos.Devices, postgres.WriteBehindConfig{Resolution: resolution}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cleanup()
		for _, id := range ids {
			view, err := repos.Tasks.CheckViewOf(ctx, asDeviceID(id))
			if err != nil {
				t.Fatal(err)
			}
			must(t, w.RecordSeen(ctx, view.Device, v1, at))
		}
		must(t, w.Flush(ctx))
		return w.Stats().Written.Load()
	}
	var wroteEvery, wroteRes int64
	everyCold := walBytes(t, db, true, func() { wroteEvery = polls(postgres.SeenEveryCheck, e.now) })
	everyWarm := walBytes(t, db, false, func() { polls(postgres.SeenEveryCheck, e.now.Add(time.Second)) })
	// The dead row versions the runs above left are pruned by the next
	// reads of their pages (which writes WAL); vacuum them first, so the
	// figure below is the polls' own.
	if _, err := db.Exec(`VACUUM devices`); err != nil {
		t.Fatal(err)
	}
	resCold := walBytes(t, db, true, func() { wroteRes = polls(postgres.DefaultSeenResolution, e.now.Add(2*time.Second)) })
	readsOnly := walBytes(t, db, false, func() {
		for _, id := range ids {
			if _, err := repos.Tasks.CheckViewOf(ctx, asDeviceID(id)); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Logf("WAL per %d polls of distinct devices, each written (before): %d bytes after a checkpoint (%d rows), %d bytes warm",
		n, everyCold, wroteEvery, everyWarm)
	t.Logf("WAL per %d polls, same version within OTA_LAST_SEEN_RESOLUTION=%v (after): %d bytes after a checkpoint (%d rows)",
		n, postgres.DefaultSeenResolution, resCold, wroteRes)
	t.Logf("WAL of %d check reads alone: %d bytes", n, readsOnly)
	if wroteEvery != n || wroteRes != 0 {
		t.Fatalf("rows written: %d with every check, %d within the resolution; want %d and 0", wroteEvery, wroteRes, n)
	}
	if resCold*20 > everyCold || resCold*20 > everyWarm {
		t.Errorf("WAL within the resolution %d bytes, every check %d (cold) / %d (warm): want at least 20× less", resCold, everyCold, everyWarm)
	}

	// For the capacity model: a task creation and an event.
	const tasks = 200
	o := e.offer(t, "m", "2.0.0")
	created := make([]domain.Task, 0, tasks)
	creation := walBytes(t, db, false, func() {
		for _, id := range ids[:tasks] {
			created = append(created, e.createTask(t, id, o))
		}
	})
	p := 10
	ev := try(domain.NewEvent("progress-10", "downloading", &p, "", "")).must(t)
	event := walBytes(t, db, false, func() {
		for _, tk := range created {
			if _, err := application.ApplyEvent(ctx, repos.Tasks, tk.ID(), ev, func(t *domain.Task, prior *domain.Event) (bool, error) {
				return t.ApplyEvent(ev, prior, e.now.Add(time.Second))
			}, nil); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Logf("WAL per task creation: %s; per progress event: %s (warm, no checkpoint between)",
		perOp(creation, tasks), perOp(event, tasks))
}

func perOp(bytes int64, n int) string { return fmt.Sprintf("%d bytes", bytes/int64(n)) }
