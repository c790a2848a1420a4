package ddi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ai-device/ota/tests/testenv"
)

// upload stores the file at path in otad and returns the artifact's id.
func (r *rig) upload(path string) string {
	r.t.Helper()
	return testenv.UploadArtifact(r.t, r.otad.URL, adminToken, path)
}

// TestSWUpdateInstallsAHostedImage: the image is uploaded to otad, not
// hosted elsewhere; the real SWUpdate finds it in deploymentBase, downloads
// it from hawkBit's artifact route (with its target token), verifies its
// sha256 and signature, installs it and confirms.
func TestSWUpdateInstallsAHostedImage(t *testing.T) {
	r := newRig(t)
	token := r.register("sw-h1", "board-h")
	img := r.buildSWU("board-h-1.1.0.swu", "1.1.0", "1.0")
	// Nothing is served from the file server: the image exists only in otad.
	path := filepath.Join(r.dir, "www", "board-h-1.1.0.swu")
	artifact := r.upload(path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	fw := r.admin(http.MethodPost, "/firmwares", map[string]any{"model": "board-h", "version": "1.1.0", "artifact_id": artifact}, http.StatusCreated)
	if fw["sha256"] != img.sha256 || fw["sha1"] != img.sha1 {
		t.Fatalf("firmware %v does not carry the image's checksums", fw)
	}
	r.admin(http.MethodPost, "/rollouts", map[string]any{"firmware_id": fw["id"], "percentage": 100}, http.StatusCreated)

	c := r.runUntil("install", "sw-h1", token, "board-h", func() bool {
		ts, _ := r.tryTasks("sw-h1")
		return len(ts) == 1 && (ts[0].Status == "downloading" || ts[0].Status == "installing") && ts[0].Progress == 100
	})
	if c == nil {
		t.FailNow()
	}
	if want := "/softwaremodules/" + fw["id"].(string) + "/artifacts/board-h-1.1.0.swu"; !strings.Contains(c.Log.String(), want) {
		t.Fatalf("the client did not download from otad's artifact route %s:\n%s", want, c.Log.Tail(40))
	}
	if c := r.runUntil("confirm", "sw-h1", token, "board-h", func() bool {
		ts, _ := r.tryTasks("sw-h1")
		return len(ts) == 1 && ts[0].Status == "succeeded"
	}, "-c", "2"); c == nil {
		t.FailNow()
	}
	if v := r.admin(http.MethodGet, "/devices/sw-h1", nil, http.StatusOK)["current_version"]; v != "1.1.0" {
		t.Fatalf("current_version %v, want 1.1.0", v)
	}
}

// TestSWUpdateRefusesAnUnsignedHostedImage: a hosted image whose signature
// does not verify is downloaded and refused; the task fails.
func TestSWUpdateRefusesAnUnsignedHostedImage(t *testing.T) {
	r := newRig(t)
	token := r.register("sw-h2", "board-h")
	// Signed by a key the device does not trust.
	other := testenv.NewSWUSigner(t, t.TempDir(), "ota-ddi-untrusted-signer")
	path := filepath.Join(r.dir, "board-h-1.2.0.swu")
	other.WriteSWU(t, path, "1.2.0", "1.0")
	artifact := r.upload(path)
	fw := r.admin(http.MethodPost, "/firmwares", map[string]any{"model": "board-h", "version": "1.2.0", "artifact_id": artifact}, http.StatusCreated)
	r.admin(http.MethodPost, "/rollouts", map[string]any{"firmware_id": fw["id"], "percentage": 100, "max_attempts": 1}, http.StatusCreated)
	if c := r.runUntil("refuse", "sw-h2", token, "board-h", func() bool {
		ts, _ := r.tryTasks("sw-h2")
		return len(ts) == 1 && ts[0].Status == "failed"
	}); c == nil {
		t.FailNow()
	}
}
