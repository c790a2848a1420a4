package integration

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// start posts a rollout start to replica i with the Idempotency-Key
// values given (none: no header).
func (c *cluster) start(i int, body map[string]any, keys ...string) (int, map[string]any) {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	req, err := http.NewRequest(http.MethodPost, c.urls[i%len(c.urls)]+"/api/v1/admin/rollouts", bytes.NewReader(b))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	for _, k := range keys {
		req.Header.Add("Idempotency-Key", k)
	}
	resp, err := rolloutClient.Do(req)
	if err != nil {
		c.t.Errorf("start: %v", err)
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestRetriedRolloutStartStartsOneRollout: a start retried with its
// Idempotency-Key — by many clients at once, on two replicas — starts one
// rollout, and every retry is answered with it; the key with another
// request is IDEMPOTENCY_CONFLICT; a retry after the firmware was revoked
// still finds the rollout (docs/DOMAIN.md, Rollout).
func TestRetriedRolloutStartStartsOneRollout(t *testing.T) {
	c := newCluster(t, 2, time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
	fw := c.publish("cam-idem-"+uuid.NewString()[:8], "2.0.0")
	body := map[string]any{"firmware_id": fw, "percentage": 10, "selector": map[string]any{"tags_all": []string{"lab"}}}
	key := uuid.NewString()

	const clients = 16
	ids := make([]string, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			code, out := c.start(i, body, key)
			if code != http.StatusCreated {
				t.Errorf("start %d: %d %v, want 201", i, code, out)
				return
			}
			ids[i], _ = out["id"].(string)
		})
	}
	wg.Wait()
	for i, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("answer %d named rollout %q, answer 0 %q: the retries started several rollouts", i, id, ids[0])
		}
	}
	var started int
	if err := c.db.Get(&started, `SELECT count(*) FROM rollouts WHERE firmware_id = $1`, fw); err != nil {
		t.Fatal(err)
	}
	if started != 1 {
		t.Fatalf("%d rollouts of the firmware, want 1", started)
	}
	var records int
	if err := c.db.Get(&records, `SELECT count(*) FROM audit_log WHERE action = 'rollout.start' AND target = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	if records != 1 {
		t.Errorf("%d audit records of the start, want 1: a retry changes nothing", records)
	}

	// The key with another request: refused, and nothing started.
	other := map[string]any{"firmware_id": fw, "percentage": 20, "selector": map[string]any{"tags_all": []string{"lab"}}}
	if code, out := c.start(0, other, key); code != http.StatusConflict || errorCode(out) != "IDEMPOTENCY_CONFLICT" {
		t.Errorf("the key with another percentage: %d %v, want 409 IDEMPOTENCY_CONFLICT", code, out)
	}
	// A retry after the operator paused the rollout and revoked its
	// firmware still finds it, as it is now.
	c.admin(http.MethodPatch, "/rollouts/"+ids[0], map[string]any{"status": "paused"}, http.StatusOK)
	c.admin(http.MethodPost, "/firmwares/"+fw+"/revoke", nil, http.StatusOK)
	if code, out := c.start(1, body, key); code != http.StatusCreated || out["id"] != ids[0] || out["status"] != "paused" {
		t.Errorf("a retry after the revoke: %d %v, want 201 with rollout %s, paused", code, out, ids[0])
	}
	// A new key is a new start: refused now, as any start of a revoked firmware.
	if code, out := c.start(0, body, uuid.NewString()); code != http.StatusConflict || errorCode(out) != "FIRMWARE_REVOKED" {
		t.Errorf("a new key after the revoke: %d %v, want 409 FIRMWARE_REVOKED", code, out)
	}
	if err := c.db.Get(&started, `SELECT count(*) FROM rollouts WHERE firmware_id = $1`, fw); err != nil || started != 1 {
		t.Errorf("%d rollouts of the firmware (%v), want 1", started, err)
	}
}

// TestRolloutStartRefusesAMalformedIdempotencyKey: a key that could not
// be sent back as it came, or two of them, is VALIDATION_FAILED before
// anything is started; without a key every start is a new rollout.
func TestRolloutStartRefusesAMalformedIdempotencyKey(t *testing.T) {
	c := newCluster(t, 1, time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
	fw := c.publish("cam-idem-"+uuid.NewString()[:8], "2.0.0")
	body := map[string]any{"firmware_id": fw, "percentage": 10}
	for _, keys := range [][]string{{"two words"}, {string(bytes.Repeat([]byte("k"), 256))}, {"a", "b"}, {"é"}} {
		if code, out := c.start(0, body, keys...); code != http.StatusBadRequest || errorCode(out) != "VALIDATION_FAILED" {
			t.Errorf("Idempotency-Key %q: %d %v, want 400 VALIDATION_FAILED", keys, code, out)
		}
	}
	for range 2 {
		if code, out := c.start(0, body); code != http.StatusCreated {
			t.Fatalf("a start without a key: %d %v", code, out)
		}
	}
	var started int
	if err := c.db.Get(&started, `SELECT count(*) FROM rollouts WHERE firmware_id = $1`, fw); err != nil || started != 2 {
		t.Errorf("%d rollouts (%v), want 2: the refused starts start nothing, and keyless starts are not retries", started, err)
	}
}

func errorCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}
