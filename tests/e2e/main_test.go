package e2e

import (
	"os"
	"testing"

	"github.com/ai-device/ota/tests/testenv"
)

// TestMain removes the otad binary testenv builds (once, for every test of
// this binary) when the tests are done.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithOtad(m))
}
