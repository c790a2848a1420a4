package integration

import (
	"net/url"
	"testing"

	"github.com/google/uuid"
)

// A rollout's starts_at that parses as RFC 3339 but lies past year 9999
// in UTC ("9999-12-31T23:59:59-23:59" is 10000-01-01 UTC) is out of range:
// ERRORS.md answers a starts_at "that does not parse or is out of range"
// with 400 VALIDATION_FAILED. On Postgres the rollout's policy document
// cannot encode the time (json: year outside of range [0,9999]) and the
// operator gets 500 INTERNAL; nothing must be written either way.
func TestRolloutStartsAtPastYear9999IsAValidationError(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	fw := s.publish("sa-"+uuid.NewString()[:6], "2.0.0")
	before := s.digest()
	code, body, _ := s.do(call{method: "POST", path: "/api/v1/admin/rollouts", token: adminToken,
		body: js(map[string]any{"firmware_id": fw, "percentage": 5, "starts_at": "9999-12-31T23:59:59-23:59"})})
	if code != 400 || body["error"].(map[string]any)["code"] != "VALIDATION_FAILED" {
		t.Errorf("starts_at 9999-12-31T23:59:59-23:59: %d %v, want 400 VALIDATION_FAILED", code, body)
	}
	if s.digest() != before {
		t.Error("the refused rollout wrote something")
	}
}

// The device listing's seen_before is an RFC 3339 time; one past year
// 9999 in UTC is a bad query parameter (VALIDATION_FAILED, ERRORS.md), as
// the audit log's since and until already are (application/audit.go
// bounds them to years 1–9999). On Postgres it reaches the query and the
// operator gets 500 INTERNAL.
func TestDeviceListingSeenBeforePastYear9999IsAValidationError(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	code, body, _ := s.do(call{method: "GET", path: "/api/v1/admin/devices?seen_before=" + url.QueryEscape("9999-12-31T23:59:59-23:59"), token: adminToken})
	if code != 400 || body["error"].(map[string]any)["code"] != "VALIDATION_FAILED" {
		t.Errorf("seen_before=9999-12-31T23:59:59-23:59: %d %v, want 400 VALIDATION_FAILED", code, body)
	}
}
