// Package webhooks tests the webhook delivery end to end: the use cases
// and the delivery worker over a real store (Postgres, and the memory
// store where it says so), posting through the real HTTP client to real
// receivers (httptest) that verify every signature as the README tells
// operators to. The clock is the test's, advanced to make retries due.
package webhooks

import (
	"os"
	"testing"

	"github.com/ai-device/ota/tests/testenv"
)

// TestMain reports the tests skipped for want of Postgres.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
