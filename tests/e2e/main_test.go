package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// otadPath is the binary built by TestMain, shared by every test.
var otadPath string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ota-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	otadPath = filepath.Join(dir, "otad")
	start := time.Now()
	if err := buildOtad(otadPath); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building otad: %v\n", err)
		return 1
	}
	buildTime := time.Since(start)
	code := m.Run()
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "e2e: otad was built in %v\n", buildTime.Round(time.Millisecond))
	}
	return code
}

// buildOtad builds the service's binary, without the race detector: the
// tests exercise the process from outside, and its own packages have their
// race-enabled unit tests.
func buildOtad(out string) error {
	cmd := exec.Command(goTool(), "build", "-o", out, "github.com/ai-device/ota")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, b)
	}
	return nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}
