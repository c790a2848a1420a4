package mender_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestPreauthorizedDeviceCompletesAnUpdate(t *testing.T) {
	r := newRig(t)
	d := r.newDevice("m-1", "release-1", "rsa")
	r.register(d)
	r.release("2.0.0", "release-2", r.buildArtifact("release-2", false), 3, nil)

	c := r.start(d)
	r.waitFor("the update succeeds", clientWait, func() bool { return r.oneTask(d.id, "succeeded") },
		func() string { return fmt.Sprintf("tasks: %+v", r.tasks(d.id)) })
	if !d.installed() {
		t.Fatalf("the module did not install the payload (states: %s)", d.moduleStates())
	}
	// After the update the client's next polls get nothing, and its
	// inventory reports the new artifact name.
	before := r.accessCount(http.MethodPost, routeNext, http.StatusNoContent)
	r.waitFor("a poll answered 204 after the update", clientWait, func() bool {
		c.kick()
		return r.accessCount(http.MethodPost, routeNext, http.StatusNoContent) > before
	}, func() string { return r.otad.LogTail(10) })
	if _, ok := r.inventoryAttr(d.id, "artifact_name"); ok {
		r.waitFor("the inventory reports release-2", clientWait, func() bool {
			v, _ := r.inventoryAttr(d.id, "artifact_name")
			return v == "release-2"
		}, func() string { v, _ := r.inventoryAttr(d.id, "artifact_name"); return "artifact_name=" + v })
		if v, _ := r.inventoryAttr(d.id, "test_rig"); v != "mender-e2e" {
			t.Errorf("the inventory script's attribute: %q", v)
		}
	}
	r.stopWhenIdle(c)
	if ts := r.tasks(d.id); len(ts) != 1 || ts[0].Status != "succeeded" {
		t.Fatalf("tasks: %+v, want the one task succeeded", ts)
	}
	if n := r.accessCount(http.MethodPut, routeStatus, http.StatusConflict); n != 0 {
		t.Errorf("%d status reports were refused", n)
	}
}

func TestFailingModuleEndsTheTaskFailedWithItsLog(t *testing.T) {
	r := newRig(t)
	d := r.newDevice("m-fail", "release-1", "ecdsa")
	r.register(d)
	r.release("2.0.0", "release-bad", r.buildArtifact("release-bad", true), 1, nil)

	c := r.start(d)
	r.waitFor("the task fails", clientWait, func() bool { return r.oneTask(d.id, "failed") },
		func() string { return fmt.Sprintf("tasks: %+v", r.tasks(d.id)) })
	id := r.tasks(d.id)[0].ID
	if code := r.tasks(d.id)[0].ErrorCode; code != "MENDER_FAILURE" {
		t.Errorf("error code %q", code)
	}
	var messages []any
	r.waitFor("the client's log is kept", clientWait, func() bool {
		m, status, _, err := r.tryAPI(http.MethodGet, "/api/v1/admin/tasks/"+id+"/log", "Bearer "+adminToken, nil)
		if err != nil || status != http.StatusOK {
			return false
		}
		messages, _ = m["messages"].([]any)
		return len(messages) > 0
	}, func() string { return r.otad.LogTail(10) })
	joined := fmt.Sprint(messages)
	if !strings.Contains(joined, "ArtifactInstall") {
		t.Errorf("the kept log does not mention the failing state: %.2000s", joined)
	}
	if d.installed() {
		t.Error("a failing module installed the payload")
	}
	r.stopWhenIdle(c)
	if ts := r.tasks(d.id); len(ts) != 1 {
		t.Fatalf("tasks: %+v, want one (max_attempts 1)", ts)
	}
}

