package bootstrap

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/lib/pq"
)

// EnsureDatabase creates the database named in databaseURL when it does not
// exist, by connecting to the server's maintenance database "postgres", and
// reports whether it did (so `make run` can say it created one).
// It serves `make run` on a fresh machine; production databases are made
// by their operators, so serve only does this when asked (--create-db).
func EnsureDatabase(ctx context.Context, databaseURL string) (created bool, err error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return false, fmt.Errorf("OTA_DATABASE_URL: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" || name == "postgres" {
		return false, nil
	}
	admin := *u
	admin.Path = "/postgres"
	db, err := sql.Open("postgres", admin.String())
	if err != nil {
		return false, fmt.Errorf("opening maintenance database: %w", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return false, fmt.Errorf("cannot reach Postgres on %s: %w", u.Host, err)
	}
	if exists {
		return false, nil
	}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+pq.QuoteIdentifier(name)); err != nil {
		if pe, ok := err.(*pq.Error); ok && pe.Code == "42P04" { // created meanwhile by another replica
			return false, nil
		}
		return false, fmt.Errorf("creating database %q: %w", name, err)
	}
	return true, nil
}
