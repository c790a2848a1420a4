package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/adapters/httpedge"
)

// testAuditLog is an audit log of three records, read through the real use
// case (application.Audit): it pages by the cursor's seq and keeps the
// last filter asked. The stores' own filtering is tests/contract's.
type testAuditLog struct{ last ports.AuditFilter }

var testAuditAt = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func (l *testAuditLog) ListAudit(_ context.Context, f ports.AuditFilter) ([]ports.AuditEntry, error) {
	l.last = f
	act, err := domain.NewActor(domain.UserPrincipal(testUser(domain.RoleAdmin)), "req-1", "192.0.2.1")
	if err != nil {
		return nil, err
	}
	var out []ports.AuditEntry
	for seq := int64(3); seq > 0 && len(out) < f.Limit; seq-- {
		if f.After != nil && seq >= f.After.Seq {
			continue
		}
		var before any
		if seq == 3 {
			before = map[string]any{"revoked": false, "note": "<script>alert(1)</script>"}
		}
		rec, err := act.Record(testAuditAt, domain.AuditFirmwareRevoke, "fw-"+string(rune('0'+seq)), before, map[string]bool{"revoked": true})
		if err != nil {
			return nil, err
		}
		out = append(out, ports.AuditEntry{Seq: seq, Record: rec})
	}
	return out, nil
}

func newTestAudit(t *testing.T, log ports.AuditLog) ports.AuditService {
	a, err := application.NewAudit(log)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestListAudit: GET /admin/audit hands its filters to the use case,
// answers records with before and after as JSON (null for none), and
// pages by the next cursor; a bad filter is VALIDATION_FAILED; only
// audit:read reads it.
func TestListAudit(t *testing.T) {
	h := newHarness(t)
	log := h.audit
	q := url.Values{"actor": {"alice"}, "target": {"fw-3"}, "action": {"firmware.revoke"}, "since": {"2026-12-01T00:00:00Z"},
		"until": {"2026-12-05T00:00:00Z"}, "limit": {"2"}}
	rec := h.do(t, req{method: http.MethodGet, path: APIPrefix + "/admin/audit?" + q.Encode(), token: "role-admin"})
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if f := log.last; f.Actor != "alice" || f.Target != "fw-3" || f.Action != domain.AuditFirmwareRevoke || f.Limit != 3 ||
		!f.Since.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) || !f.Until.Equal(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("the use case was asked %+v", f)
	}
	var page struct {
		Items []map[string]any `json:"items"`
		Next  *string          `json:"next"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 2 || page.Next == nil {
		t.Fatalf("first page: %s", rec.Body)
	}
	first := page.Items[0]
	if first["seq"] != 3.0 || first["actor"] != "user:admin" || first["actor_kind"] != "user" || first["action"] != "firmware.revoke" ||
		first["target"] != "fw-3" || first["request_id"] != "req-1" || first["source"] != "192.0.2.1" || first["at"] != "2026-12-04T12:00:00Z" {
		t.Errorf("first record: %v", first)
	}
	if b, ok := first["before"].(map[string]any); !ok || b["revoked"] != false {
		t.Errorf("before is not the JSON object recorded: %#v", first["before"])
	}
	if page.Items[1]["before"] != nil {
		t.Errorf("a record without a before state: %#v, want null", page.Items[1]["before"])
	}
	rec = h.do(t, req{method: http.MethodGet, path: APIPrefix + "/admin/audit?limit=2&after=" + url.QueryEscape(*page.Next), token: "role-admin"})
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if len(page.Items) != 1 || page.Items[0]["seq"] != 1.0 || page.Next != nil {
		t.Errorf("second page: %s", rec.Body)
	}
	for _, bad := range []string{"action=firmware.delete", "since=yesterday", "limit=501", "after=forged", "actor=Not%20A%20Name"} {
		rec := h.do(t, req{method: http.MethodGet, path: APIPrefix + "/admin/audit?" + bad, token: testAdminToken})
		wantError(t, rec, http.StatusBadRequest, httpedge.CodeValidationFailed)
	}
	for _, who := range []string{"role-viewer", "role-releaser", "role-device_admin", "ci-token"} {
		rec := h.do(t, req{method: http.MethodGet, path: APIPrefix + "/admin/audit", token: who})
		wantError(t, rec, http.StatusForbidden, httpedge.CodeForbidden)
	}
}
