package console_test

import (
	"net/http"
	"testing"
)

// TestConsoleDeviceFilterWithRawSemicolonOrBadEscapeIsNotDropped: the
// REST fix (fd6f845, 675d389; docs/ERRORS.md VALIDATION_FAILED "broken
// percent-encoding (%zz) or a raw ';'") refuses a filter the query parser
// would drop. The console's device list reads r.URL.Query() too, which
// drops the same pairs: ?model=dome;lab and ?model=%zz list the whole
// fleet as if no filter were given, answered 200.
func TestConsoleDeviceFilterWithRawSemicolonOrBadEscapeIsNotDropped(t *testing.T) {
	e := newEnv(t)
	e.mustSignIn()
	for _, q := range []string{"model=dome;lab", "model=%zz"} {
		r := e.get("/console/devices?" + q)
		if r.code != http.StatusBadRequest {
			t.Errorf("GET /console/devices?%s: %d, want 400 as the API's GET /admin/devices answers (the filter was dropped)", q, r.code)
		}
	}
}
