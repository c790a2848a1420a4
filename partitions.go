package main

import (
	"context"
	"flag"
	"io"
	"slices"
	"time"

	"github.com/ai-device/ota/bootstrap"
)

// partitions is the history maintenance command, for a daily timer: it
// creates the task_events and audit_log partitions of the coming months
// (as every `otad migrate up` does) and, with --drop-before, drops the
// months of one table's history past retention (--table, task_events by
// default: each table has its own retention; docs/SCALING.md, "History").
func partitions(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("partitions", flag.ContinueOnError)
	ahead := fs.Int("ahead", bootstrap.DefaultPartitionsAhead, "months of partitions to keep created beyond the current one")
	dropBefore := fs.String("drop-before", "", "drop the table's months before this month (YYYY-MM); task_events: the events of tasks created then")
	table := fs.String("table", bootstrap.TaskEventsTable, "the table --drop-before drops months of: task_events or audit_log")
	const synopsis = "otad partitions [--ahead N] [--drop-before YYYY-MM [--table task_events|audit_log]]   (the database is OTA_DATABASE_URL's)"
	if err := parseFlags(fs, synopsis, args, stdout, stderr); err != nil {
		return err
	}
	if err := bootstrap.ValidPartitionsAhead(*ahead); err != nil {
		return refuse(stderr, synopsis, "partitions: --%v", err)
	}
	if !slices.Contains(bootstrap.PartitionedTables(), *table) {
		return refuse(stderr, synopsis, "partitions: --table %q is not task_events or audit_log", *table)
	}
	var before time.Time
	if *dropBefore != "" {
		var err error
		if before, err = time.Parse("2006-01", *dropBefore); err != nil {
			return refuse(stderr, synopsis, "partitions: --drop-before %q is not a month such as 2026-01", *dropBefore)
		}
	}
	db, closeDB, err := openMaintenanceDB(getenv)
	if err != nil {
		return err
	}
	defer closeDB()
	if err := bootstrap.EnsurePartitions(ctx, db.DB, *ahead, stdout); err != nil {
		return err
	}
	if !before.IsZero() {
		return bootstrap.DropMonthsBefore(ctx, db.DB, *table, before, stdout)
	}
	return nil
}
