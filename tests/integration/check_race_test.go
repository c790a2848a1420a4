// Package integration runs the application on its real adapters (Postgres
// through sqlx/lib/pq, Redis through rueidislock) in-process, to show the
// concurrency guarantees hold on the parts users meet.
package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/adapters/redislock"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// replica is one service instance's use cases: its own lock client, the
// shared database.
type replica struct {
	devices *application.Devices
	admin   *application.Admin
}

func newReplica(t *testing.T, db *sqlx.DB, locker ports.Locker) replica {
	t.Helper()
	repos, err := postgres.NewRepositories(db)
	if err != nil {
		t.Fatal(err)
	}
	deps := application.Deps{
		Devices: repos.Devices, Firmwares: repos.Firmwares,
		Rollouts: repos.Rollouts, Tasks: repos.Tasks, Attributes: repos.Attributes, Directory: repos.Directory,
		Locker: locker, Clock: local.NewClock(), IDs: local.NewUUIDs(), Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
	}
	devices, admin := testenv.UseCases(t, deps, time.Hour)
	return replica{devices: devices, admin: admin}
}

func redisLocker(t *testing.T, prefix string, metrics ...ports.LockMetrics) *redislock.Locker {
	t.Helper()
	var m ports.LockMetrics = ports.NopLockMetrics{}
	if len(metrics) > 0 {
		m = metrics[0]
	}
	l, cleanup, err := redislock.New(redislock.Config{URL: testenv.RedisURL(t), KeyPrefix: prefix, TTL: 5 * time.Second, Wait: 3 * time.Second, Majority: 1}, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return l
}

// seed publishes a firmware rolled out to everyone and registers devices.
func seed(t *testing.T, r replica, model string, devices int) []string {
	t.Helper()
	ctx := context.Background()
	fw, err := r.admin.PublishFirmware(ctx, testActor, domain.FirmwareSpec{Model: model, Version: "2.0.0",
		URL: "https://files.example/fw.bin", SizeBytes: 1, SHA256: strings.Repeat("0", 64)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.admin.StartRollout(ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: domain.RolloutSpec{Percentage: 100}}); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, devices)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-dev-%d", model, i)
		if _, err := r.admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: ids[i], Model: model, CurrentVersion: "1.0.0"}); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// hammer fires n simultaneous checks for one device, round-robin over the
// replicas, and returns the task ids they got.
func hammer(t *testing.T, replicas []replica, deviceID, model string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			svc := replicas[i%len(replicas)].devices
			dev, err := svc.IdentifyDevice(context.Background(), asDeviceID(deviceID))
			if err != nil {
				t.Errorf("identify %d: %v", i, err)
				return
			}
			res, err := svc.Check(context.Background(),
				ports.CheckRequest{Device: dev, Model: model, CurrentVersion: "1.0.0"})
			if err != nil || res.Task == nil {
				t.Errorf("check %d: %+v, %v", i, res, err)
				return
			}
			ids[i] = res.Task.Task.ID().String()
		}(i)
	}
	close(start)
	wg.Wait()
	return ids
}

func assertOneTask(t *testing.T, db *sqlx.DB, deviceID string, got []string) {
	t.Helper()
	for i, id := range got {
		if id != got[0] {
			t.Fatalf("caller %d got task %s, caller 0 got %s", i, id, got[0])
		}
	}
	var total, active int
	err := db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE status IN ('pending','downloading','downloaded','installing'))
		FROM tasks WHERE device_id = $1`, deviceID).Scan(&total, &active)
	if err != nil {
		t.Fatal(err)
	}
	if total != 1 || active != 1 {
		t.Fatalf("device %s has %d tasks (%d active), want exactly 1", deviceID, total, active)
	}
}

// Two replicas, each with its own Redis lock client, 200 concurrent checks
// of one device: one task, and every caller is handed its id.
func TestConcurrentChecksAcrossReplicasCreateOneTask(t *testing.T) {
	t.Parallel()
	db, _ := testenv.PostgresDB(t)
	prefix := "ota:test:" + uuid.NewString()
	// Four replicas, each with its own Redis client: within a replica
	// duplicates coalesce, across replicas only the lock serialises them.
	replicas := make([]replica, 4)
	for i := range replicas {
		replicas[i] = newReplica(t, db, redisLocker(t, prefix))
	}
	model := "race-" + uuid.NewString()[:8]
	devices := seed(t, replicas[0], model, 5)
	for _, d := range devices {
		assertOneTask(t, db, d, hammer(t, replicas, d, model, 200))
	}
}

// With the lock made useless, the partial unique index alone still leaves
// exactly one active task, and every caller gets that task's id: the lock
// is for efficiency, the constraint for correctness.
//
// The race is forced, not hoped for: a gate (LOCK TABLE tasks IN SHARE
// MODE) lets every caller read "no active task" and take its row locks,
// and stops each at its INSERT; once a pool's worth of callers wait there,
// the gate opens and their inserts meet the index together. Without
// ON CONFLICT all but one would fail, every time.
func TestDatabaseConstraintAloneCreatesOneTask(t *testing.T) {
	t.Parallel()
	db, dbURL := testenv.PostgresDB(t)
	// One replica per caller, so no in-process coalescing hides a race.
	replicas := make([]replica, 200)
	for i := range replicas {
		replicas[i] = newReplica(t, db, local.AlwaysGrantLocker{})
	}
	// The gate and its watcher have their own connections: the callers
	// may take every connection of db's pool.
	gateDB, err := sqlx.Open("postgres", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gateDB.Close() })
	model := "nolock-" + uuid.NewString()[:8]
	devices := seed(t, replicas[0], model, 5)
	for _, d := range devices {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		gate, err := gateDB.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gate.ExecContext(ctx, `LOCK TABLE tasks IN SHARE MODE`); err != nil {
			t.Fatal(err)
		}
		var got []string
		done := make(chan struct{})
		go func() {
			defer close(done)
			got = hammer(t, replicas, d, model, 200)
		}()
		// Every connection of the callers' pool ends up at the gate.
		waiting := 0
		for end := time.Now().Add(10 * time.Second); waiting < postgresPoolSize && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if err := gateDB.GetContext(ctx, &waiting, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'relation'`); err != nil {
				t.Fatal(err)
			}
		}
		if err := gate.Rollback(); err != nil {
			t.Fatal(err)
		}
		<-done
		cancel()
		if waiting < 2 {
			t.Fatalf("device %s: %d inserts met at the gate, want the race forced (at least 2)", d, waiting)
		}
		assertOneTask(t, db, d, got)
	}
}

// postgresPoolSize is how many connections testenv gives a test database's
// pool: as many callers can wait at the gate at once.
const postgresPoolSize = 12
