package mender_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/ai-device/ota/tests/testenv"
)

// routeSignedLink is the route of signed download links in the access log.
const routeSignedLink = "/api/v1/artifacts/:artifact_id/download"

// upload stores the file at path in otad and returns the artifact's id.
func (r *rig) upload(path string) string {
	r.t.Helper()
	return testenv.UploadArtifact(r.t, r.otad.URL, adminToken, path)
}

// TestClientDownloadsAnUploadedArtifactThroughItsSignedLink: the .mender
// file is uploaded to otad and exists nowhere else; the real mender-client
// gets a signed link as source.uri, downloads it with no credentials, and
// installs it.
func TestClientDownloadsAnUploadedArtifactThroughItsSignedLink(t *testing.T) {
	r := newRig(t)
	d := r.newDevice("m-hosted", "release-1", "rsa")
	r.register(d)
	r.buildArtifact("release-h2", false)
	path := filepath.Join(r.dir, "www", "release-h2.mender")
	artifact := r.upload(path)
	if err := os.Remove(path); err != nil { // the file server has nothing left to serve
		t.Fatal(err)
	}
	fw := r.admin(http.MethodPost, "/firmwares", map[string]any{
		"model": model, "version": "2.0.0", "artifact_id": artifact, "artifact_name": "release-h2",
	}, http.StatusCreated)
	r.admin(http.MethodPost, "/rollouts", map[string]any{"firmware_id": fw["id"], "percentage": 100, "max_attempts": 1}, http.StatusCreated)

	c := r.start(d)
	r.waitFor("the update succeeds", clientWait, func() bool { return r.oneTask(d.id, "succeeded") },
		func() string { return fmt.Sprintf("tasks: %+v\n%s", r.tasks(d.id), r.otad.LogTail(20)) })
	if !d.installed() {
		t.Fatalf("the module did not install the payload (states: %s)", d.moduleStates())
	}
	r.stopWhenIdle(c)
	if n := r.accessCount(http.MethodGet, routeSignedLink, http.StatusOK) + r.accessCount(http.MethodGet, routeSignedLink, http.StatusPartialContent); n == 0 {
		t.Fatalf("no download through the signed link in otad's access log:\n%s", r.otad.LogTail(30))
	}
}
