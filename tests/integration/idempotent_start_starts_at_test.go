package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestKeyedStartWithAStartsAtBeyondYear9999IsAValidationError: a
// starts_at that parses as RFC 3339 but is past year 9999 once in UTC
// ("9999-12-31T23:59:59-23:59") is 400 VALIDATION_FAILED naming starts_at
// (docs/ERRORS.md: a rollout starts_at "that does not parse or is out of
// range") — without an Idempotency-Key, and so with one: the key changes
// whether a start is a retry, not how its body is judged. With a key the
// request is fingerprinted (json.Marshal of the spec) before NewRollout
// judges starts_at, and time.Time refuses to marshal a year past 9999:
// the start answers 500 INTERNAL.
func TestKeyedStartWithAStartsAtBeyondYear9999IsAValidationError(t *testing.T) {
	c := newCluster(t, 1, time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
	fw := c.publish("cam-idem-"+uuid.NewString()[:8], "2.0.0")
	body := map[string]any{"firmware_id": fw, "percentage": 10, "starts_at": "9999-12-31T23:59:59-23:59"}
	if code, out := c.start(0, body); code != http.StatusBadRequest || errorCode(out) != "VALIDATION_FAILED" {
		t.Fatalf("without a key: %d %v, want 400 VALIDATION_FAILED", code, out)
	}
	_, plain := c.start(0, body)
	code, out := c.start(0, body, uuid.NewString())
	if code != http.StatusBadRequest || errorCode(out) != "VALIDATION_FAILED" {
		t.Errorf("with an Idempotency-Key: %d %v, want 400 VALIDATION_FAILED as without one", code, out)
	}
	// The same answer, naming starts_at: the key changes nothing of how a
	// request is judged.
	if m, want := errorMessage(out), errorMessage(plain); m != want || !strings.HasPrefix(m, "starts_at") {
		t.Errorf("with an Idempotency-Key: %q, want %q as without one", m, want)
	}
}

func errorMessage(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}
