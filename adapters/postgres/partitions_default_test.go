package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/bootstrap"
	"github.com/ai-device/ota/domain"
)

// docs/SCALING.md, History: "Three months of slack means a stopped job
// costs nothing for a quarter; after that, events land in the DEFAULT
// partition (correct, unpruned) and the next month's partition cannot be
// created until those rows are moved — watch for `otad partitions`
// failing." The service is said to keep working, correct if unpruned. But
// `otad serve` migrates at start, and `migrate up` ends with
// EnsurePartitions, whose failure is the migration's: once the DEFAULT
// partition holds a row of the current month, every restart of otad
// (a deploy, a crash) refuses to start — "migrating: partitions: ..." —
// and the fleet loses its service, not only pruning. Nor are audit_log's
// partitions made then: the first table's failure stops the rest.
//
// The state is made as a stopped job leaves it: the current month's
// task_events partition missing (dropped here by hand, as the clock
// cannot be moved past the three months made ahead), and an event of a
// task created this month stored meanwhile.
func TestServeStartsWhileTheDefaultPartitionHoldsThisMonthsEvents(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	now := time.Now().UTC()
	month := "task_events_" + now.Format("2006_01")
	if _, err := e.db.Exec(`DROP TABLE ` + month); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(`DROP TABLE audit_log_` + now.AddDate(0, 1, 0).Format("2006_01")); err != nil {
		t.Fatal(err)
	}
	e.now = now.Truncate(time.Microsecond)
	e.device(t, "pd-1", "m")
	tk := e.createTask(t, "pd-1", e.offer(t, "m", "2.0.0"))
	p := 10
	ev := try(domain.NewEvent("e1", "downloading", &p, "", "")).must(t)
	if _, err := application.ApplyEvent(ctx, e.tasks, tk.ID(), ev, func(t *domain.Task, prior *domain.Event) (bool, error) {
		return t.ApplyEvent(ev, prior, e.now.Add(time.Second))
	}, nil); err != nil {
		t.Fatalf("an event while this month's partition is missing: %v", err)
	}
	if got := e.partitionOf(t, tk.ID().String()); got != "task_events_default" {
		t.Fatalf("the event is in %s, want the DEFAULT partition", got)
	}

	// What `otad serve` runs at start (main.go: bootstrap.Migrate up; an
	// error stops serve).
	var out bytes.Buffer
	if err := bootstrap.Migrate(ctx, e.db.DB, bootstrap.MigrateUp, &out); !errors.Is(err, bootstrap.ErrPartitionsBehind) {
		t.Errorf("the start-up migration: %v, want ErrPartitionsBehind (the schema up; serve warns and starts)", err)
	}
	if n := e.count(t, `SELECT count(*) FROM pg_class WHERE relname = $1`, "audit_log_"+now.AddDate(0, 1, 0).Format("2006_01")); n != 1 {
		t.Errorf("audit_log's next month's partition was not made: task_events' failure stopped it")
	}
	// `otad partitions` is what fails, naming the month.
	if err := bootstrap.EnsurePartitions(ctx, e.db.DB, bootstrap.DefaultPartitionsAhead, nil); err == nil ||
		!strings.Contains(err.Error(), "task_events partition 0 months ahead") {
		t.Errorf("EnsurePartitions with this month's rows in DEFAULT: %v, want the month's error", err)
	}
}
