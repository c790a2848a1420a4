package cluster

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/ai-device/ota/tests/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunWithOtad(m)) }

// Two otad processes whose OTA_REDIS_URL names one node of the cluster
// (rueidis discovers the rest) serve 100 duplicate checks split between
// them: one task.
func TestTwoOtadInstancesOnTheCluster(t *testing.T) {
	nodes := startCluster(t)
	db, dbURL := testenv.PostgresDB(t)
	admin := "cluster-admin-token-" + uuid.NewString()
	otads := testenv.StartOtads(t, testenv.OtadConfig{
		DatabaseURL: dbURL, RedisURL: "redis://" + nodes[1].addr(), AdminToken: admin,
		Env: map[string]string{"OTA_DEVICE_RATE_LIMIT": "0", "OTA_LOCK_WAIT": "5s"},
	}, "a", "b")
	api := func(i int) string { return otads[i%2].URL + "/api/v1" }

	dev := "cl-" + uuid.NewString()[:8]
	code, reg := testenv.PostJSON(t, api(0)+"/admin/devices", admin, map[string]any{"device_id": dev, "model": "clm"})
	if code != 201 {
		t.Fatalf("register: %d %v", code, reg)
	}
	code, fw := testenv.PostJSON(t, api(1)+"/admin/firmwares", admin, map[string]any{"model": "clm", "version": "3.0.0",
		"url": "https://f.example/3", "size_bytes": 3, "sha256": strings.Repeat("e", 64)})
	if code != 201 {
		t.Fatalf("publish: %d %v", code, fw)
	}
	if code, r := testenv.PostJSON(t, api(0)+"/admin/rollouts", admin, map[string]any{"firmware_id": fw["id"], "percentage": 100}); code != 201 {
		t.Fatalf("rollout: %d %v", code, r)
	}
	token := reg["token"].(string)
	ids := make([]string, 100)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			code, body := testenv.PostJSON(t, api(i)+"/devices/"+dev+"/ota/check", token, map[string]any{"model": "clm", "current_version": "1.0.0"})
			if code != 200 || body["task"] == nil {
				t.Errorf("check %d: %d %v", i, code, body)
				return
			}
			ids[i] = body["task"].(map[string]any)["id"].(string)
		}(i)
	}
	close(start)
	wg.Wait()
	for i := range ids {
		if ids[i] != ids[0] {
			t.Fatalf("caller %d got %q, caller 0 got %q", i, ids[i], ids[0])
		}
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM tasks WHERE device_id = $1`, dev).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d tasks (%v), want 1", n, err)
	}
}
