package mender_test

// SWUpdate (hawkBit DDI) devices beside mender-client ones; the SWUpdate
// rig is tests/testenv's, shared with tests/ddi.

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ai-device/ota/tests/testenv"
)

func TestMixedFleetGetsOneTaskPerDevice(t *testing.T) {
	r := newRig(t)
	swBin := testenv.RequireSWUpdate(t, "the mixed-fleet test")
	// One firmware for the whole fleet: SWUpdate fetches release-2 (the
	// .swu), mender-client release-2.mender from the same URL.
	signer := testenv.NewSWUSigner(t, r.dir, "ota-mender-test-signer")
	swu := signer.WriteSWU(t, filepath.Join(r.dir, "www", "release-2"), "2.0.0", "1.0")
	r.buildArtifact("release-2", false)
	img := image{url: r.files.URL + "/release-2", size: swu.Size, sha256: swu.SHA256}
	rollout := r.release("2.0.0", "release-2", img, 3, map[string]any{"sha1": swu.SHA1, "md5": swu.MD5})

	var menders []*device
	for i, kind := range []string{"rsa", "ecdsa", "ed25519"} {
		d := r.newDevice(fmt.Sprintf("mix-m%d", i+1), "release-1", kind)
		r.register(d)
		menders = append(menders, d)
	}
	swTokens := map[string]string{}
	for _, id := range []string{"mix-s1", "mix-s2"} {
		swTokens[id] = r.admin(http.MethodPost, "/devices", map[string]any{"device_id": id, "model": model, "current_version": "1.0.0"},
			http.StatusCreated)["token"].(string)
	}

	var wg sync.WaitGroup
	var clients []*client
	for _, d := range menders {
		clients = append(clients, r.start(d))
	}
	for id, tok := range swTokens {
		wg.Go(func() {
			testenv.RunSWUpdateUntil(t, "install", id, func() bool {
				ts, err := r.tryTasks(id)
				return err == nil && len(ts) == 1 && ts[0].Status != "pending" && ts[0].Progress == 100
			}, func(tmp string) *testenv.Client {
				return testenv.StartSWUpdate(t, swBin, tmp, r.otad.URL, id, tok, "board", signer.Cert)
			})
		})
	}
	for _, d := range menders {
		r.waitFor(d.id+" succeeds", clientWait, func() bool { return r.oneTask(d.id, "succeeded") },
			func() string { return fmt.Sprintf("tasks: %+v", r.tasks(d.id)) })
	}
	wg.Wait()
	for _, c := range clients {
		r.stopWhenIdle(c)
	}
	for _, d := range menders {
		if ts := r.tasks(d.id); len(ts) != 1 || ts[0].Status != "succeeded" || !d.installed() {
			t.Errorf("%s: %+v installed=%v, want exactly one succeeded task", d.id, ts, d.installed())
		}
	}
	for id := range swTokens {
		if ts := r.tasks(id); len(ts) != 1 {
			t.Errorf("%s: %+v, want exactly one task", id, ts)
		}
	}
	stats := r.admin(http.MethodGet, "/rollouts/"+rollout, nil, http.StatusOK)["stats"].(map[string]any)
	total := 0.0
	for _, v := range stats {
		total += v.(float64)
	}
	if total != 5 || stats["succeeded"].(float64) < 3 {
		t.Fatalf("rollout stats %v, want 5 tasks (3 succeeded by mender clients)", stats)
	}
}
