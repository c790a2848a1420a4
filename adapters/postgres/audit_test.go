package postgres_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/ai-device/ota/bootstrap"
)

// insertAudit writes a record of root's at at, as the stores' writes do.
func (e *env) insertAudit(t *testing.T, at time.Time, target string) {
	t.Helper()
	if _, err := e.db.Exec(`INSERT INTO audit_log (at, actor_kind, action, target, after) VALUES ($1, 'root', 'firmware.publish', $2, '{"v":1}')`,
		at, target); err != nil {
		t.Fatal(err)
	}
}

// TestAuditLogAppendOnly: the database refuses to change or remove a
// record, whoever asks (a bug in the service, a statement typed by hand).
func TestAuditLogAppendOnly(t *testing.T) {
	e := newEnv(t)
	e.insertAudit(t, time.Now(), "fw-1")
	for _, q := range []string{
		`UPDATE audit_log SET target = 'fw-2'`,
		`UPDATE audit_log SET after = NULL WHERE target = 'fw-1'`,
		`DELETE FROM audit_log`,
		`DELETE FROM audit_log WHERE target = 'fw-1'`,
	} {
		_, err := e.db.Exec(q)
		if pqErr := pq.As(err, "42501"); pqErr == nil || !strings.Contains(pqErr.Message, "append-only") {
			t.Errorf("%s: %v, want refused as append-only (42501)", q, err)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM audit_log WHERE target = 'fw-1' AND after IS NOT NULL`); n != 1 {
		t.Errorf("%d records left as written, want 1", n)
	}
}

// TestAuditLogRetentionByMonths: partitions are kept created ahead, and
// retention drops whole months of records (the one way a record leaves),
// never the current month, and only of the table named.
func TestAuditLogRetentionByMonths(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var out bytes.Buffer
	if err := bootstrap.EnsurePartitions(ctx, e.db.DB, 4, &out); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i := 0; i <= 4; i++ {
		m := time.Date(now.Year(), now.Month()+time.Month(i), 1, 0, 0, 0, 0, time.UTC)
		name := "audit_log_" + m.Format("2006_01")
		if n := e.count(t, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'audit_log'::regclass AND inhrelid = to_regclass($1)`, name); n != 1 {
			t.Errorf("partition %s does not exist %d months ahead", name, i)
		}
	}
	if !strings.Contains(out.String(), "audit_log partitions") {
		t.Errorf("EnsurePartitions 4 months ahead said %q, want the audit_log partitions it made", out.String())
	}
	if _, err := e.db.Exec(`SELECT ota_create_audit_partition('2024-01-01')`); err != nil {
		t.Fatal(err)
	}
	e.insertAudit(t, time.Date(2024, 1, 20, 0, 0, 0, 0, time.UTC), "old")
	e.insertAudit(t, now, "new")
	if err := bootstrap.DropMonthsBefore(ctx, e.db.DB, bootstrap.AuditLogTable, now.AddDate(0, 1, 0), &out); err == nil {
		t.Errorf("dropping the current month's audit records was not refused")
	}
	if err := bootstrap.DropMonthsBefore(ctx, e.db.DB, "devices", time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC), &out); err == nil {
		t.Errorf("dropping months of a table that is not partitioned by month was not refused")
	}
	// task_events' retention leaves the audit log alone.
	out.Reset()
	if err := bootstrap.DropPartitionsBefore(ctx, e.db.DB, time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC), &out); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM audit_log WHERE target = 'old'`); n != 1 {
		t.Fatalf("task_events' retention removed audit records (%q)", out.String())
	}
	out.Reset()
	if err := bootstrap.DropMonthsBefore(ctx, e.db.DB, bootstrap.AuditLogTable, time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC), &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "dropped audit_log_2024_01\n" {
		t.Errorf("drop before 2024-02 said %q, want only audit_log_2024_01 dropped", out.String())
	}
	if n := e.count(t, `SELECT count(*) FROM audit_log WHERE target = 'old'`); n != 0 {
		t.Errorf("%d records of January 2024 left after retention", n)
	}
	if n := e.count(t, `SELECT count(*) FROM audit_log WHERE target = 'new'`); n != 1 {
		t.Errorf("this month's records: %d, want 1", n)
	}
}
