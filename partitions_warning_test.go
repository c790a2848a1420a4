package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/bootstrap"
	"github.com/ai-device/ota/tests/testenv"
)

// TestServesPartitionFailureIsLoggedAsAWarning: a month's partition that
// cannot be made does not stop `otad serve`; its start-up says so as a
// warning (docs/SCALING.md, "History") — the only place serve says that
// history has stopped being partitioned, so a level-based alert (WARN and
// above) must see it — while `otad migrate up` run alone fails.
func TestServesPartitionFailureIsLoggedAsAWarning(t *testing.T) {
	db, _ := testenv.PostgresDB(t)
	now := time.Now().UTC()
	// The state a stopped partitions job leaves: this month's audit_log
	// partition missing and a record of this month in DEFAULT.
	if _, err := db.Exec(`DROP TABLE audit_log_` + now.Format("2006_01")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO audit_log (at, actor_kind, action, target) VALUES ($1, 'root', 'user.create', 'x')`, now); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// What serve runs at start (main.go).
	if err := migrateAtStart(context.Background(), db.DB, logger); err != nil {
		t.Fatalf("serve's start-up migration: %v", err)
	}
	// `otad migrate up`, run by itself, fails: a deploy job that migrates
	// is told.
	if err := bootstrap.Migrate(context.Background(), db.DB, bootstrap.MigrateUp, &bytes.Buffer{}); !errors.Is(err, bootstrap.ErrPartitionsBehind) {
		t.Errorf("otad migrate up with a month it cannot make: %v, want ErrPartitionsBehind", err)
	}
	var warned bool
	for line := range strings.SplitSeq(buf.String(), "\n") {
		if strings.Contains(line, "audit_log partition 0 months ahead") {
			warned = strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`)
			if !warned {
				t.Errorf("serve's log of the month it could not make is not a warning: %s", line)
			}
		}
	}
	if !warned && !t.Failed() {
		t.Errorf("serve's log does not mention the month it could not make: %s", buf.String())
	}
}
