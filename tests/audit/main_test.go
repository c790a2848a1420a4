// Package audit drives the real otad: every mutating admin route, for the
// root, every role and a scoped token, is allowed or refused as the role
// table says, and writes exactly one audit record when allowed, none when
// refused.
package audit

import (
	"os"
	"testing"

	"github.com/ai-device/ota/tests/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunWithOtad(m)) }
