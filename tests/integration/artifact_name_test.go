package integration

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

// Artifact names are unique per model (a Mender device is matched to its
// firmware by name), and a publish that reuses one is refused: but the
// answer says "firmware with this model and version is already published"
// for a version that was never published, and the console places it beside
// the version field. ERRORS.md documents FIRMWARE_EXISTS only for a
// (model, version) that exists; an operator told so looks for a 1.3.0
// that is not there. The refusal must name what collides: the artifact name.
func TestReusedArtifactNameIsNotReportedAsAnExistingVersion(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	model := "an-" + uuid.NewString()[:6]
	fw := func(version string) []byte {
		return js(map[string]any{"model": model, "version": version, "url": "https://files.example/" + version,
			"size_bytes": 10, "sha256": strings.Repeat("d", 64), "artifact_name": "release-a"})
	}
	s.ok(call{method: "POST", path: "/api/v1/admin/firmwares", token: adminToken, body: fw("1.2.0")}, 201)
	code, body, _ := s.do(call{method: "POST", path: "/api/v1/admin/firmwares", token: adminToken, body: fw("1.3.0")})
	msg, _ := body["error"].(map[string]any)["message"].(string)
	if code < 400 || code >= 500 {
		t.Fatalf("reusing an artifact name: %d %v, want a refusal", code, body)
	}
	if !strings.Contains(msg, "artifact") {
		t.Errorf("1.3.0 reusing 1.2.0's artifact_name: %d %q — the message names no artifact name, and 1.3.0 was never published", code, msg)
	}
}
