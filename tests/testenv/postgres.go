// Package testenv gives tests the services they need (Postgres, Redis),
// each test isolated from the others, and skips them with a clear message
// when a service is not available.
package testenv

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/pressly/goose/v3"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/ai-device/ota/migrations"

	// The driver registers itself as "postgres".
	_ "github.com/lib/pq"
)

// PostgresURLEnv names the variable holding the URL of a Postgres server
// tests may create databases on, such as
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable. The user
// needs CREATEDB.
const PostgresURLEnv = "OTA_TEST_DATABASE_URL"

// PostgresImage is the image started when PostgresURLEnv is unset and a
// Docker engine answers.
const PostgresImage = "postgres:15-alpine"

// postgresTestMaxConns is each test database's pool size: enough for the
// concurrency tests, small enough that parallel tests in parallel test
// binaries stay well under the server's max_connections.
const postgresTestMaxConns = 12

var (
	pgOnce     sync.Once
	pgAdmin    *sql.DB  // on the base URL: creates and drops databases
	pgBase     *url.URL // the server, with the database path replaced per test
	pgTemplate string   // the migrated template every test database is cloned from
	pgSkip     string   // why tests cannot have Postgres (skip)
	pgErr      error    // why setting Postgres up failed (fail)
)

// PostgresDB gives the test its own database, cloned from a template that
// holds the migrated schema, and returns a pool on it and its URL. The
// database is dropped, and the pool closed, when the test ends.
//
// Cloning (CREATE DATABASE … TEMPLATE) costs a few tens of milliseconds,
// far less than migrating, and a test can then do anything — run migrations
// down, fill tables, race transactions — without seeing any other test.
// The server is PostgresURLEnv's, else one container per test binary
// (testcontainers, reaped when the binary exits); with neither, the test
// is skipped.
func PostgresDB(t testing.TB) (*sqlx.DB, string) {
	t.Helper()
	pgOnce.Do(postgresSetup)
	if pgSkip != "" {
		Skip(t, PostgresURLEnv, pgSkip)
	}
	if pgErr != nil {
		t.Fatalf("testenv: %v", pgErr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := "test_" + randomHex(8)
	if _, err := pgAdmin.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(name)+` TEMPLATE `+pq.QuoteIdentifier(pgTemplate)); err != nil {
		t.Fatalf("testenv: creating test database %s from %s: %v", name, pgTemplate, err)
	}
	dbURL := postgresURLFor(name)
	db, err := sqlx.Open("postgres", dbURL)
	if err != nil {
		postgresDrop(name)
		t.Fatalf("testenv: opening test database %s: %v", name, err)
	}
	db.SetMaxOpenConns(postgresTestMaxConns)
	db.SetMaxIdleConns(postgresTestMaxConns)
	t.Cleanup(func() {
		_ = db.Close()
		if err := postgresDrop(name); err != nil {
			t.Errorf("testenv: dropping test database %s: %v", name, err)
		}
	})
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("testenv: connecting to test database %s: %v", name, err)
	}
	return db, dbURL
}

// postgresDrop drops a test database, disconnecting anyone still on it.
func postgresDrop(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := pgAdmin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+pq.QuoteIdentifier(name)+` WITH (FORCE)`)
	return err
}

