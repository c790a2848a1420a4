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

// EnsurePartitions creates the monthly task_events partitions from the
// current month to ahead months beyond it that do not exist yet
// (ota_ensure_task_event_partitions, migration 00051), and says how many it
// made. A schema older than 00051 has nothing to partition: no error.
func EnsurePartitions(ctx context.Context, db *sql.DB, ahead int, out io.Writer) error {
	if ahead < 0 || ahead > 120 {
		return fmt.Errorf("partitions: ahead must be from 0 to 120 months, not %d", ahead)
	}
	var fn sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT to_regproc('ota_ensure_task_event_partitions')::text`).Scan(&fn); err != nil {
		return fmt.Errorf("partitions: %w", err)
	}
	if !fn.Valid {
		return nil
	}
	var made int
	if err := db.QueryRowContext(ctx, `SELECT ota_ensure_task_event_partitions($1)`, ahead).Scan(&made); err != nil {
		return fmt.Errorf("partitions: creating task_events partitions %d months ahead: %w", ahead, err)
	}
	if made > 0 && out != nil {
		fmt.Fprintf(out, "created %d task_events partitions (through %d months ahead)\n", made, ahead)
	}
	return nil
}

// DropPartitionsBefore drops the monthly task_events partitions whose
// month ends on or before before: the events of tasks created then
// (retention, docs/SCALING.md). It names each partition it drops; the
// DEFAULT partition is never dropped, nor the current month's or later
// ones (before after the current month's start is refused): events of
// live tasks land there, and a month dropped would send them to the
// DEFAULT partition, where they would block re-creating it.
func DropPartitionsBefore(ctx context.Context, db *sql.DB, before time.Time, out io.Writer) error {
	now := time.Now().UTC()
	if thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC); before.After(thisMonth) {
		return fmt.Errorf("partitions: refusing to drop the current month's events or later ones (before %s > %s)",
			before.Format("2006-01"), thisMonth.Format("2006-01"))
	}
	rows, err := db.QueryContext(ctx, `SELECT c.relname FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'task_events'::regclass AND c.relname ~ '^task_events_[0-9]{4}_[0-9]{2}$'`)
	if err != nil {
		return fmt.Errorf("partitions: listing task_events partitions: %w", err)
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
		month, err := time.Parse("task_events_2006_01", n)
		if err != nil || month.AddDate(0, 1, 0).After(before) {
			continue
		}
		if _, err := db.ExecContext(ctx, `DROP TABLE `+n); err != nil { // n matched ^task_events_YYYY_MM$
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
