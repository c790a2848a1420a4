package mender_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/mender"
)

// An inventory PATCH merges (README: "PUT replaces, PATCH merges"). A
// device with 40 attributes that patches 30 of them (changed values) has a
// merged set of 40 attributes, well within the 64 allowed: nothing may be
// dropped. The use case counts stored + reported (70 > 64) as if none of
// the reported names were stored, and replaces the whole set by the patch.
func TestInventoryPatchOfKnownNamesMergesWithinTheBound(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ed25519")
	h.register("dev-1", k)
	tok := h.token("dev-1", k)

	items := func(n int, value string) string {
		var b strings.Builder
		b.WriteString(`[{"name":"device_type","value":"cam-x1"}`)
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, `,{"name":"attr_%02d","value":%q}`, i, value)
		}
		b.WriteString("]")
		return b.String()
	}
	if r := h.do(http.MethodPut, mender.InventoryPath, bearer(tok), items(40, "v1"), true); r.status != http.StatusOK {
		t.Fatalf("inventory PUT: %d %s", r.status, r.body)
	}
	// 30 of the 40 names again, with new values.
	if r := h.do(http.MethodPatch, mender.InventoryPath, bearer(tok), items(30, "v2"), true); r.status != http.StatusOK {
		t.Fatalf("inventory PATCH: %d %s", r.status, r.body)
	}
	attrs, err := memory.NewAttributes(h.store).Get(context.Background(), asDeviceID("dev-1"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(attrs.Values()); n != 40 {
		t.Errorf("after a PATCH of 30 known names the device has %d attributes, want 40 (merged)", n)
	}
	if v, ok := attrs.Get("attr_35"); !ok || v != "v1" {
		t.Errorf("attr_35, not in the PATCH, is %q (present %v), want the stored v1", v, ok)
	}
	if v, _ := attrs.Get("attr_10"); v != "v2" {
		t.Errorf("attr_10 = %q, want the patched v2", v)
	}
}

// A failed install's log is what its operator needs, and mender-client
// uploads the whole of it: a log past the API's 64 KiB bound (here 600
// lines, about 90 KB) is taken, and its last 200 lines kept, not refused
// whole with 413 (README: "the last 200 lines, 1024 characters each").
// Past the log route's own bound (4 MiB) it is 413.
func TestALongDeploymentLogKeepsItsLastLines(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ed25519")
	h.register("dev-1", k)
	h.release("2.0.0", "release-2")
	tok := h.token("dev-1", k)
	var d deployment
	_ = json.Unmarshal(h.nextAll(tok, "release-1")[0].body, &d)
	for _, s := range []string{"downloading", "installing", "failure"} {
		if got := h.status(tok, d.ID, s); got != http.StatusNoContent {
			t.Fatalf("status %s: %d", s, got)
		}
	}
	logOf := func(lines int, width int) string {
		var b strings.Builder
		b.WriteString(`{"messages":[`)
		for i := range lines {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"level":"info","message":"line %04d %s","timestamp":"2026-12-01T00:00:00Z"}`, i, strings.Repeat("x", width))
		}
		b.WriteString("]}")
		return b.String()
	}
	path := "/api/devices/v1/deployments/device/deployments/" + d.ID + "/log"
	long := logOf(600, 80)
	if len(long) <= 64<<10 {
		t.Fatalf("the log is %d bytes, not past 64 KiB", len(long))
	}
	if r := h.do(http.MethodPut, path, bearer(tok), long, true); r.status != http.StatusNoContent {
		t.Fatalf("a %d-byte log: %d %s, want 204", len(long), r.status, r.body)
	}
	got := h.admin(http.MethodGet, "/tasks/"+d.ID+"/log", nil, http.StatusOK)
	var l struct {
		Messages []struct{ Message string } `json:"messages"`
	}
	if err := json.Unmarshal(got.body, &l); err != nil || len(l.Messages) != 200 || !strings.HasPrefix(l.Messages[0].Message, "line 0400") ||
		!strings.HasPrefix(l.Messages[199].Message, "line 0599") {
		t.Fatalf("kept %d lines (%v), want the last 200, 0400 to 0599", len(l.Messages), err)
	}
	if r := h.do(http.MethodPut, path, bearer(tok), logOf(5000, 1000), true); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a log past 4 MiB: %d, want 413", r.status)
	}
}
