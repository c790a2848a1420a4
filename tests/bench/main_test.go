package bench

import (
	"os"
	"testing"

	"github.com/ai-device/ota/tests/testenv"
)

// TestMain prints, at the end of the run, one line saying how many tests
// skipped for want of a tool or a service and what to install or set; with
// OTA_TEST_REQUIRE_SERVICES=1 those tests fail instead of skipping.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
