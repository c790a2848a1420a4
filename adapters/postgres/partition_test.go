package postgres_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/bootstrap"
	"github.com/ai-device/ota/domain"
)

// partitionOf names the task_events partition holding the task's events.
func (e *env) partitionOf(t *testing.T, taskID string) string {
	t.Helper()
	var name string
	if err := e.db.Get(&name, `SELECT tableoid::regclass::text FROM task_events WHERE task_id = $1 LIMIT 1`, taskID); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestTaskEventsPartitionsKeepEventsIdempotent: events go to the monthly
// partition of their task's creation, the database refuses a second copy
// of an event though the key includes the partition column, partitions are
// kept created ahead, the event lookup reads one partition, and retention
// drops a month's events without touching tasks.
func TestTaskEventsPartitionsKeepEventsIdempotent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var out bytes.Buffer
	if err := bootstrap.EnsurePartitions(ctx, e.db.DB, 3, &out); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i := 0; i <= 3; i++ {
		m := time.Date(now.Year(), now.Month()+time.Month(i), 1, 0, 0, 0, 0, time.UTC)
		name := "task_events_" + m.Format("2006_01")
		if n := e.count(t, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'task_events'::regclass AND inhrelid = to_regclass($1)`, name); n != 1 {
			t.Errorf("partition %s does not exist %d months ahead", name, i)
		}
	}
	out.Reset()
	if err := bootstrap.EnsurePartitions(ctx, e.db.DB, 3, &out); err != nil || out.Len() != 0 {
		t.Errorf("a second EnsurePartitions: %q %v, want nothing created", out.String(), err)
	}

	// A task of this month, and one of January 2024 (its own partition).
	e.now = now.Truncate(time.Microsecond)
	e.device(t, "pt-1", "m")
	cur := e.createTask(t, "pt-1", e.offer(t, "m", "2.0.0"))
	e.now = time.Date(2024, 1, 15, 12, 0, 0, 0, time.UTC)
	e.device(t, "pt-2", "m")
	old := e.createTask(t, "pt-2", e.offer(t, "m", "2.0.1"))
	if _, err := e.db.Exec(`SELECT ota_create_task_event_partition('2024-01-01')`); err != nil {
		t.Fatal(err)
	}
	p := 10
	ev := try(domain.NewEvent("e1", "downloading", &p, "", "")).must(t)
	for _, tk := range []domain.Task{cur, old} {
		if _, err := application.ApplyEvent(ctx, e.tasks, tk.ID(), ev, func(t *domain.Task, prior *domain.Event) (bool, error) {
			return t.ApplyEvent(ev, prior, e.now.Add(time.Hour))
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := e.partitionOf(t, cur.ID().String()), "task_events_"+now.Format("2006_01"); got != want {
		t.Errorf("this month's task's event is in %s, want %s", got, want)
	}
	if got := e.partitionOf(t, old.ID().String()); got != "task_events_2024_01" {
		t.Errorf("January 2024's task's event is in %s, want task_events_2024_01", got)
	}
	// The database itself refuses a second copy, whatever the caller.
	_, err := e.db.Exec(`INSERT INTO task_events (task_id, event_id, fingerprint, created_at, task_created_at)
		SELECT id, 'e1', 'other', now(), created_at FROM tasks WHERE id = $1`, cur.ID().String())
	if pqErr := pq.As(err, "23505"); pqErr == nil {
		t.Errorf("a second copy of event e1 was accepted: %v", err)
	}

	// The event lookup, as prepared (generic plan), reads one partition.
	conn, err := e.db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	defer func() { _, _ = conn.ExecContext(ctx, `DEALLOCATE ev; RESET plan_cache_mode`) }()
	for _, q := range []string{`SET plan_cache_mode = force_generic_plan`,
		`PREPARE ev(uuid, text, timestamptz) AS SELECT fingerprint FROM task_events WHERE task_id = $1 AND event_id = $2 AND task_created_at = $3`} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var plan []string
	if err := conn.SelectContext(ctx, &plan, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE ev('`+cur.ID().String()+`', 'e1', '`+
		cur.CreatedAt().Format(time.RFC3339Nano)+`')`); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if scans := strings.Count(text, " on task_events_"); scans != 1 || !strings.Contains(text, "Subplans Removed") {
		t.Errorf("the event lookup should read one partition, pruned at execution:\n%s", text)
	}

	// Retention never reaches the current month.
	if err := bootstrap.DropPartitionsBefore(ctx, e.db.DB, now.AddDate(0, 1, 0), &out); err == nil {
		t.Errorf("dropping the current month's events was not refused")
	}
	// Retention: the months before February 2024 go, tasks stay.
	out.Reset()
	if err := bootstrap.DropPartitionsBefore(ctx, e.db.DB, time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "dropped task_events_2024_01") || strings.Contains(out.String(), now.Format("2006_01")) {
		t.Errorf("drop before 2024-02: %q", out.String())
	}
	if n := e.count(t, `SELECT count(*) FROM task_events WHERE task_id = $1`, old.ID().String()); n != 0 {
		t.Errorf("%d events of January 2024 left after retention", n)
	}
	if n := e.count(t, `SELECT count(*) FROM task_events WHERE task_id = $1`, cur.ID().String()); n != 1 {
		t.Errorf("this month's events: %d, want 1", n)
	}
	if _, err := e.tasks.Get(ctx, old.ID()); err != nil {
		t.Errorf("retention dropped the task itself: %v", err)
	}
}
