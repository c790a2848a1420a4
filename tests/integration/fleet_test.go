package integration

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// fleet registers n devices of a fresh model over HTTP and returns their
// ids and tokens.
func (s *stack) fleet(model string, n int) (ids, tokens []string) {
	s.t.Helper()
	ids, tokens = make([]string, n), make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			ids[i] = fmt.Sprintf("%s-%05d", model, i)
			body := s.ok(call{method: "POST", path: "/api/v1/admin/devices", token: adminToken,
				body: js(map[string]any{"device_id": ids[i], "model": model, "current_version": "1.0.0"})}, 201)
			tokens[i] = body["token"].(string)
		}(i)
	}
	wg.Wait()
	return ids, tokens
}

func (s *stack) publish(model, version string) string {
	s.t.Helper()
	fw := s.ok(call{method: "POST", path: "/api/v1/admin/firmwares", token: adminToken, body: js(map[string]any{
		"model": model, "version": version, "url": "https://files.example/" + version, "size_bytes": 10, "sha256": strings.Repeat("d", 64)})}, 201)
	return fw["id"].(string)
}

func (s *stack) startRollout(fwID string, extra map[string]any) string {
	s.t.Helper()
	body := map[string]any{"firmware_id": fwID}
	for k, v := range extra {
		body[k] = v
	}
	r := s.ok(call{method: "POST", path: "/api/v1/admin/rollouts", token: adminToken, body: js(body)}, 201)
	return r["id"].(string)
}

func (s *stack) patch(rolloutID string, change map[string]any) map[string]any {
	s.t.Helper()
	return s.ok(call{method: "PATCH", path: "/api/v1/admin/rollouts/" + rolloutID, token: adminToken, body: js(change)}, 200)
}

// checkAll checks every device concurrently and returns the task each got
// ("" for no update).
func (s *stack) checkAll(model string, ids, tokens []string, version string) []string {
	s.t.Helper()
	got := make([]string, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			body := s.ok(call{method: "POST", path: "/api/v1/devices/" + ids[i] + "/ota/check", token: tokens[i],
				body: js(map[string]any{"model": model, "current_version": version})}, 200)
			if task, ok := body["task"].(map[string]any); ok {
				got[i] = task["id"].(string)
			}
			if (body["task"] != nil) != (body["update_available"] == true) {
				s.t.Errorf("update_available %v with task %v", body["update_available"], body["task"])
			}
		}(i)
	}
	wg.Wait()
	return got
}

func (s *stack) event(id, token, taskID, eventID, status string) (int, map[string]any) {
	code, body, _ := s.do(call{method: "POST", path: "/api/v1/devices/" + id + "/ota/tasks/" + taskID + "/events", token: token,
		body: js(map[string]any{"event_id": eventID, "status": status})})
	return code, body
}

func (s *stack) stats(rolloutID string) (map[string]any, map[string]any) {
	s.t.Helper()
	r := s.ok(call{method: "GET", path: "/api/v1/admin/rollouts/" + rolloutID, token: adminToken}, 200)
	return r, r["stats"].(map[string]any)
}

// A staged rollout at 10% then 50% of 1,000 devices admits close to those
// shares, and every device admitted at 10% is still admitted at 50%.
func TestStagedRolloutOverHTTP(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	model := "staged-" + uuid.NewString()[:6]
	ids, tokens := s.fleet(model, 1000)
	rollout := s.startRollout(s.publish(model, "1.1.0"), map[string]any{"percentage": 10})
	at10 := s.checkAll(model, ids, tokens, "1.0.0")
	s.patch(rollout, map[string]any{"percentage": 50})
	at50 := s.checkAll(model, ids, tokens, "1.0.0")
	n10, n50 := 0, 0
	for i := range ids {
		if at10[i] != "" {
			n10++
			if at50[i] != at10[i] {
				t.Fatalf("device %s had task %s at 10%% but %q at 50%%", ids[i], at10[i], at50[i])
			}
		}
		if at50[i] != "" {
			n50++
		}
	}
	if n10 < 50 || n10 > 150 || n50 < 450 || n50 > 550 {
		t.Fatalf("admitted %d at 10%% and %d at 50%% of 1000 (want within ±5 points)", n10, n50)
	}
	if _, st := s.stats(rollout); int(st["pending"].(float64)) != n50 {
		t.Fatalf("stats %v, want %d pending", st, n50)
	}
}

