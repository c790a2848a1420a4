package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/ai-device/ota/bootstrap"
)

// partitions is the history maintenance command, for a daily timer: it
// creates the task_events partitions of the coming months (as every
// `otad migrate up` does) and, with --drop-before, drops the months of
// history past retention (docs/SCALING.md, "History").
func partitions(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("partitions", flag.ContinueOnError)
	ahead := fs.Int("ahead", bootstrap.DefaultPartitionsAhead, "months of partitions to keep created beyond the current one")
	dropBefore := fs.String("drop-before", "", "drop the events of tasks created before this month (YYYY-MM)")
	const synopsis = "otad partitions [--ahead N] [--drop-before YYYY-MM]   (the database is OTA_DATABASE_URL's)"
	if err := parseFlags(fs, synopsis, args, stdout, stderr); err != nil {
		return err
	}
	var before time.Time
	if *dropBefore != "" {
		var err error
		if before, err = time.Parse("2006-01", *dropBefore); err != nil {
			fmt.Fprintf(stderr, "otad: partitions: --drop-before %q is not a month such as 2026-01\nusage: %s\n", *dropBefore, synopsis)
			return errUsage
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
		return bootstrap.DropPartitionsBefore(ctx, db.DB, before, stdout)
	}
	return nil
}
