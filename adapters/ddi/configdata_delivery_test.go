package ddi_test

import (
	"net/http"
	"testing"
)

// Check rule 4: a device is never offered firmware "the protocol the
// device asks by cannot deliver" (hawkBit DDI agents need a sha1). A DDI
// device's configData reporting a version below the stored one is checked
// first (event rule 7); that check was run with the REST delivery, so it
// created a task for firmware without sha1, which DDI can never hand out:
// the next poll cancelled it (NOT_DELIVERABLE) and made the device confirm
// a cancelAction for an action it was never offered before it got the
// deployment it can take. The check may create a task — one DDI delivers.
func TestDDIConfigDataBelowTheStoredVersionCreatesNoUndeliverableTask(t *testing.T) {
	h := newHarness(t)
	tok := h.register("dev-d", "1.5.0")
	h.release("2.0.0", false, false) // with sha1: deliverable over DDI
	h.release("3.0.0", false, true)  // bare: no sha1, REST devices only

	// The device was re-flashed to 1.0.0 and says so in its configData.
	r := h.do(http.MethodPut, root("dev-d")+"/configData", tok, `{"mode": "merge", "data": {"sw_version": "1.0.0"}}`)
	if r.status != http.StatusOK {
		t.Fatalf("configData: %d %s", r.status, r.body)
	}
	for _, ts := range h.tasks("dev-d") {
		if fw, _ := ts["firmware"].(map[string]any); fw["version"] != "2.0.0" {
			t.Errorf("configData created a task DDI cannot deliver: %v", ts)
		}
	}
	links := h.poll("dev-d", tok)
	if links["cancelAction"] != "" || links["deploymentBase"] == "" {
		t.Fatalf("the first poll after configData: %v, want the deliverable 2.0.0 deployment and no cancelAction; tasks %v", links, h.tasks("dev-d"))
	}
}
