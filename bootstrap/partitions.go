package bootstrap

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"
)

// DefaultPartitionsAhead is how many months of task_events partitions are
// kept created beyond the current one: three months of slack for a
// maintenance job (otad partitions, or otad migrate up, which serve runs at
// start) that stops running. Past them events still land, in the DEFAULT
// partition, unpruned.
const DefaultPartitionsAhead = 3

// ValidPartitionsAhead refuses a number of months ahead out of range, so
// that a command can refuse it before it connects.
func ValidPartitionsAhead(ahead int) error {
	if ahead < 0 || ahead > 120 {
		return fmt.Errorf("ahead must be from 0 to 120 months, not %d", ahead)
	}
	return nil
}

// EnsurePartitions creates the monthly partitions of the partitioned
// history tables (PartitionedTables: task_events, migration 00051, and
// audit_log, 00130) from the current month to ahead months beyond it that
// do not exist yet, and says how many it made. A schema older than a
// table's migration has nothing of it to partition: no error. Each month
// is made on its own: one that cannot be (its rows already in the DEFAULT
// partition, after the job stopped for longer than its slack) is reported
// with the others' errors, and keeps neither the later months nor the
// other table from being made.
func EnsurePartitions(ctx context.Context, db *sql.DB, ahead int, out io.Writer) error {
	if err := ValidPartitionsAhead(ahead); err != nil {
		return fmt.Errorf("partitions: %w", err)
	}
	var errs []error
	for _, t := range PartitionedTables() {
		fn := createFunctions[t]
		var exists sql.NullString
		if err := db.QueryRowContext(ctx, `SELECT to_regproc($1)::text`, fn).Scan(&exists); err != nil {
			return fmt.Errorf("partitions: %w", err)
		}
		if !exists.Valid {
			continue
		}
		made := 0
		for i := range ahead + 1 {
			var created bool
			// fn is a constant; the month is the database's, in UTC, as the
			// partitions' bounds are.
			err := db.QueryRowContext(ctx, `SELECT `+fn+`((date_trunc('month', now() AT TIME ZONE 'UTC') + make_interval(months => $1))::date)`, i).
				Scan(&created)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("partitions: creating the %s partition %d months ahead: %w", t, i, err))
			case created:
				made++
			}
		}
		if made > 0 && out != nil {
			fmt.Fprintf(out, "created %d %s partitions (through %d months ahead)\n", made, t, ahead)
		}
	}
	return errors.Join(errs...)
}

// The partitioned history tables, each dropped a month at a time by
// retention.
const (
	TaskEventsTable = "task_events"
	AuditLogTable   = "audit_log"
)

// PartitionedTables lists the tables partitioned by month.
func PartitionedTables() []string { return []string{TaskEventsTable, AuditLogTable} }

// createFunctions names each table's function making one month's
// partition (true when it made it, false when it was there).
var createFunctions = map[string]string{
	TaskEventsTable: "ota_create_task_event_partition",
	AuditLogTable:   "ota_create_audit_partition",
}

// DropPartitionsBefore drops the monthly task_events partitions whose
// month ends on or before before: the events of tasks created then
// (retention, docs/SCALING.md). It is DropMonthsBefore for task_events.
func DropPartitionsBefore(ctx context.Context, db *sql.DB, before time.Time, out io.Writer) error {
	return DropMonthsBefore(ctx, db, TaskEventsTable, before, out)
}

// DropMonthsBefore drops the monthly partitions of table (one of
// PartitionedTables) whose month ends on or before before: retention
// (docs/SCALING.md, "History"). It names each partition it drops; the
// DEFAULT partition is never dropped, nor the current month's or later
// ones (before after the current month's start is refused): rows being
// written land there, and a month dropped would send them to the DEFAULT
// partition, where they would block re-creating it. For audit_log this is
// the only way records leave: the table refuses UPDATE and DELETE, and a
// DROP of a whole month is no row's change.
func DropMonthsBefore(ctx context.Context, db *sql.DB, table string, before time.Time, out io.Writer) error {
	if _, ok := createFunctions[table]; !ok {
		return fmt.Errorf("partitions: %q is not a partitioned table (one of %v)", table, PartitionedTables())
	}
	now := time.Now().UTC()
	if thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC); before.After(thisMonth) {
		return fmt.Errorf("partitions: refusing to drop the current month of %s or later ones (before %s > %s)",
			table, before.Format("2006-01"), thisMonth.Format("2006-01"))
	}
	rows, err := db.QueryContext(ctx, `SELECT c.relname FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = $1::regclass AND c.relname ~ ('^' || $1 || '_[0-9]{4}_[0-9]{2}$')`, table)
	if err != nil {
		return fmt.Errorf("partitions: listing %s partitions: %w", table, err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return fmt.Errorf("partitions: %w", err)
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("partitions: %w", err)
	}
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		month, err := time.Parse(table+"_2006_01", n)
		if err != nil || month.AddDate(0, 1, 0).After(before) {
			continue
		}
		if _, err := db.ExecContext(ctx, `DROP TABLE `+n); err != nil { // n matched ^table_YYYY_MM$
			errs = append(errs, fmt.Errorf("dropping %s: %w", n, err))
			continue
		}
		if out != nil {
			fmt.Fprintf(out, "dropped %s\n", n)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("partitions: %w", err)
	}
	return nil
}
