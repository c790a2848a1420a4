package redislock_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/ai-device/ota/tests/testenv"
)

// TestMain runs the tests, says how many skipped for want of Redis (or
// fails them under OTA_TEST_REQUIRE_SERVICES=1), then looks for goroutines
// left behind. Every test closes what it opens (lockers, raw clients,
// proxies), and a closed rueidis client stops its goroutines, so a
// goroutine left behind is a leak in the adapter, with one exception:
// when rueidis builds a cluster client that then fails (a standalone
// server given a host list), a refresh it scheduled sleeps out its delay
// (under a second) before it notices the client is closed.
func TestMain(m *testing.M) {
	code := testenv.Main(m)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1")); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
