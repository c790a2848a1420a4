package rest

import (
	"net/http"
	"testing"
)

// docs/ERRORS.md: a bad query parameter is VALIDATION_FAILED (the device
// listing's `tag`, `attribute`, ...), and CHANGELOG's fix for `%zz` says
// why: a pair the query parser drops reads as absent, "a filter silently
// ignored". Go's parser drops a pair holding a raw `;` as well (url:
// "invalid semicolon separator in query"), and escapedQuery does not look
// for it: `?tag=eu;lab` lists every device, unfiltered, with 200.
func TestSemicolonInAFilterIsNotDroppedSilently(t *testing.T) {
	for _, q := range []string{"?tag=eu;lab", "?attribute=site=a;b", "?model=cam-x1;x"} {
		t.Run(q, func(t *testing.T) {
			h := newHarness(t)
			rec := h.do(t, req{method: http.MethodGet, path: APIPrefix + "/admin/devices" + q, token: testAdminToken})
			got := h.fake.lastDevices
			if rec.Code == http.StatusOK {
				t.Fatalf("%s: 200, the service asked with model %q, tags %q, attributes %q: the filter was dropped, every device listed",
					q, got.Model, got.Tags, got.Attributes)
			}
			wantError(t, rec, http.StatusBadRequest, "VALIDATION_FAILED")
		})
	}
}
