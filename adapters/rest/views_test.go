package rest

import (
	"encoding/json"
	"net/http"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// The exact JSON the contract promises, key for key: a renamed, missing or
// extra field fails here.

const (
	wantCreated = "2025-03-04T12:14:15Z"
	wantUpdated = "2025-03-04T12:15:15Z"
)

func wantTaskFirmware() map[string]any {
	return map[string]any{
		"id": firmwareID, "version": "1.4.0", "url": "https://cdn.example.com/cam-x1/1.4.0.bin",
		"size_bytes": float64(1 << 20), "sha256": sha256Hex, "signature": nil, "mandatory": true, "release_notes": "fixes",
	}
}

func wantDeviceTask() map[string]any {
	return map[string]any{
		"id": taskID, "status": "downloading", "progress": float64(30), "attempt": float64(1),
		"created_at": wantCreated, "updated_at": wantUpdated, "firmware": wantTaskFirmware(),
	}
}

func wantAdminTask() map[string]any {
	m := wantDeviceTask()
	m["action_id"] = float64(42)
	m["device_id"] = dev1
	m["firmware_id"] = firmwareID
	m["rollout_id"] = rolloutID
	m["error_code"] = nil
	m["error_message"] = nil
	return m
}

func wantFirmware(status string) map[string]any {
	return map[string]any{
		"id": firmwareID, "model": "cam-x1", "version": "1.4.0", "url": "https://cdn.example.com/cam-x1/1.4.0.bin",
		"size_bytes": float64(1 << 20), "sha256": sha256Hex, "sha1": "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
		"md5": nil, "signature": nil, "release_notes": "fixes", "mandatory": true, "min_source_version": "1.0.0",
		"status": status, "created_at": wantCreated, "updated_at": wantCreated,
	}
}

func wantRollout() map[string]any {
	return withPlainPolicy(map[string]any{
		"id": rolloutID, "firmware_id": firmwareID, "percentage": float64(25), "max_attempts": float64(3),
		"failure_threshold_percent": float64(10), "min_sample": float64(20), "status": "paused",
		"paused_reason": "manual", "created_at": wantCreated, "updated_at": wantCreated,
	})
}

// withPlainPolicy adds what a view shows of a rollout without selector,
// stages, schedule or rollback: empty, null, and the default task timeout.
func withPlainPolicy(m map[string]any) map[string]any {
	m["selector"] = map[string]any{"tags_all": []any{}, "tags_any": []any{}, "attributes": map[string]any{}, "versions": nil}
	m["stages"] = []any{}
	m["stage"] = nil
	m["gate_met_at"] = nil
	m["stage_history"] = []any{}
	m["starts_at"] = nil
	m["window"] = nil
	m["task_timeout_seconds"] = float64(86400)
	m["allow_downgrade"] = false
	return m
}

func assertJSON(t *testing.T, got, want map[string]any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.MarshalIndent(got, "", "  ")
		wb, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("body mismatch\n got: %s\nwant: %s\nkeys got %v want %v", gb, wb, keys(got), keys(want))
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestViews(t *testing.T) {
	h := newHarness(t)
	get := func(t *testing.T, r req, status int) map[string]any {
		t.Helper()
		rec := h.do(t, r)
		if rec.Code != status {
			t.Fatalf("status = %d, want %d: %s", rec.Code, status, rec.Body)
		}
		return decodeMap(t, rec)
	}
	admin := testAdminToken

	t.Run("check with a task", func(t *testing.T) {
		got := get(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1,
			body: `{"model":"cam-x1","current_version":"1.2.0"}`}, 200)
		assertJSON(t, got, map[string]any{"update_available": true, "task": wantDeviceTask(), "poll_after_seconds": float64(3600)})
	})
	t.Run("check without a task", func(t *testing.T) {
		h.fake.checkFn = func(ports.CheckRequest) (ports.CheckResult, error) {
			return ports.CheckResult{Outcome: ports.CheckNoUpdate, PollAfter: 1500 * time.Millisecond}, nil
		}
		defer func() { h.fake.checkFn = nil }()
		got := get(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1,
			body: `{"model":"cam-x1","current_version":"1.2.0"}`}, 200)
		assertJSON(t, got, map[string]any{"update_available": false, "task": nil, "poll_after_seconds": float64(2)})
	})
	t.Run("device task", func(t *testing.T) {
		assertJSON(t, get(t, req{method: http.MethodGet, path: "/api/v1/devices/dev-1/ota/tasks/" + taskID, token: tokenDev1}, 200), wantDeviceTask())
	})
	t.Run("event answer", func(t *testing.T) {
		assertJSON(t, get(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/tasks/" + taskID + "/events", token: tokenDev1,
			body: `{"event_id":"e1","status":"downloading"}`}, 200), wantDeviceTask())
	})
	t.Run("failed task shows its error", func(t *testing.T) {
		h.fake.eventFn = func(ports.EventRequest) (ports.TaskView, error) {
			rec := testTask(domain.TaskFailed).Record()
			rec.ErrorCode, rec.ErrorMessage = "E_FLASH", "bad block"
			return ports.TaskView{Task: domain.RehydrateTask(rec), Firmware: testFirmware(domain.FirmwareReleased)}, nil
		}
		defer func() { h.fake.eventFn = nil }()
		got := get(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/tasks/" + taskID + "/events", token: tokenDev1,
			body: `{"event_id":"e1","status":"failed"}`}, 200)
		want := wantDeviceTask()
		want["status"] = "failed"
		assertJSON(t, got, want) // the device view has no error fields
	})
	t.Run("register device", func(t *testing.T) {
		got := get(t, req{method: http.MethodPost, path: "/api/v1/admin/devices", token: admin,
			body: `{"device_id":"dev-9","model":"cam-x1"}`}, 201)
		assertJSON(t, got, map[string]any{"device_id": "dev-9", "model": "cam-x1", "token": "dev_new_token", "created_at": wantCreated})
	})
	t.Run("rotate token", func(t *testing.T) {
		got := get(t, req{method: http.MethodPost, path: "/api/v1/admin/devices/dev-1/token", token: admin}, 200)
		assertJSON(t, got, map[string]any{"device_id": dev1, "model": "cam-x1", "token": "dev_rotated_token"})
	})
	t.Run("get device", func(t *testing.T) {
		got := get(t, req{method: http.MethodGet, path: "/api/v1/admin/devices/dev-1", token: admin}, 200)
		assertJSON(t, got, map[string]any{"device_id": dev1, "model": "cam-x1", "current_version": "1.2.0",
			"last_seen_at": wantCreated, "active_task": wantAdminTask(), "tags": []any{}, "attributes": map[string]any{}})
	})
	t.Run("publish firmware", func(t *testing.T) {
		got := get(t, req{method: http.MethodPost, path: "/api/v1/admin/firmwares", token: admin, body: firmwareBody}, 201)
		assertJSON(t, got, map[string]any{
			"id": firmwareID, "model": "cam-x1", "version": "1.4.0", "url": "https://cdn.example.com/fw.bin",
			"size_bytes": float64(1048576), "sha256": sha256Hex, "sha1": nil, "md5": nil, "signature": nil,
			"release_notes": nil, "mandatory": false, "min_source_version": nil, "status": "released",
			"created_at": wantCreated, "updated_at": wantCreated,
		})
	})
	t.Run("list firmwares", func(t *testing.T) {
		got := get(t, req{method: http.MethodGet, path: "/api/v1/admin/firmwares?model=cam-x1", token: admin}, 200)
		assertJSON(t, got, map[string]any{"items": []any{wantFirmware("released")}})
		if args := h.fake.lastArgs; len(args) != 1 || args[0] != "cam-x1" {
			t.Errorf("model = %q", args)
		}
	})
	t.Run("revoke firmware", func(t *testing.T) {
		got := get(t, req{method: http.MethodPost, path: "/api/v1/admin/firmwares/" + firmwareID + "/revoke", token: admin}, 200)
		assertJSON(t, got, wantFirmware("revoked"))
	})
	t.Run("start rollout", func(t *testing.T) {
		got := get(t, req{method: http.MethodPost, path: "/api/v1/admin/rollouts", token: admin,
			body: `{"firmware_id":"` + firmwareID + `","percentage":10}`}, 201)
		assertJSON(t, got, withPlainPolicy(map[string]any{
			"id": rolloutID, "firmware_id": firmwareID, "percentage": float64(10), "max_attempts": float64(3),
			"failure_threshold_percent": nil, "min_sample": float64(20), "status": "active",
			"paused_reason": nil, "created_at": wantCreated, "updated_at": wantCreated,
		}))
	})
	t.Run("update rollout", func(t *testing.T) {
		got := get(t, req{method: http.MethodPatch, path: "/api/v1/admin/rollouts/" + rolloutID, token: admin, body: `{"status":"paused"}`}, 200)
		assertJSON(t, got, wantRollout())
	})
	t.Run("get rollout with stats", func(t *testing.T) {
		got := get(t, req{method: http.MethodGet, path: "/api/v1/admin/rollouts/" + rolloutID, token: admin}, 200)
		want := wantRollout()
		want["stats"] = map[string]any{"pending": float64(1), "downloading": float64(2), "downloaded": float64(3),
			"installing": float64(4), "succeeded": float64(5), "failed": float64(6), "cancelled": float64(7)}
		assertJSON(t, got, want)
	})
	t.Run("task pages", func(t *testing.T) {
		got := get(t, req{method: http.MethodGet, path: "/api/v1/admin/tasks", token: admin}, 200)
		assertJSON(t, got, map[string]any{"items": []any{wantAdminTask()}, "next": "Y3Vyc29y"})
		got = get(t, req{method: http.MethodGet, path: "/api/v1/admin/tasks?after=Y3Vyc29y", token: admin}, 200)
		assertJSON(t, got, map[string]any{"items": []any{wantAdminTask()}, "next": nil})
	})
	t.Run("empty lists are arrays", func(t *testing.T) {
		if got := newTaskPageView(ports.TaskPage{}); got.Items == nil || got.Next != nil {
			t.Errorf("page = %+v", got)
		}
		b, _ := json.Marshal(newTaskPageView(ports.TaskPage{}))
		if string(b) != `{"items":[],"next":null}` {
			t.Errorf("empty page = %s", b)
		}
	})
	t.Run("never-seen device", func(t *testing.T) {
		d, _ := domain.NewDevice(asDeviceID("d"), "m", "", domain.HashToken("t"), testTime)
		b, _ := json.Marshal(newDeviceView(ports.DeviceView{Device: d}))
		if string(b) != `{"device_id":"d","model":"m","current_version":null,"last_seen_at":null,"active_task":null,"tags":[],"attributes":{}}` {
			t.Errorf("device = %s", b)
		}
	})
}