// Pausing mid-rollout stops new tasks while started ones complete; a
// failing firmware pauses its rollout by itself at the threshold; revoking
// cancels pending tasks at the next check; retries stop at max_attempts.
func TestRolloutLifecycleOverHTTP(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	model := "life-" + uuid.NewString()[:6]
	ids, tokens := s.fleet(model, 40)

	// Pause mid-rollout.
	rollout := s.startRollout(s.publish(model, "1.1.0"), map[string]any{"percentage": 100})
	first := s.checkAll(model, ids[:10], tokens[:10], "1.0.0")
	if code, _ := s.event(ids[0], tokens[0], first[0], "a", "downloading"); code != 200 {
		t.Fatalf("downloading: %d", code)
	}
	if r := s.patch(rollout, map[string]any{"status": "paused"}); r["paused_reason"] != "manual" {
		t.Fatalf("paused: %v", r)
	}
	for i, got := range s.checkAll(model, ids[10:20], tokens[10:20], "1.0.0") {
		if got != "" {
			t.Fatalf("paused rollout created a task for %s", ids[10+i])
		}
	}
	if code, body := s.event(ids[0], tokens[0], first[0], "b", "succeeded"); code != 200 || body["status"] != "succeeded" {
		t.Fatalf("a started task must complete while paused: %d %v", code, body)
	}

	// Revocation cancels the pending ones at their next check.
	fw2 := s.publish(model, "1.2.0")
	s.startRollout(fw2, map[string]any{"percentage": 100})
	pending := s.checkAll(model, ids[20:25], tokens[20:25], "1.0.0")
	s.ok(call{method: "POST", path: "/api/v1/admin/firmwares/" + fw2 + "/revoke", token: adminToken}, 200)
	for i, got := range s.checkAll(model, ids[20:25], tokens[20:25], "1.0.0") {
		if got != "" {
			t.Fatalf("revoked firmware still handed to %s", ids[20+i])
		}
		if code, body := s.event(ids[20+i], tokens[20+i], pending[i], "c", "downloading"); code != 409 || body["error"].(map[string]any)["code"] != "TASK_FINISHED" {
			t.Fatalf("event on revoked task: %d %v", code, body)
		}
	}
	var code string
	if err := s.db.QueryRow(`SELECT DISTINCT error_code FROM tasks WHERE firmware_id = $1`, fw2).Scan(&code); err != nil || code != "FIRMWARE_REVOKED" {
		t.Fatalf("revoked tasks' code %q (%v)", code, err)
	}

	// Auto-pause: 50% failures over at least 4 finished tasks.
	fw3 := s.publish(model, "1.3.0")
	auto := s.startRollout(fw3, map[string]any{"percentage": 100, "failure_threshold_percent": 50, "min_sample": 4, "max_attempts": 2})
	batch, batchTokens := ids[25:29], tokens[25:29]
	tasks := s.checkAll(model, batch, batchTokens, "1.0.0")
	for i, status := range []string{"failed", "succeeded", "failed", "succeeded"} {
		if code, _ := s.event(batch[i], batchTokens[i], tasks[i], "end", status); code != 200 {
			t.Fatalf("%s: %d", status, code)
		}
	}
	r, st := s.stats(auto)
	if r["status"] != "paused" || r["paused_reason"] != "auto" || st["failed"].(float64) != 2 || st["succeeded"].(float64) != 2 {
		t.Fatalf("auto-pause: %v %v", r, st)
	}
	s.patch(auto, map[string]any{"status": "active"}) // resuming is an explicit admin act

	// Retries: device 0 of the batch failed once; attempt 2 is its last.
	retry := s.checkAll(model, batch[:1], batchTokens[:1], "1.0.0")[0]
	if retry == "" || retry == tasks[0] {
		t.Fatalf("no retry task after a failure: %q", retry)
	}
	var attempt int
	if err := s.db.QueryRow(`SELECT attempt FROM tasks WHERE id = $1`, retry).Scan(&attempt); err != nil || attempt != 2 {
		t.Fatalf("attempt %d (%v), want 2", attempt, err)
	}
	if code, _ := s.event(batch[0], batchTokens[0], retry, "end", "failed"); code != 200 {
		t.Fatal(code)
	}
	if got := s.checkAll(model, batch[:1], batchTokens[:1], "1.0.0")[0]; got != "" {
		var fw string
		if err := s.db.QueryRow(`SELECT firmware_id FROM tasks WHERE id = $1`, got).Scan(&fw); err != nil {
			t.Fatalf("reading the firmware of task %s handed out after max_attempts failures: %v", got, err)
		}
		if fw == fw3 {
			t.Fatalf("firmware offered again after max_attempts failures")
		}
	}
}

// Keyset pagination walks 1,234 tasks with no loss and no repeat.
func TestPaginationWalksEveryTaskOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	model := "page-" + uuid.NewString()[:6]
	ids, tokens := s.fleet(model, 1234)
	rollout := s.startRollout(s.publish(model, "1.1.0"), map[string]any{"percentage": 100})
	created := map[string]bool{}
	for _, id := range s.checkAll(model, ids, tokens, "1.0.0") {
		created[id] = true
	}
	if len(created) != 1234 {
		t.Fatalf("%d tasks created, want 1234", len(created))
	}
	seen := map[string]bool{}
	after, pages := "", 0
	for {
		q := url.Values{"rollout_id": {rollout}, "limit": {"100"}}
		if after != "" {
			q.Set("after", after)
		}
		page := s.ok(call{method: "GET", path: "/api/v1/admin/tasks?" + q.Encode(), token: adminToken}, 200)
		pages++
		for _, it := range page["items"].([]any) {
			task := it.(map[string]any)
			id := task["id"].(string)
			if seen[id] {
				t.Fatalf("task %s listed twice", id)
			}
			seen[id] = true
			if task["rollout_id"] != rollout || task["action_id"].(float64) <= 0 {
				t.Fatalf("admin task view %v", task)
			}
		}
		if page["next"] == nil {
			break
		}
		after = page["next"].(string)
		if pages > 20 {
			t.Fatal("pagination does not end")
		}
	}
	if len(seen) != 1234 || pages != 13 {
		t.Fatalf("walked %d tasks in %d pages, want 1234 in 13", len(seen), pages)
	}
	for id := range created {
		if !seen[id] {
			t.Fatalf("task %s never listed", id)
		}
	}
}
