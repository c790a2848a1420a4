package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
)

// rolloutsSynopsis is the rollouts command's usage.
const rolloutsSynopsis = `otad rollouts verify [--rollout ID]   (the database is OTA_DATABASE_URL's)
  verify   recount every rollout's tasks (or one rollout's) and compare with
           the counters its stats, failure threshold and stage gates read;
           print each drifting counter, exit 1 if any drifted`

// errDrift is a verify that found counters differing from the recount: each
// was printed; the exit code is 1.
var errDrift = errors.New("rollout counters drifted from their tasks")

// rolloutsCommand is the rollout maintenance command: verify compares the
// per-rollout counters with a recount of the tasks (docs/DOMAIN.md, event
// rule 5's counters), read-only.
func rolloutsCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollouts", flag.ContinueOnError)
	only := fs.String("rollout", "", "recount this rollout only (its id)")
	verb := ""
	if len(args) > 0 && args[0] == "verify" {
		verb, args = args[0], args[1:]
	}
	if err := parseFlags(fs, rolloutsSynopsis, args, stdout, stderr); err != nil {
		return err
	}
	if verb == "" || fs.NArg() > 0 {
		return refuse(stderr, rolloutsSynopsis, "rollouts needs the subcommand verify")
	}
	var id domain.UUID
	if *only != "" {
		var err error
		if id, err = domain.ParseUUID("rollout", *only); err != nil {
			return refuse(stderr, rolloutsSynopsis, "rollouts verify: --rollout %q is not a rollout id", *only)
		}
	}
	db, closeDB, err := openMaintenanceDB(getenv)
	if err != nil {
		return err
	}
	defer closeDB()
	if !id.IsZero() {
		// A rollout with no task has no counters either: without this, an
		// id naming no rollout would "match" as one with nothing counted.
		rollouts, err := postgres.NewRolloutRepository(db)
		if err != nil {
			return err
		}
		if _, err := rollouts.Get(ctx, id); err != nil {
			return fmt.Errorf("rollouts verify: rollout %s: %w", id, err)
		}
	}
	tasks, err := postgres.NewTaskRepository(db)
	if err != nil {
		return err
	}
	n, drift, err := application.VerifyCounters(ctx, tasks, id)
	if err != nil {
		return err
	}
	for _, d := range drift {
		stage := "whole rollout"
		if !d.Stage.IsZero() {
			stage = "stage started " + d.Stage.Format("2006-01-02T15:04:05.999999Z07:00")
		}
		fmt.Fprintf(stdout, "rollout %s, %s, %s: stored %d, recounted %d\n", d.Rollout, stage, d.Status, d.Stored, d.Recounted)
	}
	if len(drift) > 0 {
		return fmt.Errorf("%w: %d counters of %d rollouts recounted", errDrift, len(drift), n)
	}
	fmt.Fprintf(stdout, "the counters of %d rollouts match their tasks\n", n)
	return nil
}
