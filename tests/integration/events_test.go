package integration

import (
	"strings"
	"testing"
)

// TestChangesAnnounceTheirEvents: each change writes its events in its own
// transaction — a registration, a publication, a rollout's start (and,
// at 100 %, its completion) and a
// task's success each exactly once, with the ids a receiver needs — and a
// refused change (a second publication of the same version) writes none.
func TestChangesAnnounceTheirEvents(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	f := s.seed()
	s.ok(call{method: "POST", path: "/api/v1/devices/" + f.devA + "/ota/tasks/" + f.taskA + "/events", token: f.tokA,
		body: js(map[string]any{"event_id": "e-1", "status": "succeeded"})}, 200)
	if code, _, _ := s.do(call{method: "POST", path: "/api/v1/admin/firmwares", token: adminToken, body: js(map[string]any{
		"model": "cam-x1", "version": "1.1.0", "url": "https://files.example/fw.bin", "size_bytes": 10, "sha256": strings.Repeat("a", 64)})}); code != 409 {
		t.Fatalf("a second publication: %d", code)
	}
	type row struct {
		Type    string `db:"type"`
		Payload string `db:"payload"`
	}
	var rows []row
	if err := s.db.Select(&rows, `SELECT type, payload::text AS payload FROM outbox_events ORDER BY seq`); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range rows {
		count[r.Type]++
		switch r.Type {
		case "task.succeeded":
			for _, id := range []string{f.taskA, f.devA, f.fwID, f.rolloutID} {
				if !strings.Contains(r.Payload, id) {
					t.Errorf("task.succeeded does not name %s: %s", id, r.Payload)
				}
			}
		case "rollout.created":
			if !strings.Contains(r.Payload, f.rolloutID) || !strings.Contains(r.Payload, f.fwID) {
				t.Errorf("rollout.created: %s", r.Payload)
			}
		}
	}
	want := map[string]int{"device.registered": 2, "firmware.published": 1, "rollout.created": 1, "rollout.completed": 1, "task.succeeded": 1}
	for typ, n := range want {
		if count[typ] != n {
			t.Errorf("%d %s events, want %d (all: %v)", count[typ], typ, n, count)
		}
	}
	if len(rows) != 6 {
		t.Errorf("%d events, want 6: %v", len(rows), count)
	}
}
