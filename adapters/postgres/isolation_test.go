package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/adapters/postgres"
)

// TestGuardedWritesKeepReadCommittedOnARepeatableReadDatabase: an event's
// one statement (and a creation's) runs outside a transaction and counts on
// READ COMMITTED's re-check after a lock wait, so that a race lost to a
// concurrent change is a refused write (the transaction path answers it).
// On a database whose default is REPEATABLE READ the same race would be a
// serialization failure, an error to the device; the pool postgres.Open
// makes starts every session at READ COMMITTED.
func TestGuardedWritesKeepReadCommittedOnARepeatableReadDatabase(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.db.ExecContext(ctx, `DO $$ BEGIN
		EXECUTE format('ALTER DATABASE %I SET default_transaction_isolation = %L', current_database(), 'repeatable read');
	END $$`); err != nil {
		t.Fatal(err)
	}
	plain, err := sqlx.Open("postgres", e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var level string
	if err := plain.GetContext(ctx, &level, `SHOW transaction_isolation`); err != nil || level != "repeatable read" {
		t.Fatalf("a plain session of the database runs at %q (%v); the test needs repeatable read", level, err)
	}

	db, closeDB, err := postgres.Open(postgres.Config{URL: postgres.DatabaseURL(e.url)})
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB()
	if err := db.GetContext(ctx, &level, `SHOW transaction_isolation`); err != nil || level != "read committed" {
		t.Fatalf("a session of the service's pool runs at %q (%v), want read committed", level, err)
	}
	repos, err := postgres.NewRepositories(db)
	if err != nil {
		t.Fatal(err)
	}

	// A change to the task commits while the statement waits for its row.
	o := e.offer(t, "isolation", "2.0.0")
	before := e.createTask(t, e.device(t, "iso-"+uuid.NewString()[:8], "isolation").ID().String(), o)
	other, err := plain.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback() }()
	if _, err := other.ExecContext(ctx, `UPDATE tasks SET updated_at = updated_at + interval '1 millisecond' WHERE id = $1`,
		before.ID().String()); err != nil {
		t.Fatal(err)
	}
	type result struct {
		updated bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		_, updated, err := repos.Tasks.UpdateIfUnchanged(ctx, e.ended(t, before, o, "end", "succeeded"))
		done <- result{updated, err}
	}()
	waitForLockWait(t, e, ctx)
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.updated {
		t.Fatalf("the statement that lost the race: updated %v, %v; want refused without an error", r.updated, r.err)
	}
}