// postgresSetup finds the server and makes sure the template exists. It runs
// once per test binary.
func postgresSetup() {
	raw := os.Getenv(PostgresURLEnv)
	if raw == "" {
		var skip string
		raw, skip, pgErr = postgresContainer()
		if skip != "" || pgErr != nil {
			pgSkip = skip
			return
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		pgErr = fmt.Errorf("%s must be a postgres:// URL", PostgresURLEnv)
		return
	}
	pgBase = u
	pgAdmin, err = sql.Open("postgres", raw)
	if err != nil {
		pgErr = fmt.Errorf("opening %s: %w", u.Redacted(), err)
		return
	}
	pgAdmin.SetMaxOpenConns(4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := pgAdmin.PingContext(ctx); err != nil {
		pgErr = fmt.Errorf("cannot reach the test Postgres server at %s (from %s): %w", u.Redacted(), PostgresURLEnv, err)
		return
	}
	pgTemplate, pgErr = postgresEnsureTemplate(ctx)
}

// postgresContainer starts a Postgres container when a Docker engine
// answers. It returns a skip reason when there is none.
func postgresContainer() (dbURL, skip string, err error) {
	const noServer = "testenv: no Postgres for this test: set " + PostgresURLEnv +
		" (e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable) or run a Docker engine"
	if !dockerAvailable() {
		return "", noServer, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctr, err := tcpostgres.Run(ctx, PostgresImage,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		return "", "", fmt.Errorf("starting %s: %w", PostgresImage, err)
	}
	// The container lives as long as the test binary; testcontainers'
	// reaper removes it when the binary exits.
	dbURL, err = ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return "", "", fmt.Errorf("reading the container's URL: %w", err)
	}
	return dbURL, "", nil
}

// dockerAvailable reports whether a Docker engine answers. testcontainers
// may panic when no engine is configured at all; that is a "no".
func dockerAvailable() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	p, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return false
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Health(ctx) == nil
}

// postgresEnsureTemplate makes sure the migrated template exists and
// returns its name. The name carries a hash of the migration files, so a
// changed schema gets a new template and a stale one is never used.
//
// Test binaries run in parallel and share the server, so creation is
// serialised with an advisory lock, and the template is built under a
// temporary name and renamed when complete: a database with the final
// name is always a finished one, even after a crash mid-build.
func postgresEnsureTemplate(ctx context.Context) (string, error) {
	sum, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "ota_template_" + sum[:16]
	building := name + "_building"

	conn, err := pgAdmin.Conn(ctx) // the advisory lock belongs to a session
	if err != nil {
		return "", err
	}
	defer conn.Close()
	lockKey := advisoryKey(name)
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, lockKey); err != nil {
		return "", fmt.Errorf("locking the template: %w", err)
	}
	defer func() {
		_, _ = conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, lockKey)
	}()

	var exists bool
	if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", fmt.Errorf("looking for the template: %w", err)
	}
	if exists {
		return name, nil
	}
	// A leftover of a run that died mid-build.
	if _, err := conn.ExecContext(ctx, `DROP DATABASE IF EXISTS `+pq.QuoteIdentifier(building)+` WITH (FORCE)`); err != nil {
		return "", fmt.Errorf("dropping a stale template: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(building)); err != nil {
		return "", fmt.Errorf("creating the template: %w", err)
	}
	if err := postgresMigrate(ctx, postgresURLFor(building)); err != nil {
		return "", fmt.Errorf("migrating the template: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `ALTER DATABASE `+pq.QuoteIdentifier(building)+` RENAME TO `+pq.QuoteIdentifier(name)); err != nil {
		return "", fmt.Errorf("publishing the template: %w", err)
	}
	// Marked as a template: any role with CREATEDB may clone it, and it
	// cannot be dropped by accident.
	if _, err := conn.ExecContext(ctx, `ALTER DATABASE `+pq.QuoteIdentifier(name)+` WITH IS_TEMPLATE true`); err != nil {
		return "", fmt.Errorf("marking the template: %w", err)
	}
	return name, nil
}

// postgresMigrate applies every migration to the database at dbURL and
// closes its connections (a template must have none to be cloned).
func postgresMigrate(ctx context.Context, dbURL string) error {
	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// migrationsHash digests the names and contents of the migration files.
func migrationsHash() (string, error) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", errors.New("no migrations embedded")
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// advisoryKey turns a name into a pg_advisory_lock key.
func advisoryKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("ota-testenv:" + name))
	return int64(h.Sum64())
}

// postgresURLFor is the base URL pointing at another database.
func postgresURLFor(dbName string) string {
	u := *pgBase
	u.Path = "/" + dbName
	u.RawPath = ""
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}
