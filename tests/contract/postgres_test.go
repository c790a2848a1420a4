package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

// TestPostgresRepositories holds the Postgres repositories to the
// repository contract. Each suite gets its own database cloned from the
// migrated template (skipped when no Postgres is configured and no Docker
// engine answers; see testenv.PostgresDB).
func TestPostgresRepositories(t *testing.T) {
	contract.RunRepositories(t, func(t *testing.T) contract.Repos {
		db, _ := testenv.PostgresDB(t)
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			t.Fatal(err)
		}
		return contract.Repos{
			Devices:   repos.Devices,
			Firmwares: repos.Firmwares,
			Rollouts:  repos.Rollouts,
			Tasks:     repos.Tasks,
			Open:      repos.Rollouts,
		}
	})
}

// TestServingRepositories holds the repositories as production wires them
// (postgres.ServingSet: checks written behind, the catalog cached and
// invalidated by LISTEN/NOTIFY and by this instance's own writes, rollout
// judgements included; tasks direct) to the same contract: the
// speed-ups must not change what a caller can observe beyond what the ports
// allow (a check's record visible within a second).
func TestServingRepositories(t *testing.T) {
	contract.RunRepositories(t, func(t *testing.T) contract.Repos {
		db, url := testenv.PostgresDB(t)
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			t.Fatal(err)
		}
		seen, stopSeen, err := postgres.NewWriteBehindDevices(repos.Devices, postgres.WriteBehindConfig{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stopSeen)
		cache, stopCache, err := postgres.NewCatalogCache(repos.Firmwares, repos.Rollouts,
			postgres.CatalogCacheConfig{URL: postgres.DatabaseURL(url)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stopCache)
		tasks, err := postgres.NewServingTaskRepository(db, nil, cache)
		if err != nil {
			t.Fatal(err)
		}
		return contract.Repos{
			Devices:   seen,
			Firmwares: cache.Firmwares(),
			Rollouts:  cache.Rollouts(),
			Tasks:     tasks,
			Open:      repos.Rollouts,
		}
	})
}