func TestCancelledRolloutAbortsADeviceMidUpdate(t *testing.T) {
	r := newRig(t)
	d := r.newDevice("m-cancel", "release-1", "ed25519")
	r.register(d)
	rollout := r.release("2.0.0", "release-2", r.buildArtifact("release-2", false), 3, nil)
	if err := writeFile(d.hold, "hold"); err != nil {
		t.Fatal(err)
	}

	c := r.start(d)
	// The module holds in Download: the device is mid-update.
	r.waitFor("the module holds in Download", clientWait, func() bool {
		return strings.Contains(d.moduleStates(), "Download") && r.oneTask(d.id, "downloading")
	}, func() string { return fmt.Sprintf("tasks: %+v; module: %s", r.tasks(d.id), d.moduleStates()) })
	r.admin(http.MethodPatch, "/rollouts/"+rollout, map[string]any{"status": "cancelled"}, http.StatusOK)
	if err := removeFile(d.hold); err != nil {
		t.Fatal(err)
	}
	r.waitFor("a status report is refused with 409", clientWait, func() bool {
		return r.accessCount(http.MethodPut, routeStatus, http.StatusConflict) > 0
	}, func() string { return r.otad.LogTail(10) })
	r.waitFor("the task is cancelled", clientWait, func() bool { return r.oneTask(d.id, "cancelled") },
		func() string { return fmt.Sprintf("tasks: %+v", r.tasks(d.id)) })
	if ts := r.tasks(d.id); ts[0].ErrorCode != "ROLLOUT_CANCELLED" {
		t.Errorf("error code %q", ts[0].ErrorCode)
	}
	// The client aborted: the module never installed, and the next polls
	// get nothing.
	before := r.accessCount(http.MethodPost, routeNext, http.StatusNoContent)
	r.waitFor("a poll answered 204 after the abort", clientWait, func() bool {
		c.kick()
		return r.accessCount(http.MethodPost, routeNext, http.StatusNoContent) > before
	}, func() string { return r.otad.LogTail(10) })
	if d.installed() || strings.Contains(d.moduleStates(), "ArtifactInstall") {
		t.Fatalf("the module installed after the cancel (states: %s)", d.moduleStates())
	}
	r.stopWhenIdle(c)
	if ts := r.tasks(d.id); len(ts) != 1 {
		t.Fatalf("tasks: %+v, want the one cancelled task", ts)
	}
}

func TestUnregisteredDeviceStaysPendingUntilAccepted(t *testing.T) {
	r := newRig(t)
	d := r.newDevice("m-new", "release-1", "ed25519")
	r.release("2.0.0", "release-2", r.buildArtifact("release-2", false), 3, nil)

	c := r.start(d)
	var requestID string
	r.waitFor("the device is listed pending", clientWait, func() bool {
		m, status, _, err := r.tryAPI(http.MethodGet, "/api/v1/admin/devices/pending", "Bearer "+adminToken, nil)
		if err != nil || status != http.StatusOK {
			return false
		}
		items, _ := m["items"].([]any)
		for _, it := range items {
			if p := it.(map[string]any); p["device_id"] == d.id {
				requestID, _ = p["id"].(string)
				return p["public_key"] == d.pubPEM && p["status"] == "pending"
			}
		}
		return false
	}, func() string { return r.otad.LogTail(10) })
	// Pending: not registered, no task, however often it asks.
	time.Sleep(3 * time.Second)
	r.admin(http.MethodGet, "/devices/"+d.id, nil, http.StatusNotFound)
	if n := r.accessCount(http.MethodPost, routeNext, http.StatusOK) + r.accessCount(http.MethodPost, routeNext, http.StatusNoContent); n != 0 {
		t.Fatalf("a pending device asked for deployments %d times", n)
	}

	acc := r.admin(http.MethodPost, "/devices/pending/"+requestID+"/accept", map[string]any{"model": model}, http.StatusOK)
	if acc["device_id"] != d.id || acc["model"] != model {
		t.Fatalf("accepted: %v", acc)
	}
	r.waitFor("the accepted device completes the update", clientWait, func() bool {
		c.kick()
		return r.oneTask(d.id, "succeeded")
	}, func() string { return fmt.Sprintf("tasks: %+v", r.tasks(d.id)) })
	if !d.installed() {
		t.Fatal("the module did not install the payload")
	}
	r.stopWhenIdle(c)
}

func writeFile(p, s string) error { return osWriteFile(p, []byte(s)) }
