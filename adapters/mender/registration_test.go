package mender_test

import (
	"net/http"
	"testing"
)

// TestPreauthorizedRegistrationJudgesTheDeviceAsAPlainOne: registering
// with a public key (preauthorize) and without are one registration
// (application.registration): the same bad device gets the same answer,
// and the same good one is created, with a token, by both.
func TestPreauthorizedRegistrationJudgesTheDeviceAsAPlainOne(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ed25519")
	for _, tc := range []struct {
		name string
		body map[string]any
	}{
		{"no device id", map[string]any{"model": model}},
		{"a malformed device id", map[string]any{"device_id": "bad id!", "model": model}},
		{"no model", map[string]any{"device_id": "dev-x"}},
		{"a malformed version", map[string]any{"device_id": "dev-x", "model": model, "current_version": "one"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain := h.admin(http.MethodPost, "/devices", tc.body, http.StatusBadRequest).json(t)["error"].(map[string]any)
			keyed := map[string]any{"public_key": k.pub}
			for f, v := range tc.body {
				keyed[f] = v
			}
			got := h.admin(http.MethodPost, "/devices", keyed, http.StatusBadRequest).json(t)["error"].(map[string]any)
			if got["code"] != plain["code"] || got["message"] != plain["message"] {
				t.Fatalf("with a key: %v\nwithout: %v", got, plain)
			}
		})
	}
	for _, body := range []map[string]any{
		{"device_id": "dev-plain", "model": model, "current_version": "1.0.0"},
		{"device_id": "dev-keyed", "model": model, "current_version": "1.0.0", "public_key": k.pub},
	} {
		r := h.admin(http.MethodPost, "/devices", body, http.StatusCreated).json(t)
		if tok, _ := r["token"].(string); tok == "" || r["device_id"] != body["device_id"] || r["model"] != model {
			t.Fatalf("registered %v: %v", body["device_id"], r)
		}
	}
}
