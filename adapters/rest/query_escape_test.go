package rest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ai-device/ota/adapters/httpedge"
)

// docs/ERRORS.md: a bad query parameter (`limit`, `after`, ...) is
// VALIDATION_FAILED naming it. A value whose percent-encoding is broken
// (`%zz`) is a bad value, not an absent one: answered with the default
// page, a client's typo goes unnoticed; on a filter (the audit log's
// action, since) the filter is dropped and every record answered.
func TestMalformedQueryEscapeIsAValidationError(t *testing.T) {
	one := APIPrefix + "/admin/webhooks/" + testWebhookID + "/deliveries"
	audit := APIPrefix + "/admin/audit"
	for _, q := range []string{one + "?limit=%zz", one + "?after=%zz", audit + "?action=%zz", audit + "?since=%zz"} {
		t.Run(q, func(t *testing.T) {
			h := newHarness(t)
			rec := h.do(t, req{method: http.MethodGet, path: q, token: testAdminToken})
			d := wantError(t, rec, 400, httpedge.CodeValidationFailed)
			if name := strings.Split(strings.Split(q, "?")[1], "=")[0]; !strings.Contains(d.Message, name) {
				t.Errorf("message %q does not name %s", d.Message, name)
			}
		})
	}
}
