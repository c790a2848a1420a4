package ddi_test

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// setClock is a clock a test moves by hand.
type setClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *setClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *setClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// deployment fetches the action's deploymentBase and returns its
// "deployment" object.
func (h *harness) deployment(device, auth string, action int64) map[string]any {
	h.t.Helper()
	r := h.do(http.MethodGet, root(device)+"/deploymentBase/"+strconv.FormatInt(action, 10), auth, nil)
	if r.status != http.StatusOK {
		h.t.Fatalf("deploymentBase: %d %s", r.status, r.body)
	}
	return r.json(h.t)["deployment"].(map[string]any)
}

// TestMaintenanceWindow: a task created inside its rollout's daily window
// is still handed out once the window closes (the check keeps an active
// task), and deploymentBase then says so as hawkBit does —
// maintenanceWindow "unavailable" with update "skip", the download as
// usual — and "available" with the usual update inside it, read in the
// device's timezone attribute.
func TestMaintenanceWindow(t *testing.T) {
	clock := &setClock{now: time.Date(2026, 1, 5, 3, 0, 0, 0, time.UTC)}
	h := newHarnessAt(t, clock)
	fw := h.admin(http.MethodPost, "/firmwares", map[string]any{
		"model": model, "version": "1.1.0", "url": "http://files.example/images/cam-1.1.0.swu",
		"size_bytes": 123456, "sha256": strings.Repeat("a", 64), "sha1": strings.Repeat("b", 40), "mandatory": true,
	}, http.StatusCreated)
	h.admin(http.MethodPost, "/rollouts", map[string]any{
		"firmware_id": fw["id"], "percentage": 100, "task_timeout_seconds": 7 * 24 * 3600,
		"window": map[string]any{"daily": "02:00-04:00", "time_zone": "UTC"},
	}, http.StatusCreated)

	tok := h.register("dev-w", "1.0.0")
	action := actionOf(t, h.poll("dev-w", tok)["deploymentBase"], "deploymentBase")
	dep := h.deployment("dev-w", tok, action)
	if dep["maintenanceWindow"] != "available" || dep["update"] != "forced" || dep["download"] != "forced" {
		t.Fatalf("inside the window: maintenanceWindow=%v update=%v download=%v, want available, forced, forced",
			dep["maintenanceWindow"], dep["update"], dep["download"])
	}

	clock.set(time.Date(2026, 1, 5, 5, 0, 0, 0, time.UTC))
	if got := actionOf(t, h.poll("dev-w", tok)["deploymentBase"], "deploymentBase"); got != action {
		t.Fatalf("after the window closed the poll offers action %d, want the same %d", got, action)
	}
	dep = h.deployment("dev-w", tok, action)
	if dep["maintenanceWindow"] != "unavailable" || dep["update"] != "skip" || dep["download"] != "forced" {
		t.Fatalf("outside the window: maintenanceWindow=%v update=%v download=%v, want unavailable, skip, forced",
			dep["maintenanceWindow"], dep["update"], dep["download"])
	}

	// 08:00 UTC is 03:00 in New York (EST): the device's own time zone
	// opens the window, as it does for the check.
	clock.set(time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC))
	if dep = h.deployment("dev-w", tok, action); dep["maintenanceWindow"] != "unavailable" {
		t.Fatalf("08:00 UTC without a timezone attribute: %v, want unavailable", dep["maintenanceWindow"])
	}
	r := h.do(http.MethodPut, root("dev-w")+"/configData", tok,
		`{"mode": "merge", "data": {"sw_version": "1.0.0", "timezone": "America/New_York"}}`)
	if r.status != http.StatusOK {
		t.Fatalf("configData: %d %s", r.status, r.body)
	}
	dep = h.deployment("dev-w", tok, action)
	if dep["maintenanceWindow"] != "available" || dep["update"] != "forced" {
		t.Fatalf("03:00 in the device's time zone: maintenanceWindow=%v update=%v, want available, forced",
			dep["maintenanceWindow"], dep["update"])
	}
	// A device in New York polling at 08:00 UTC is admitted by the check
	// too: the same rule decides both.
	tok2 := h.register("dev-w2", "1.0.0")
	if links := h.poll("dev-w2", tok2); links["deploymentBase"] != "" {
		t.Fatalf("08:00 UTC, no timezone: the check must keep dev-w2 out, got %v", links)
	}
	if r := h.do(http.MethodPut, root("dev-w2")+"/configData", tok2,
		`{"data": {"sw_version": "1.0.0", "timezone": "America/New_York"}}`); r.status != http.StatusOK {
		t.Fatalf("configData: %d %s", r.status, r.body)
	}
	a2 := actionOf(t, h.poll("dev-w2", tok2)["deploymentBase"], "deploymentBase")
	if dep := h.deployment("dev-w2", tok2, a2); dep["maintenanceWindow"] != "available" {
		t.Fatalf("dev-w2 admitted by the check in its window: maintenanceWindow=%v", dep["maintenanceWindow"])
	}

	// A minute before the window opens, a device kept out by it is told
	// to come back when it opens (the check's hint, schedule rule S3), not
	// after the usual 90 s.
	clock.set(time.Date(2026, 1, 6, 1, 59, 0, 0, time.UTC))
	tok3 := h.register("dev-w3", "1.0.0")
	r = h.do(http.MethodGet, root("dev-w3"), tok3, nil)
	m := r.json(t)
	if _, ok := m["_links"].(map[string]any)["deploymentBase"]; r.status != http.StatusOK || ok {
		t.Fatalf("before the window: %d %s, want no deploymentBase", r.status, r.body)
	}
	if sleep := m["config"].(map[string]any)["polling"].(map[string]any)["sleep"]; sleep != "00:01:00" {
		t.Fatalf("config.polling.sleep %v a minute before the window, want 00:01:00", sleep)
	}
}

