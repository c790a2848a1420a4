package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/tests/testenv"
)

// TestRolloutsVerify: counters kept by the task transactions match the
// recount (exit 0); a counter changed by hand is reported with its stored
// and recounted value (exit 1), and only in its rollout.
func TestRolloutsVerify(t *testing.T) {
	db, dbURL := testenv.PostgresDB(t)
	ctx := context.Background()
	staged, plain := seedRollout(t, db, true), seedRollout(t, db, false)
	verify := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		env := map[string]string{"OTA_DATABASE_URL": dbURL}
		code := run(ctx, append([]string{"rollouts", "verify"}, args...), func(k string) string { return env[k] }, &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if code, out := verify(); code != 0 || !strings.Contains(out, "the counters of 2 rollouts match their tasks") {
		t.Fatalf("clean verify: exit %d\n%s", code, out)
	}
	// The migration's backfill gives the counters the task transactions kept.
	kept := storedCounts(t, db)
	for _, cmd := range []string{"down", "up"} {
		var stdout, stderr bytes.Buffer
		env := map[string]string{"OTA_DATABASE_URL": dbURL}
		if code := run(ctx, []string{"migrate", cmd}, func(k string) string { return env[k] }, &stdout, &stderr); code != 0 {
			t.Fatalf("migrate %s: exit %d\n%s%s", cmd, code, stdout.String(), stderr.String())
		}
	}
	if got := storedCounts(t, db); !maps.Equal(got, kept) {
		t.Fatalf("counters backfilled by the migration:\n%v\nkept by the transactions:\n%v", got, kept)
	}
	if code, out := verify(); code != 0 {
		t.Fatalf("verify after the backfill: exit %d\n%s", code, out)
	}
	// Drift: one shard row of the staged rollout's whole count of successes.
	if _, err := db.ExecContext(ctx, `UPDATE rollout_counters SET devices = devices + 1 WHERE ctid = (
		SELECT ctid FROM rollout_counters WHERE rollout_id = $1 AND status = 'succeeded'
			AND stage_started_at = '0001-01-01 00:00:00+00' LIMIT 1)`, staged); err != nil {
		t.Fatal(err)
	}
	code, out := verify()
	want := fmt.Sprintf("rollout %s, whole rollout, succeeded: stored 3, recounted 2", staged)
	if code != 1 || !strings.Contains(out, want) || strings.Contains(out, plain) || strings.Count(out, ": stored ") != 1 {
		t.Fatalf("drifted verify: exit %d, want 1 and %q only\n%s", code, want, out)
	}
	// A stage's counter drifts alone too.
	if _, err := db.ExecContext(ctx, `UPDATE rollout_counters SET devices = devices - 1 WHERE ctid = (
		SELECT ctid FROM rollout_counters WHERE rollout_id = $1 AND status = 'failed'
			AND stage_started_at <> '0001-01-01 00:00:00+00' AND devices > 0 LIMIT 1)`, staged); err != nil {
		t.Fatal(err)
	}
	if code, out := verify("--rollout", staged); code != 1 || !strings.Contains(out, ", stage started ") || !strings.Contains(out, "failed: stored 0, recounted 1") {
		t.Fatalf("stage drift: exit %d\n%s", code, out)
	}
	if code, out := verify("--rollout", plain); code != 0 || !strings.Contains(out, "the counters of 1 rollouts match") {
		t.Fatalf("the other rollout alone: exit %d\n%s", code, out)
	}
	if code, out := verify("--rollout", "nope"); code != 2 || !strings.Contains(out, "usage:") {
		t.Fatalf("bad id: exit %d\n%s", code, out)
	}
}

// seedRollout starts a rollout (with stages or not) and gives four devices
// tasks through the application's task transactions: two succeed, one
// fails, one stays pending. It returns the rollout's id.
func seedRollout(t *testing.T, db *sqlx.DB, stages bool) string {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	devices := try(postgres.NewDeviceRepository(db))(t)
	firmwares := try(postgres.NewFirmwareRepository(db))(t)
	rollouts := try(postgres.NewRolloutRepository(db))(t)
	tasks := try(postgres.NewTaskRepository(db))(t)
	model := "m-" + uuid.NewString()[:8]
	fw := try(domain.NewFirmware(domain.UUIDOf(uuid.New()), domain.FirmwareSpec{Model: model, Version: "2.0.0",
		URL: "https://cdn.example.com/fw.bin", SizeBytes: 1, SHA256: strings.Repeat("ab", 32)}, now))(t)
	must(t, firmwares.Create(ctx, fw, domain.AuditRecord{}))
	spec := domain.RolloutSpec{Percentage: 100}
	if stages {
		spec = domain.RolloutSpec{Stages: []domain.StageRequest{{Percentage: new(50), MinFinished: new(10)}, {Percentage: new(100)}}}
	}
	ro := try(domain.NewRollout(domain.UUIDOf(uuid.New()), fw, spec, now))(t)
	must(t, rollouts.Create(ctx, ro, domain.AuditRecord{}))
	for i, end := range []string{"succeeded", "succeeded", "failed", ""} {
		_, hash := try2(domain.NewDeviceToken())(t)
		d := try(domain.NewDevice(try(domain.ParseDeviceID(fmt.Sprintf("%s-%d", model, i)))(t), model, "1.0.0", hash, now))(t)
		must(t, devices.Create(ctx, d, domain.AuditRecord{}))
		tk := try(domain.NewTask(domain.UUIDOf(uuid.New()), d.ID(), domain.Offer{Firmware: fw, Rollout: ro}, 1, now))(t)
		_, _, err := application.ReplaceActive(ctx, tasks, d.ID(), func(application.TaskState) (*domain.Task, error) { return &tk, nil }, nil)
		must(t, err)
		if end == "" {
			continue
		}
		ev := try(domain.NewEvent("e1", end, nil, "", ""))(t)
		_, err = application.ApplyEvent(ctx, tasks, tk.ID(), ev, func(x *domain.Task, prior *domain.Event) (bool, error) {
			return x.ApplyEvent(ev, prior, now.Add(time.Second))
		}, nil)
		must(t, err)
	}
	return ro.ID().String()
}

// storedCounts reads every rollout's counters, by rollout and stage.
func storedCounts(t *testing.T, db *sqlx.DB) map[string]domain.TaskStats {
	t.Helper()
	tasks := try(postgres.NewTaskRepository(db))(t)
	counts := try(tasks.StoredCounts(context.Background(), domain.UUID{}))(t)
	out := map[string]domain.TaskStats{}
	for _, c := range counts {
		out[c.Rollout.String()+" "+c.Stage.String()] = c.Stats
	}
	return out
}

func try[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		must(t, err)
		return v
	}
}

func try2[A, B any](a A, b B, err error) func(*testing.T) (A, B) {
	return func(t *testing.T) (A, B) {
		t.Helper()
		must(t, err)
		return a, b
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
