package rest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ai-device/ota/adapters/httpedge"
)

// A token request whose body is valid JSON but whose expires_at is not an
// RFC 3339 date-time (a bare date, no zone, a number, a year past 9999)
// is VALIDATION_FAILED naming the field — docs/ERRORS.md: "a field is
// missing, of the wrong type, out of range ... VALIDATION_FAILED", and
// "for VALIDATION_FAILED it names the field"; MALFORMED_JSON is for "the
// body is not JSON". expires_at is read as a string the domain judges
// (domain.ParseInstant), as every other operator time is (a rollout's
// starts_at, the audit log's since/until), not decoded into a time.Time,
// whose own parse error would make the whole body MALFORMED_JSON and leave
// the operator guessing which field is wrong. Nothing is called.
func TestTokenExpiryThatIsNotADateTimeIsAValidationError(t *testing.T) {
	fake := &fakeServices{}
	e := NewServer(Config{AdminToken: testAdminToken}, fake, fake, nil, nil, nil, nil, WithAccounts(fakeAccounts{fake}))
	h := &harness{e: e, fake: fake, logs: &syncBuffer{}}
	for _, expires := range []string{`"2030-01-01"`, `"2030-01-01T00:00:00"`, `"10000-01-01T00:00:00Z"`, `1893456000`} {
		body := `{"name":"ci","scopes":["read"],"expires_at":` + expires + `}`
		rec := h.do(t, req{method: http.MethodPost, path: APIPrefix + "/admin/tokens", token: "role-viewer", body: body})
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), httpedge.CodeValidationFailed) ||
			!strings.Contains(rec.Body.String(), "expires_at") {
			t.Errorf("expires_at %s: %d %s; want 400 VALIDATION_FAILED naming expires_at", expires, rec.Code, strings.TrimSpace(rec.Body.String()))
		}
	}
	if called := fake.called(); len(called) != 0 {
		t.Errorf("refused requests called %v", called)
	}
}