// Stuck-task rule K1 with a window: an agent told "skip" outside the
// window waits as it was told, which is no inactivity. Its next poll, and
// the next window until the timeout's worth of open time has passed, hand
// back the same action rather than fail it TIMED_OUT; after that, a
// second attempt is made.
func TestSkippedActionIsNotTimedOutWhileTheWindowIsClosed(t *testing.T) {
	clock := &setClock{now: time.Date(2026, 1, 5, 3, 30, 0, 0, time.UTC)}
	h := newHarnessAt(t, clock)
	fw := h.admin(http.MethodPost, "/firmwares", map[string]any{
		"model": model, "version": "1.1.0", "url": "http://files.example/images/cam-1.1.0.swu",
		"size_bytes": 123456, "sha256": strings.Repeat("a", 64), "sha1": strings.Repeat("b", 40), "mandatory": true,
	}, http.StatusCreated)
	h.admin(http.MethodPost, "/rollouts", map[string]any{
		"firmware_id": fw["id"], "percentage": 100, "task_timeout_seconds": 3600,
		"window": map[string]any{"daily": "02:00-04:00", "time_zone": "UTC"},
	}, http.StatusCreated)
	tok := h.register("dev-k", "1.0.0")
	action := actionOf(t, h.poll("dev-k", tok)["deploymentBase"], "deploymentBase")

	// 05:00: 1.5 h without feedback, 30 min of it in the window.
	clock.set(time.Date(2026, 1, 5, 5, 0, 0, 0, time.UTC))
	if got := h.poll("dev-k", tok)["deploymentBase"]; got == "" || actionOf(t, got, "deploymentBase") != action {
		t.Fatalf("outside the window the poll offers %q, want action %d kept", got, action)
	}
	if dep := h.deployment("dev-k", tok, action); dep["update"] != "skip" {
		t.Fatalf("outside the window: update=%v, want skip", dep["update"])
	}
	// 02:20 the next day: 50 min of open window time.
	clock.set(time.Date(2026, 1, 6, 2, 20, 0, 0, time.UTC))
	if got := h.poll("dev-k", tok)["deploymentBase"]; got == "" || actionOf(t, got, "deploymentBase") != action {
		t.Fatalf("in the next window the poll offers %q, want action %d kept", got, action)
	}
	// 02:31: 61 min of open window time without feedback: timed out, and
	// a second attempt in the open window.
	clock.set(time.Date(2026, 1, 6, 2, 31, 0, 0, time.UTC))
	if got := actionOf(t, h.poll("dev-k", tok)["deploymentBase"], "deploymentBase"); got == action {
		t.Fatalf("past the timeout of open window time the poll still offers action %d", action)
	}
}
