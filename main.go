// Command otad is the OTA update service: devices poll it for firmware
// updates, operators publish firmware and roll it out in stages.
//
//	otad serve [--no-migrate] [--create-db]
//	otad migrate up|down|status
//	otad version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/bootstrap"
)

// version is set at build time with -ldflags "-X main.version=…"; otherwise
// the module's build info is used.
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage:
  otad serve [--no-migrate] [--create-db]   serve the API (migrates on start)
  otad migrate up|down|status               manage the database schema
  otad version                              print the version
configuration comes from OTA_* environment variables (see README.md)`

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], getenv, stderr)
	case "migrate":
		err = migrate(ctx, args[1:], getenv, stdout)
	case "version":
		fmt.Fprintln(stdout, "otad", buildVersion())
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
	default:
		fmt.Fprintf(stderr, "otad: unknown command %q\n%s\n", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "otad:", err)
		return 1
	}
	return 0
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}

const memoryHint = "start it, or try the service without Postgres and Redis: OTA_STORE=memory make run"

func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	noMigrate := fs.Bool("no-migrate", false, "do not apply pending migrations at start")
	createDB := fs.Bool("create-db", false, "create the database named in OTA_DATABASE_URL if missing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := bootstrap.LoadConfig(getenv, true)
	if err != nil {
		return err
	}
	cfg.Migrate = !*noMigrate
	logger, flushLog := bootstrap.NewBufferedLogger(stderr, cfg.LogLevel)
	defer func() { _ = flushLog() }() // after the app drained and stopped: the last lines

	if cfg.Store == bootstrap.StoreMemory {
		logger.Warn("OTA_STORE=memory: single process, nothing is kept after it stops")
		app, err := initMemoryApp(cfg, logger)
		if err != nil {
			return err
		}
		return app.Run(ctx)
	}

	if *createDB {
		if err := bootstrap.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
			return fmt.Errorf("%w (OTA_DATABASE_URL); %s", err, memoryHint)
		}
	}
	db, closeDB, err := postgres.Open(cfg.Postgres())
	if err != nil {
		return fmt.Errorf("%w (OTA_DATABASE_URL); %s", err, memoryHint)
	}
	defer closeDB()
	if cfg.Migrate {
		if err := bootstrap.Migrate(ctx, db.DB, bootstrap.MigrateUp, logWriter{logger}); err != nil {
			return fmt.Errorf("migrating: %w", err)
		}
	}
	app, cleanup, err := initPostgresApp(cfg, db, logger)
	if err != nil {
		// Redis is the usual culprit here; statement preparation and the
		// catalog listener (Postgres) fail here too, and say so themselves.
		if strings.Contains(err.Error(), "Redis") {
			return fmt.Errorf("%w (OTA_REDIS_URL); %s", err, memoryHint)
		}
		return fmt.Errorf("%w (OTA_DATABASE_URL); %s", err, memoryHint)
	}
	defer cleanup()
	return app.Run(ctx)
}

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) != 1 {
		return errors.New("usage: otad migrate up|down|status")
	}
	cfg, err := bootstrap.LoadConfig(getenv, false)
	if err != nil {
		return err
	}
	db, closeDB, err := postgres.Open(postgres.Config{URL: postgres.DatabaseURL(cfg.DatabaseURL)})
	if err != nil {
		return fmt.Errorf("%w (OTA_DATABASE_URL)", err)
	}
	defer closeDB()
	return bootstrap.Migrate(ctx, db.DB, args[0], stdout)
}

// logWriter turns migration progress lines into log records.
type logWriter struct{ l *slog.Logger }

// Write logs one migration line.
func (w logWriter) Write(p []byte) (int, error) {
	w.l.Info("migration", "step", string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return p
}
