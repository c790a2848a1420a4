package mender_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ai-device/ota/adapters/mender"
)

// updateToRelease2 takes a preauthorized device through a whole Mender
// update from release-1 (1.0.0) to release-2 (2.0.0) and returns its
// session token and the succeeded deployment's id.
func updateToRelease2(t *testing.T, h *harness) (string, string) {
	t.Helper()
	k := newKey(t, "ed25519")
	h.register("dev-1", k)
	h.release("1.0.0", "release-1")
	h.release("2.0.0", "release-2")
	tok := h.token("dev-1", k)
	r := h.nextAll(tok, "release-1")[0]
	var d deployment
	if err := json.Unmarshal(r.body, &d); err != nil || r.status != http.StatusOK || d.Artifact.ArtifactName != "release-2" {
		t.Fatalf("next from release-1: %d %s", r.status, r.body)
	}
	for _, s := range []string{"downloading", "installing", "rebooting", "success"} {
		if got := h.status(tok, d.ID, s); got != http.StatusNoContent {
			t.Fatalf("status %s: %d", s, got)
		}
	}
	if task := h.task(d.ID); task["status"] != "succeeded" {
		t.Fatalf("task after success: %v", task)
	}
	// The device, on its new image, asks again with the name it runs.
	if r := h.nextAll(tok, "release-2")[2]; r.status != http.StatusNoContent {
		t.Fatalf("next from release-2: %d %s", r.status, r.body)
	}
	return tok, d.ID
}

// TestMenderNextWithABrokenQueryIsRefusedNotReadAsNoArtifact: the v1
// GET deployments/next carries the artifact name the device runs in its
// query. A value with broken percent-encoding (%zz) or a raw ';' is
// dropped by Go's query parser, and the handler (q.Get) reads it as no
// artifact name at all: domain.RunningVersion then counts the device as
// running the lowest version there is (0.0.0-0), which event rule 7 takes
// as the device contradicting its success — the succeeded task becomes a
// failed INSTALL_REVERTED attempt (counted in its rollout's threshold and
// gates) and the device is recorded at 0.0.0-0. The service refuses such
// a query on every other route (CHANGELOG: "A query parameter with broken
// percent-encoding ... is VALIDATION_FAILED", httpedge.QueryPairError); a
// device's bad request must not rewrite what it installed.
func TestMenderNextWithABrokenQueryIsRefusedNotReadAsNoArtifact(t *testing.T) {
	for name, query := range map[string]string{
		"bad escape": "?artifact_name=release-2%zz&device_type=" + model,
		"raw ;":      "?artifact_name=release;2&device_type=" + model,
		// Mender's server requires the name; its absence reads alike.
		"no artifact_name":    "?device_type=" + model,
		"empty artifact_name": "?artifact_name=&device_type=" + model,
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, false)
			tok, id := updateToRelease2(t, h)
			r := h.do(http.MethodGet, mender.NextV1Path+query, bearer(tok), "", false)
			if r.status != http.StatusBadRequest {
				t.Errorf("GET next%s: %d %s, want 400 VALIDATION_FAILED", query, r.status, r.body)
			}
			// The answer says what is wrong with what was sent, not that
			// nothing was.
			if name == "bad escape" && !strings.Contains(string(r.body), "percent-encoding") {
				t.Errorf("GET next%s: %s, want the refusal to name the broken encoding", query, r.body)
			}
			if task := h.task(id); task["status"] != "succeeded" {
				t.Errorf("the device's succeeded update after a malformed query: %v, want it still succeeded", task)
			}
			dev := h.admin(http.MethodGet, "/devices/dev-1", nil, http.StatusOK).json(t)
			if dev["current_version"] != "2.0.0" {
				t.Errorf("the device's version after a malformed query: %v, want 2.0.0", dev["current_version"])
			}
		})
	}
}

// TestMenderFailureWhileDownloadingARevokedFirmwareIsNotAFailedAttempt:
// a Mender status report stops a task of a revoked firmware up to
// downloaded (DOMAIN.md check rule 5: "a Mender status report stops it up
// to `downloaded`", domain.Task.StopBeforeInstall), so that a revocation
// is recorded as the service's withdrawal (cancelled FIRMWARE_REVOKED, not
// an attempt) and never as the device's failure. Rule D1 refuses the
// revoked firmware's image mid-download (410 FIRMWARE_GONE), and
// mender-client answers a failed download with a "failure" report — which
// Status exempts from the stop because it is final: the task the service
// withdrew becomes a failed MENDER_FAILURE attempt, counted against the
// device and in its rollout's failure threshold and gates, with a
// task.failed event saying the device failed.
func TestMenderFailureWhileDownloadingARevokedFirmwareIsNotAFailedAttempt(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ed25519")
	h.register("dev-1", k)
	h.release("1.0.0", "release-1")
	h.release("2.0.0", "release-2")
	tok := h.token("dev-1", k)
	r := h.nextAll(tok, "release-1")[0]
	var d deployment
	if err := json.Unmarshal(r.body, &d); err != nil || r.status != http.StatusOK {
		t.Fatalf("next: %d %s", r.status, r.body)
	}
	if got := h.status(tok, d.ID, "downloading"); got != http.StatusNoContent {
		t.Fatalf("downloading: %d", got)
	}
	// Mid-download, the operator revokes the image; the device's download
	// is refused and it reports the failure.
	h.admin(http.MethodPost, "/firmwares/"+d.Artifact.ID+"/revoke", nil, http.StatusOK)
	got := h.status(tok, d.ID, "failure")
	task := h.task(d.ID)
	if task["status"] != "cancelled" || task["error_code"] != "FIRMWARE_REVOKED" {
		t.Errorf("a download of a revoked firmware reported failed (answer %d): task %v %v, want cancelled FIRMWARE_REVOKED",
			got, task["status"], task["error_code"])
	}
}
