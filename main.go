// Command otad is the OTA update service: devices poll it for firmware
// updates, operators publish firmware and roll it out in stages.
//
//	otad serve [--no-migrate] [--create-db]
//	otad migrate up|down|status
//	otad partitions [--ahead N] [--drop-before YYYY-MM [--table T]]
//	otad rollouts verify [--rollout ID]
//	otad healthcheck [--url URL]
//	otad users create --username NAME --role ROLE
//	otad version
//	otad help
//
// A command line that cannot be understood (no command, an unknown one, a
// bad flag or subcommand) exits 2; a command that fails exits 1.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/bootstrap"
)

// version and commit are stamped at build time by the Makefile
// (-ldflags "-X main.version=… -X main.commit=…", from git describe and
// git rev-parse). A plain `go build` leaves them empty and the module's
// build info (its version and the VCS settings Go records) fills them in,
// so an operator can always tell which build answers.
var (
	version = ""
	commit  = ""
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage:
  otad serve [--no-migrate] [--create-db]   serve the API (migrates on start)
  otad migrate up|down|status               manage the database schema
  otad partitions [--ahead N] [--drop-before YYYY-MM [--table T]]  keep history partitions ahead; drop old months
  otad rollouts verify [--rollout ID]       recount rollouts' tasks; report counters that drifted (exit 1)
  otad healthcheck [--url URL]              exit 0 when the local otad answers /healthz
  otad users create --username NAME --role ROLE  make an operator's account (password: OTA_NEW_USER_PASSWORD or stdin)
  otad version                              print the version and commit
"otad COMMAND --help" describes a command's flags.
configuration comes from OTA_* environment variables (see docs/CONFIGURATION.md)`

// errUsage is a command line that could not be understood; its message has
// already been printed with the command's usage, and the exit code is 2.
var errUsage = errors.New("usage")

// refuse prints why a command line is refused, then the command's usage,
// and returns errUsage: every refusal reads "otad: why" and shows the usage.
func refuse(stderr io.Writer, synopsis, format string, args ...any) error {
	fmt.Fprintf(stderr, "otad: "+format+"\nusage: %s\n", append(args, synopsis)...)
	return errUsage
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], getenv, stdout, stderr)
	case "migrate":
		err = migrate(ctx, args[1:], getenv, stdout, stderr)
	case "partitions":
		err = partitions(ctx, args[1:], getenv, stdout, stderr)
	case "rollouts":
		err = rolloutsCommand(ctx, args[1:], getenv, stdout, stderr)
	case "healthcheck":
		err = healthcheck(ctx, args[1:], getenv, stdout, stderr)
	case "users":
		err = users(ctx, args[1:], getenv, stdout, stderr)
	case "version":
		err = printVersion(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, usage)
	default:
		fmt.Fprintf(stderr, "otad: unknown command %q\n%s\n", args[0], usage)
		return 2
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "otad:", err)
		return 1
	}
	return 0
}

// parseFlags parses a subcommand's flags. Asked for help (-h, --help), it
// prints the command's synopsis and flags to stdout and returns
// flag.ErrHelp, which run turns into exit 0: help that was asked for is not
// an error. A bad flag goes to stderr with the same text and returns errUsage.
func parseFlags(fs *flag.FlagSet, synopsis string, args []string, stdout, stderr io.Writer) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	printUsage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: %s\n", synopsis)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout)
		return flag.ErrHelp
	case err != nil:
		fmt.Fprintf(stderr, "otad: %v\n", err)
		printUsage(stderr)
		return errUsage
	}
	return nil
}

// buildInfo is what a binary knows about its own build.
type buildInfo struct {
	Version string // a release tag or `git describe` output; "dev" when unknown
	Commit  string // the VCS revision, "-dirty" appended for a modified tree; "unknown" when unknown
}

// currentBuild combines the link-time stamps with the build info the Go
// toolchain embeds.
func currentBuild() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return resolveBuild(version, commit, bi)
}

// resolveBuild prefers the stamps (the Makefile's), then the module
// version (`go install …@v1.2.3`), then the VCS settings `go build` records
// inside a git checkout.
func resolveBuild(stampedVersion, stampedCommit string, bi *debug.BuildInfo) buildInfo {
	b := buildInfo{Version: stampedVersion, Commit: stampedCommit}
	if bi != nil {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		if b.Commit == "" {
			var rev, modified string
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if rev != "" {
				if len(rev) > 12 {
					rev = rev[:12]
				}
				if modified == "true" {
					rev += "-dirty"
				}
				b.Commit = rev
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

func printVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if err := parseFlags(fs, "otad version", args, stdout, stderr); err != nil {
		return err
	}
	b := currentBuild()
	fmt.Fprintf(stdout, "otad %s (commit %s)\n", b.Version, b.Commit)
	return nil
}

const memoryHint = "start it, or try the service without Postgres and Redis: OTA_STORE=memory make run"

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	noMigrate := fs.Bool("no-migrate", false, "do not apply pending migrations at start")
	createDB := fs.Bool("create-db", false, "create the database named in OTA_DATABASE_URL if missing")
	if err := parseFlags(fs, "otad serve [--no-migrate] [--create-db]   (configuration: OTA_* variables, see docs/CONFIGURATION.md)", args, stdout, stderr); err != nil {
		return err
	}
	cfg, err := bootstrap.LoadConfig(getenv, true)
	if err != nil {
		return err
	}
	cfg.Migrate = !*noMigrate
	logger, flushLog := bootstrap.NewBufferedLogger(stderr, cfg.LogLevel)
	defer func() { _ = flushLog() }() // after the app drained and stopped: the last lines
	b := currentBuild()
	logger.Info("otad starting", "version", b.Version, "commit", b.Commit, "store", string(cfg.Store), "addr", cfg.HTTPAddr)

	// The port first: "address already in use" is said before anything
	// connects or migrates. Serve closes it; so does this, on a failure
	// before serving (a second Close is harmless).
	ln, err := bootstrap.Listen(cfg.HTTPAddr)
	if err != nil {
		return err
	}
	defer ln.Close()
	if cfg.Store == bootstrap.StoreMemory {
		logger.Warn("OTA_STORE=memory: single process, nothing is kept after it stops")
		app, cleanup, err := initMemoryApp(cfg, logger)
		if err != nil {
			return err
		}
		defer cleanup()
		warnDefaults(logger, cfg, getenv)
		return app.Serve(ctx, ln)
	}

	if *createDB {
		created, err := bootstrap.EnsureDatabase(ctx, cfg.DatabaseURL)
		if err != nil {
			return fmt.Errorf("%w (OTA_DATABASE_URL); %s", err, memoryHint)
		}
		if created {
			logger.Info("created the database named in OTA_DATABASE_URL", "database", databaseName(cfg.DatabaseURL))
		}
	}
	db, closeDB, err := postgres.Open(cfg.Postgres())
	if err != nil {
		return fmt.Errorf("%w (OTA_DATABASE_URL); %s", err, memoryHint)
	}
	defer closeDB()
	if cfg.Migrate {
		if err := migrateAtStart(ctx, db.DB, logger); err != nil {
			return err
		}
	}
	app, cleanup, err := initPostgresApp(cfg, db, logger)
	if err != nil {
		// Redis is the usual culprit here; statement preparation and the
		// catalog listener (Postgres) fail here too, and say so themselves.
		if strings.Contains(err.Error(), "OTA_EVENTS_NATS_URL") {
			return err // the event sink's, naming its own variable
		}
		if strings.Contains(err.Error(), "Redis") {
			return fmt.Errorf("%w (OTA_REDIS_URL); %s", err, memoryHint)
		}
		return fmt.Errorf("%w (OTA_DATABASE_URL); %s", err, memoryHint)
	}
	defer cleanup()
	warnDefaults(logger, cfg, getenv)
	return app.Serve(ctx, ln)
}

// warnDefaults says, once the service is assembled, which defaults only
// suit a development machine.
func warnDefaults(logger *slog.Logger, cfg bootstrap.Config, getenv func(string) string) {
	if msg := publicURLWarning(cfg, getenv); msg != "" {
		logger.Warn(msg)
	}
}

// publicURLWarning is the warning for an unset OTA_PUBLIC_URL: the DDI
// links then name this host as OTA_HTTP_ADDR does, which agents elsewhere
// cannot follow ("" when it is set).
func publicURLWarning(cfg bootstrap.Config, getenv func(string) string) string {
	if strings.TrimSpace(getenv("OTA_PUBLIC_URL")) != "" {
		return ""
	}
	return "OTA_PUBLIC_URL is not set: DDI links start with " + cfg.PublicURL +
		", which only agents on this host can follow. Harmless in development; set it to the URL devices reach in production"
}

// databaseName is the database part of a Postgres URL (never its password).
func databaseName(raw string) string {
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		raw = raw[:i]
	}
	return raw[strings.LastIndexByte(raw, '/')+1:]
}

// migrateSynopsis is migrate's usage: its subcommands, and what each does.
const migrateSynopsis = `otad migrate up|down|status   (the database is OTA_DATABASE_URL's)
  up      apply every pending migration (otad serve does this at start)
  down    roll back the most recent migration
  status  list every migration as applied or pending`

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	if err := parseFlags(fs, migrateSynopsis, args, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() != 1 || !bootstrap.IsMigrateCommand(fs.Arg(0)) {
		if fs.NArg() == 0 {
			return refuse(stderr, migrateSynopsis, "migrate needs a subcommand")
		}
		return refuse(stderr, migrateSynopsis, "migrate: unknown subcommand %q", strings.Join(fs.Args(), " "))
	}
	db, closeDB, err := openMaintenanceDB(getenv)
	if err != nil {
		return err
	}
	defer closeDB()
	return bootstrap.Migrate(ctx, db.DB, fs.Arg(0), stdout)
}

// openMaintenanceDB opens OTA_DATABASE_URL for the maintenance commands
// (migrate, partitions): a plain pool, none of the serving settings.
func openMaintenanceDB(getenv func(string) string) (*sqlx.DB, func(), error) {
	cfg, err := bootstrap.LoadConfig(getenv, false)
	if err != nil {
		return nil, nil, err
	}
	db, closeDB, err := postgres.Open(postgres.Config{URL: postgres.DatabaseURL(cfg.DatabaseURL)})
	if err != nil {
		return nil, nil, fmt.Errorf("%w (OTA_DATABASE_URL)", err)
	}
	return db, closeDB, nil
}

// healthcheckTimeout bounds one probe: a container runtime runs the probe
// on its own schedule and wants a quick yes or no.
const healthcheckTimeout = 3 * time.Second

// healthcheck is the container HEALTHCHECK: a distroless image has no curl
// or wget, so the binary probes itself. It GETs /healthz on the address the
// server listens on (OTA_HTTP_ADDR, with a wildcard host replaced by
// loopback) and succeeds on 200 only.
func healthcheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	target := fs.String("url", "", "URL to probe (default: /healthz on OTA_HTTP_ADDR's port at 127.0.0.1)")
	if err := parseFlags(fs, "otad healthcheck [--url URL]", args, stdout, stderr); err != nil {
		return err
	}
	if *target == "" {
		addr := strings.TrimSpace(getenv("OTA_HTTP_ADDR"))
		if addr == "" {
			addr = bootstrap.DefaultHTTPAddr
		}
		u, err := healthzURL(addr)
		if err != nil {
			return err
		}
		*target = u
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *target, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", *target, resp.Status)
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}

// healthzURL turns a listen address into the URL of its /healthz, as seen
// from the same host.
func healthzURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("healthcheck: OTA_HTTP_ADDR %q is not a host:port address", addr)
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// migrateAtStart is serve's migrate up. History partitions that could not
// all be made (bootstrap.ErrPartitionsBehind) do not stop the start — no
// request needs them — and are logged as a warning, for the alerts that
// watch for one: events land in the DEFAULT partition until
// `otad partitions` succeeds.
func migrateAtStart(ctx context.Context, db *sql.DB, logger *slog.Logger) error {
	err := bootstrap.Migrate(ctx, db, bootstrap.MigrateUp, logWriter{logger})
	if errors.Is(err, bootstrap.ErrPartitionsBehind) {
		logger.Warn("history partitions behind: run otad partitions (docs/SCALING.md, History)", "error", err.Error())
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	return nil
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
