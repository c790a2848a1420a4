package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/tests/testenv"
)

// BenchmarkFinalEvent measures one device's final event (succeeded) on a
// rollout with a failure threshold, whose transaction judges the rollout
// (event rule 5) on its counts, for rollouts of 1k and 100k tasks, and 1M
// with OTA_BENCH_1M=1 (seeding it takes about a minute). Each iteration
// ends another device's task; the rollout's tasks are seeded in SQL, one
// downloading task per device, and its counters recounted once, as
// migration 00110 backfills them.
//
//	OTA_TEST_DATABASE_URL=… [OTA_BENCH_1M=1] go test -run '^$' -bench 'BenchmarkFinalEvent/' -benchtime 200x ./adapters/postgres/
func BenchmarkFinalEvent(b *testing.B) {
	sizes := []int{1_000, 100_000}
	if os.Getenv("OTA_BENCH_1M") == "1" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			ctx := context.Background()
			tasks, ids := seedFinalEvents(b, n, b.N, true)
			ev, err := domain.NewEvent("done", "succeeded", nil, "", "")
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			// What the events use case judges for a rollout without stages.
			judge := func(r *domain.Rollout, stats func(time.Time) (domain.TaskStats, error)) (bool, error) {
				if !r.Evaluates() {
					return false, nil
				}
				total, err := stats(time.Time{})
				if err != nil {
					return false, err
				}
				return r.Evaluate(total, domain.TaskStats{}, now), nil
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := application.ApplyEvent(ctx, tasks, ids[i], ev, func(t *domain.Task, prior *domain.Event) (bool, error) {
					return t.ApplyEvent(ev, prior, now)
				}, judge); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// seedFinalEvents seeds a rollout (with a failure threshold, or none) of n
// devices, each with a downloading task, and its counters, as migration
// 00110 backfills them; it returns the task store and the first k tasks.
func seedFinalEvents(b *testing.B, n, k int, threshold bool) (*postgres.TaskRepository, []domain.UUID) {
	b.Helper()
	ctx := context.Background()
	db, _ := testenv.PostgresDB(b)
	rollout := uuid.NewString()
	var pct any
	if threshold {
		pct = 50
	}
	seed := []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO devices (device_id, model, current_version, token_hash, created_at)
			SELECT 'fe-' || lpad(i::text, 7, '0'), 'fe', '1.0.0', sha256(convert_to(i::text, 'UTF8')), now()
			FROM generate_series(0, $1 - 1) AS i`, []any{n}},
		{`INSERT INTO firmwares (id, model, version, version_key, url, size_bytes, sha256, status, created_at, updated_at)
			VALUES ('00000000-0000-4000-8000-0000000000fe', 'fe', '2.0.0', '2.0.0', 'https://firmware.example/fe.bin', 1,
				encode(sha256('fe'), 'hex'), 'released', now(), now())`, nil},
		{`INSERT INTO rollouts (id, firmware_id, percentage, failure_threshold_percent, min_sample, status, created_at, updated_at)
			VALUES ($1, '00000000-0000-4000-8000-0000000000fe', 100, $2, 20, 'active', now() - interval '1 day', now() - interval '1 day')`, []any{rollout, pct}},
		{`INSERT INTO tasks (id, device_id, firmware_id, rollout_id, status, progress, attempt, created_at, updated_at)
			SELECT gen_random_uuid(), 'fe-' || lpad(i::text, 7, '0'), '00000000-0000-4000-8000-0000000000fe', $1,
				'downloading', 50, 1, now() - interval '1 hour', now() - interval '1 hour'
			FROM generate_series(0, $2 - 1) AS i`, []any{rollout, n}},
		{`VACUUM ANALYZE tasks`, nil},
	}
	for _, st := range seed {
		if _, err := db.ExecContext(ctx, st.sql, st.args...); err != nil {
			b.Fatal(err)
		}
	}
	var counters bool
	if err := db.GetContext(ctx, &counters, `SELECT to_regclass('rollout_counters') IS NOT NULL`); err != nil {
		b.Fatal(err)
	}
	if counters {
		if _, err := db.ExecContext(ctx, `INSERT INTO rollout_counters (rollout_id, stage_started_at, status, shard, devices)
			SELECT $1, '0001-01-01 00:00:00+00', 'downloading', 0, $2`, rollout, n); err != nil {
			b.Fatal(err)
		}
	}
	var ids []domain.UUID
	rows, err := db.QueryContext(ctx, `SELECT id FROM tasks ORDER BY device_id LIMIT $1`, k)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, asUUID(id))
	}
	if err := rows.Close(); err != nil {
		b.Fatal(err)
	}
	if len(ids) < k {
		b.Skipf("%d iterations, %d tasks: use -benchtime Nx with N <= %d", k, n, n)
	}
	tasks, err := postgres.NewTaskRepository(db)
	if err != nil {
		b.Fatal(err)
	}
	return tasks, ids
}

// BenchmarkFinalEventsInParallel ends many devices' tasks of one rollout
// from parallel goroutines: "plain" without a judgement, what queues on
// the counter rows, which a count spreads over shards; "judged" on a
// rollout with a failure threshold the events never reach, judged as the
// events use case judges it, which locks the rollout's row only when the
// judgement would change it (event rule 5).
//
//	go test -run '^$' -bench BenchmarkFinalEventsInParallel -benchtime 2000x -cpu 8 ./adapters/postgres/
func BenchmarkFinalEventsInParallel(b *testing.B) {
	for _, judged := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "judged"}[judged]
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			tasks, ids := seedFinalEvents(b, 10_000, b.N, judged)
			ev, err := domain.NewEvent("done", "succeeded", nil, "", "")
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			var judge application.RolloutEvaluation
			if judged {
				judge = func(r *domain.Rollout, stats func(time.Time) (domain.TaskStats, error)) (bool, error) {
					if !r.Evaluates() {
						return false, nil
					}
					total, err := stats(time.Time{})
					return r.Evaluate(total, domain.TaskStats{}, now), err
				}
			}
			var next atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := ids[next.Add(1)-1]
					if _, err := application.ApplyEvent(ctx, tasks, id, ev, func(t *domain.Task, prior *domain.Event) (bool, error) {
						return t.ApplyEvent(ev, prior, now)
					}, judge); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
