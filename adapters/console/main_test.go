package console_test

import (
	"os"
	"testing"

	"github.com/ai-device/ota/tests/testenv"
)

// TestMain prints, at the end of the run, one line saying whether the
// browser test skipped for want of chromium; with
// OTA_TEST_REQUIRE_SERVICES=1 it fails instead of skipping.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
