// Package artifacts tests hosted artifacts through a built otad: uploads
// over HTTP (raw and multipart), their refusals leaving nothing behind,
// a storage outage, replicas sharing one S3 bucket, and a 2 GiB upload's
// memory.
package artifacts

import (
	"os"
	"testing"

	"github.com/ai-device/ota/tests/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunWithOtad(m)) }
