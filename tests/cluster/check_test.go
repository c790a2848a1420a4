package cluster

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// Two replicas locking on the cluster, 100 duplicate checks for each of ten
// devices: one task per device, every caller handed its id.
func TestChecksOnClusterCreateOneTaskPerDevice(t *testing.T) {
	nodes := startCluster(t)
	db, _ := testenv.PostgresDB(t)
	prefix := "ota:lock:" + uuid.NewString()
	var replicas []*application.Devices
	var admin *application.Admin
	repos, err := postgres.NewRepositories(db)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		deps := application.Deps{
			Devices: repos.Devices, Firmwares: repos.Firmwares, Rollouts: repos.Rollouts, Tasks: repos.Tasks,
			Attributes: repos.Attributes, Directory: repos.Directory, Locker: newLocker(t, nodes, prefix, 1, 3*time.Second), Clock: local.NewClock(), IDs: local.NewUUIDs(),
			Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
		}
		d, err := application.NewDevices(deps, application.PollInterval(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, d)
		if admin, err = application.NewAdmin(deps); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	fw, err := admin.PublishFirmware(ctx, testActor, domain.FirmwareSpec{Model: "cl", Version: "2.0.0", URL: "https://f.example/a", SizeBytes: 1, SHA256: strings.Repeat("c", 64)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.StartRollout(ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: domain.RolloutSpec{Percentage: 100}}); err != nil {
		t.Fatal(err)
	}
	for dev := 0; dev < 10; dev++ {
		id := "cl-" + uuid.NewString()[:8]
		if _, err := admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: id, Model: "cl"}); err != nil {
			t.Fatal(err)
		}
		got := make([]string, 100)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range got {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				dev, err := replicas[i%2].IdentifyDevice(ctx, asDeviceID(id))
				if err != nil {
					t.Errorf("identify: %v", err)
					return
				}
				res, err := replicas[i%2].Check(ctx, ports.CheckRequest{Device: dev, Model: "cl", CurrentVersion: "1.0.0"})
				if err != nil || res.Task == nil {
					t.Errorf("check: %+v %v", res, err)
					return
				}
				got[i] = res.Task.Task.ID().String()
			}(i)
		}
		close(start)
		wg.Wait()
		for i := range got {
			if got[i] != got[0] {
				t.Fatalf("device %s: caller %d got %s, caller 0 got %s", id, i, got[i], got[0])
			}
		}
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM tasks WHERE device_id = $1`, id).Scan(&n); err != nil || n != 1 {
			t.Fatalf("device %s has %d tasks (%v), want 1", id, n, err)
		}
	}
}
