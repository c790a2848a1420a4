package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unitSettings reads a systemd unit's Key=Value lines (comments skipped);
// a key given twice keeps every value.
func unitSettings(text string) map[string][]string {
	m := map[string][]string{}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = append(m[k], v)
		}
	}
	return m
}

// The example unit has what its README section promises: configuration
// from an EnvironmentFile, no root, restarts on failure, sandboxing; and
// systemd itself, where installed, accepts it.
func TestSystemdUnit(t *testing.T) {
	text := readRepoFile(t, "docs/otad.service")
	s := unitSettings(text)
	for key, want := range map[string]string{
		"EnvironmentFile": "/etc/otad/otad.env",
		"Restart":         "on-failure",
		"DynamicUser":     "yes",
		"NoNewPrivileges": "yes",
		"ProtectSystem":   "strict",
		"ExecStart":       "/usr/local/bin/otad serve",
	} {
		if got := s[key]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("systemd-analyze is not installed: the unit's syntax is not verified by systemd")
		return
	}
	// verify also checks that ExecStart names an executable: point it at one.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "otad.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(text, "/usr/local/bin/otad", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", unit).CombinedOutput()
	if err != nil || strings.Contains(string(out), "otad.service:") {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
