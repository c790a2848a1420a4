package mender_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestNoDeviceIsRegisteredAsPending: "pending" is a valid device id by its
// characters, but with Mender's operator routes mounted the static
// GET /api/v1/admin/devices/pending (the pending authentication requests)
// would shadow GET /api/v1/admin/devices/{device_id}: such a device could
// never be read. Its registration is refused, naming the field, and the
// queue stays the queue.
func TestNoDeviceIsRegisteredAsPending(t *testing.T) {
	h := newHarness(t, false)
	r := h.admin(http.MethodPost, "/devices", map[string]any{"device_id": "pending", "model": model, "current_version": "1.0.0"}, http.StatusBadRequest)
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Code != "VALIDATION_FAILED" || !strings.Contains(e.Error.Message, "device_id") {
		t.Fatalf("registering a device as pending: %s", r.body)
	}
	got := h.admin(http.MethodGet, "/devices/pending", nil, http.StatusOK)
	var q struct {
		Items []any `json:"items"`
	}
	if err := json.Unmarshal(got.body, &q); err != nil || q.Items == nil {
		t.Fatalf("GET /api/v1/admin/devices/pending: %s, want the queue", got.body)
	}
}
