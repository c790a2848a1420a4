package mender_test

import (
	"context"
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
