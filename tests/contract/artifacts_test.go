package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

func TestMemoryArtifacts(t *testing.T) {
	store := memory.NewStore()
	contract.RunArtifacts(t, func(*testing.T) contract.ArtifactRepos {
		return contract.ArtifactRepos{Artifacts: memory.NewArtifacts(store), Firmwares: memory.NewFirmwares(store)}
	})
}

func TestPostgresArtifacts(t *testing.T) {
	contract.RunArtifacts(t, func(t *testing.T) contract.ArtifactRepos {
		db, _ := testenv.PostgresDB(t)
		repos, err := postgres.NewRepositories(db)
		if err != nil {
			t.Fatal(err)
		}
		return contract.ArtifactRepos{Artifacts: postgres.NewArtifactRepository(db), Firmwares: repos.Firmwares}
	})
}
