package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/tests/testenv"
)

// TestRotatedTokenStopsWithinTheReplicasLag: with OTA_DATABASE_READ_URL the
// device's authentication (TaskRepository.CheckView, by token hash) reads
// the replica, which may be up to OTA_READ_MAX_LAG behind, so a rotated
// token's old one may still authenticate after the rotation commits — for
// at most that bound (docs/SCALING.md, "Read replicas"): past it, a replica
// that has not replayed the rotation is not read, and the primary refuses
// the old token. The new one is known at once (looked up on the primary).
func TestRotatedTokenStopsWithinTheReplicasLag(t *testing.T) {
	const maxLag, probe = time.Second, 50 * time.Millisecond
	pair := testenv.StartStreamingPair(t)
	ctx := context.Background()
	primary := pair.Open(t, pair.PrimaryURL)
	replicaAdmin := pair.Open(t, pair.ReplicaURL)
	reads, closeReads, err := postgres.OpenReadReplica(postgres.ReadReplicaConfig{
		URL: postgres.DatabaseURL(pair.ReplicaURL), MaxLag: maxLag, Probe: probe,
	}, primary, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeReads)
	repos, err := postgres.NewRepositories(primary)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := postgres.NewServingTaskRepository(primary, reads, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: primary, devices: repos.Devices, firmwares: repos.Firmwares, rollouts: repos.Rollouts, tasks: repos.Tasks,
		now: time.Now().UTC().Truncate(time.Microsecond)}
	d := e.device(t, "rot-1", "m")
	old := d.TokenHash()
	waitFor(t, "the replica to know the device", 5*time.Second, func() bool {
		v, err := tasks.CheckView(ctx, old)
		return err == nil && v.Device.ID() == d.ID() && reads.Stats().Reads.Load() > 0
	})

	// The replica replays a little late (here: paused for the moment).
	if _, err := replicaAdmin.ExecContext(ctx, `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = replicaAdmin.ExecContext(ctx, `SELECT pg_wal_replay_resume()`) })
	_, fresh, err := domain.NewDeviceToken()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repos.Devices.Update(ctx, d.ID(), func(dev *domain.Device) error { dev.RotateToken(fresh); return nil }, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	if v, err := tasks.CheckView(ctx, fresh); err != nil || v.Device.ID() != d.ID() {
		t.Fatalf("the new token at once: %v", err)
	}
	// Past the bound (and a probe), the paused replica is not read: the
	// old token is refused, though the replica still holds it.
	deadline := rotated.Add(maxLag + 2*probe)
	for {
		_, err := tasks.CheckView(ctx, old)
		if errors.Is(err, domain.ErrNotFound) || errors.Is(err, domain.ErrUnauthorized) {
			break
		}
		if err != nil {
			t.Fatalf("CheckView(old token): %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old token still authenticates %v after its rotation, past OTA_READ_MAX_LAG %v", time.Since(rotated), maxLag)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var onReplica int
	if err := replicaAdmin.QueryRowContext(ctx, `SELECT count(*) FROM devices WHERE token_hash = $1`, old[:]).Scan(&onReplica); err != nil || onReplica != 1 {
		t.Fatalf("the replica should still hold the old token (replay paused): %d, %v", onReplica, err)
	}
}
