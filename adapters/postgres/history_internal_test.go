package postgres

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/tests/testenv"
)

// historyDevices is how many devices TestCheckPlanIgnoresHistory seeds.
const historyDevices = 2000

// seedHistory gives every device finished tasks (succeeded), each with two
// events, until each has perDevice of them.
func seedHistory(t *testing.T, db *sqlx.DB, from, to int) {
	t.Helper()
	for k := from; k < to; k++ {
		if _, err := db.Exec(`WITH t AS (
				INSERT INTO tasks (id, device_id, firmware_id, rollout_id, status, progress, attempt, created_at, updated_at)
				SELECT gen_random_uuid(), 'h-' || i, (SELECT id FROM firmwares LIMIT 1), (SELECT id FROM rollouts LIMIT 1),
					'succeeded', 100, 1, now() - make_interval(days => $1 + 1), now() - make_interval(days => $1 + 1)
				FROM generate_series(1, $2) i
				RETURNING id, created_at)
			INSERT INTO task_events (task_id, event_id, fingerprint, created_at, task_created_at)
			SELECT t.id, e, 'f', t.created_at, t.created_at FROM t, (VALUES ('downloading'), ('succeeded')) AS ev(e)`, k, historyDevices); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`ANALYZE`); err != nil {
		t.Fatal(err)
	}
}

var (
	planNumbers = regexp.MustCompile(`(rows|loops|hit|read|Removed|Heap Fetches)[=:] ?[0-9]+`)
	planBuffers = regexp.MustCompile(`shared hit=([0-9]+)`)
)

// explainCheck returns the check view's plan for one device (generic, as
// the prepared statement runs) with its numbers masked, and the shared
// buffers it touched.
func explainCheck(t *testing.T, db *sqlx.DB, device string) (shape string, buffers int, text string) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	name := "cv_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	defer func() { _, _ = conn.ExecContext(ctx, `DEALLOCATE `+name+`; RESET plan_cache_mode`) }()
	for _, q := range []string{`SET plan_cache_mode = force_generic_plan`, `PREPARE ` + name + `(text) AS ` + checkViewByIDSQL} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var lines []string
	if err := conn.SelectContext(ctx, &lines, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE `+name+`('`+device+`')`); err != nil {
		t.Fatal(err)
	}
	text = strings.Join(lines, "\n")
	if m := planBuffers.FindStringSubmatch(text); m != nil { // the first: the top node's total
		buffers, _ = strconv.Atoi(m[1])
	}
	var nodes []string
	for _, l := range lines {
		if strings.Contains(l, "Buffers:") || strings.Contains(l, "Planning:") {
			continue
		}
		nodes = append(nodes, planNumbers.ReplaceAllString(l, "$1=N"))
	}
	return strings.Join(nodes, "\n"), buffers, text
}

// TestCheckPlanIgnoresHistory: the check's one statement has the same
// plan and touches the same number of buffers whether each device has 1
// or 10 finished tasks (with their events) behind it: it reads tasks only
// through the partial indexes of active and failed tasks. The mean time
// of the read is logged (load-sensitive; the buffers are not).
//
//	go test ./adapters/postgres -run TestCheckPlanIgnoresHistory -v
func TestCheckPlanIgnoresHistory(t *testing.T) {
	t.Parallel()
	db, _ := testenv.PostgresDB(t)
	repos, err := NewRepositories(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO devices (device_id, model, current_version, token_hash, last_seen_at, created_at)
		SELECT 'h-' || i, 'm', '1.0.0', sha256(('h-' || i)::bytea), now(), now() FROM generate_series(1, ` + strconv.Itoa(historyDevices) + `) i`,
		`INSERT INTO firmwares (id, model, version, version_key, url, size_bytes, sha256, status, created_at, updated_at)
		VALUES (gen_random_uuid(), 'm', '2.0.0', '2.0.0', 'https://fw.example/m.bin', 1, repeat('ab', 32), 'released', now(), now())`,
		`INSERT INTO rollouts (id, firmware_id, percentage, status, created_at, updated_at)
		SELECT gen_random_uuid(), id, 100, 'active', now(), now() FROM firmwares`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	// Every device has an active task and one failed task, then history.
	for _, status := range []string{"failed", "pending"} {
		if _, err := db.Exec(`INSERT INTO tasks (id, device_id, firmware_id, rollout_id, status, progress, attempt, created_at, updated_at)
			SELECT gen_random_uuid(), 'h-' || i, (SELECT id FROM firmwares), (SELECT id FROM rollouts), $2, 0, 1, now(), now()
			FROM generate_series(1, $1) i`, historyDevices, status); err != nil {
			t.Fatal(err)
		}
	}
	measure := func(label string) (string, int) {
		shape, buffers, text := explainCheck(t, db, "h-1000")
		const reads = 500
		start := time.Now()
		for i := range reads {
			if _, err := repos.Tasks.CheckViewOf(context.Background(), asDeviceID("h-"+strconv.Itoa(1+i*7%historyDevices))); err != nil {
				t.Fatal(err)
			}
		}
		var tasks, events int
		_ = db.Get(&tasks, `SELECT count(*) FROM tasks`)
		_ = db.Get(&events, `SELECT count(*) FROM task_events`)
		t.Logf("%s: %d tasks, %d events; check read mean %v over %d reads (load-sensitive); %d shared buffers; plan:\n%s",
			label, tasks, events, time.Since(start)/reads, reads, buffers, text)
		return shape, buffers
	}
	seedHistory(t, db, 0, 1)
	shape1, buffers1 := measure("1× history")
	seedHistory(t, db, 1, 10)
	shape10, buffers10 := measure("10× history")
	if shape1 != shape10 {
		t.Errorf("the check's plan changed with 10× history:\n%s\n--- became ---\n%s", shape1, shape10)
	}
	if buffers1 == 0 || buffers10 > buffers1 {
		t.Errorf("the check's read touched %d buffers with 10× history, %d with 1×", buffers10, buffers1)
	}
}
