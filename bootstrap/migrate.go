package bootstrap

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/ai-device/ota/migrations"
)

// Migration commands understood by Migrate, as typed after `otad migrate`.
const (
	MigrateUp     = "up"
	MigrateDown   = "down"
	MigrateStatus = "status"
)

// IsMigrateCommand reports whether command is one Migrate runs, so that a
// command line naming another is refused as a usage error before any
// connection is made.
func IsMigrateCommand(command string) bool {
	switch command {
	case MigrateUp, MigrateDown, MigrateStatus:
		return true
	}
	return false
}

// Migrate runs one migration command against db: "up" applies every pending
// migration, "down" rolls back the most recent one, "status" lists each
// migration as applied or pending. It writes one human-readable line per
// migration to out (the operator's terminal for `otad migrate`, the log
// for `otad serve`).
//
// The run holds a Postgres advisory lock for its duration, so replicas
// starting together migrate one after the other instead of racing on the
// same DDL. Only the embedded migrations are used (goose's global registry is
// off), so nothing registered elsewhere in the process can sneak in.
func Migrate(ctx context.Context, db *sql.DB, command string, out io.Writer) error {
	if !IsMigrateCommand(command) {
		return fmt.Errorf("unknown migrate command %q: want %s, %s or %s", command, MigrateUp, MigrateDown, MigrateStatus)
	}
	if db == nil {
		return errors.New("migrate: no database")
	}
	if out == nil {
		out = io.Discard
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// The provider is deliberately not closed: its Close closes db, which
	// belongs to the caller (otad serve goes on to use it).

	switch command {
	case MigrateUp:
		return migrateUp(ctx, db, p, out)
	case MigrateDown:
		return migrateDown(ctx, p, out)
	default:
		return migrateStatus(ctx, p, out)
	}
}

// durationPrecision is how finely migration timings are shown.
const durationPrecision = 100 * time.Microsecond

func migrateUp(ctx context.Context, db *sql.DB, p *goose.Provider, out io.Writer) error {
	results, err := p.Up(ctx)
	if partial, ok := errors.AsType[*goose.PartialError](err); ok {
		// Say what did get applied before the failure: the operator needs
		// to know where the database stands.
		for _, r := range partial.Applied {
			fmt.Fprintf(out, "applied %s (%s)\n", path.Base(r.Source.Path), r.Duration.Round(durationPrecision))
		}
		if partial.Failed != nil && partial.Failed.Source != nil {
			fmt.Fprintf(out, "failed  %s\n", path.Base(partial.Failed.Source.Path))
		}
	}
	if err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	for _, r := range results {
		fmt.Fprintf(out, "applied %s (%s)\n", path.Base(r.Source.Path), r.Duration.Round(durationPrecision))
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate up: reading the schema version: %w", err)
	}
	if len(results) == 0 {
		fmt.Fprintf(out, "schema is up to date at version %d\n", v)
	} else {
		fmt.Fprintf(out, "schema is now at version %d\n", v)
	}
	// Every up (serve migrates at start) keeps history partitions ahead. A
	// month that cannot be made is ErrPartitionsBehind, after the schema is
	// up: serve warns and starts (events land in the DEFAULT partition
	// meanwhile, docs/SCALING.md, "History"); `otad migrate up` fails.
	if err := EnsurePartitions(ctx, db, DefaultPartitionsAhead, out); err != nil {
		return fmt.Errorf("%w: %w", ErrPartitionsBehind, err)
	}
	return nil
}

// ErrPartitionsBehind is a migrate up whose schema is up but whose history
// partitions could not all be made (EnsurePartitions says which months):
// nothing a request needs, so `otad serve` starts with a warning.
var ErrPartitionsBehind = errors.New("the schema is up, but not every history partition could be made")

func migrateDown(ctx context.Context, p *goose.Provider, out io.Writer) error {
	r, err := p.Down(ctx)
	if errors.Is(err, goose.ErrNoNextVersion) {
		fmt.Fprintln(out, "no migration to roll back: schema is at version 0")
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrate down: %w", err)
	}
	fmt.Fprintf(out, "rolled back %s (%s)\n", path.Base(r.Source.Path), r.Duration.Round(durationPrecision))
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate down: reading the schema version: %w", err)
	}
	fmt.Fprintf(out, "schema is now at version %d\n", v)
	return nil
}

func migrateStatus(ctx context.Context, p *goose.Provider, out io.Writer) error {
	statuses, err := p.Status(ctx)
	if err != nil {
		return fmt.Errorf("migrate status: %w", err)
	}
	for _, s := range statuses {
		name := path.Base(s.Source.Path)
		if s.State == goose.StateApplied {
			fmt.Fprintf(out, "applied %s at %s\n", name, s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z07:00"))
		} else {
			fmt.Fprintf(out, "pending %s\n", name)
		}
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate status: reading the schema version: %w", err)
	}
	fmt.Fprintf(out, "schema is at version %d\n", v)
	return nil
}
