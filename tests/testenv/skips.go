package testenv

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// RequireServicesEnv names the variable that, set to 1, forbids skipping:
// a test that would skip for want of a service (Postgres, Redis, a Docker
// engine, a redis-server binary) fails instead. CI sets it (.ci/run), so a
// service that is named but does not answer cannot pass as a green run.
const RequireServicesEnv = "OTA_TEST_REQUIRE_SERVICES"

// servicesRequired reports whether RequireServicesEnv forbids skipping.
func servicesRequired() bool {
	v := os.Getenv(RequireServicesEnv)
	return v != "" && v != "0"
}

var skipped struct {
	mu    sync.Mutex
	n     int
	needs []string // what would have let them run, in first-seen order
}

// Skip skips t because need is missing — a variable to set
// ("OTA_TEST_REDIS_URL") or a program to install ("redis-server") — and
// counts the skip for Main's summary. With OTA_TEST_REQUIRE_SERVICES=1 it
// fails t instead. Every skip for want of a service goes through it.
func Skip(t testing.TB, need, reason string) {
	t.Helper()
	if servicesRequired() {
		t.Fatalf("%s=1 forbids skipping: %s", RequireServicesEnv, reason)
	}
	skipped.mu.Lock()
	skipped.n++
	if !slices.Contains(skipped.needs, need) {
		skipped.needs = append(skipped.needs, need)
	}
	skipped.mu.Unlock()
	t.Skip(reason)
}

// Main is the body of the TestMain of every package whose tests can skip
// for want of a service: it runs the tests and then, when some were
// skipped, prints one line saying how many and what would run them.
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	stopSharedWeed()
	reportSkips()
	return code
}

// reportSkips prints Main's line. `go test` shows a passing package's
// output only with -v, which would make the line as silent as the skips it
// reports; so without -v it is also written to the go command's own
// standard output (the test binary's parent), when that can be opened.
func reportSkips() {
	line := skipSummary(packageName())
	if line == "" {
		return
	}
	fmt.Println(line)
	if testing.Verbose() {
		return
	}
	if w := parentStdout(); w != nil {
		_, _ = io.WriteString(w, line+"\n")
		_ = w.Close()
	}
}

// skipSummary is the line: "integration: 12 tests skipped: set
// OTA_TEST_DATABASE_URL and OTA_TEST_REDIS_URL (make test does)".
func skipSummary(pkg string) string {
	skipped.mu.Lock()
	defer skipped.mu.Unlock()
	if skipped.n == 0 {
		return ""
	}
	var vars, programs []string
	for _, n := range skipped.needs {
		if strings.HasPrefix(n, "OTA_") {
			vars = append(vars, n)
		} else {
			programs = append(programs, n)
		}
	}
	tests := "tests"
	if skipped.n == 1 {
		tests = "test"
	}
	var what []string
	if len(vars) > 0 {
		what = append(what, "set "+strings.Join(vars, " and ")+" (make test does)")
	}
	if len(programs) > 0 {
		what = append(what, "install "+strings.Join(programs, " and "))
	}
	return fmt.Sprintf("%s: %d %s skipped: %s; %s=1 turns skips into failures",
		pkg, skipped.n, tests, strings.Join(what, "; "), RequireServicesEnv)
}

// packageName is the test binary's package: "integration" for integration.test.
func packageName() string {
	return strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
}

// parentStdout opens the standard output of the go command that runs this
// test binary, or returns nil (not Linux, not run by go test, or not
// permitted).
func parentStdout() *os.File {
	ppid := os.Getppid()
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/comm")
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return nil
	}
	f, err := os.OpenFile("/proc/"+strconv.Itoa(ppid)+"/fd/1", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil
	}
	return f
}
