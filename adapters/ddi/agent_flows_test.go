package ddi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDDISkippedUpdateIsNotASuccess: outside its rollout's maintenance
// window a deployment is answered with update "skip" so that the agent
// "is told not to install it yet" (README, DOMAIN.md's departures; K1: a
// device told "skip" waits as it was told). SWUpdate 2022.12 — the agent
// the README documents and tests/ddi drive — acknowledges a skipped
// deployment with a closed/success feedback whose detail is "Skipped
// Update." (suricatta's server_install_update; the string is in Debian's
// binary). That feedback installed nothing, so it must not make the task
// succeeded nor record the firmware's version as the device's (event
// rule 6 takes a success as "the device's word that it runs the image"):
// otherwise a device that never installed 1.1.0 is counted as a success,
// shown running 1.1.0, and never offered it again when the window opens.
func TestDDISkippedUpdateIsNotASuccess(t *testing.T) {
	clock := &setClock{now: time.Date(2026, 1, 5, 3, 59, 0, 0, time.UTC)}
	h := newHarnessAt(t, clock)
	fw := h.admin(http.MethodPost, "/firmwares", map[string]any{
		"model": model, "version": "1.1.0", "url": "http://files.example/images/cam-1.1.0.swu",
		"size_bytes": 123456, "sha256": strings.Repeat("a", 64), "sha1": strings.Repeat("b", 40),
	}, http.StatusCreated)
	h.admin(http.MethodPost, "/rollouts", map[string]any{
		"firmware_id": fw["id"], "percentage": 100,
		"window": map[string]any{"daily": "02:00-04:00", "time_zone": "UTC"},
	}, http.StatusCreated)
	tok := h.register("dev-skip", "1.0.0")

	// 03:59: the poll creates the action inside the window.
	action := actionOf(t, h.poll("dev-skip", tok)["deploymentBase"], "deploymentBase")

	// 04:00:30: the agent fetches the deployment after the window closed.
	clock.set(time.Date(2026, 1, 5, 4, 0, 30, 0, time.UTC))
	if dep := h.deployment("dev-skip", tok, action); dep["update"] != "skip" {
		t.Fatalf("outside the window: update=%v, want skip", dep["update"])
	}
	// SWUpdate's answer to "skip", verbatim.
	r := h.do(http.MethodPost, root("dev-skip")+"/deploymentBase/"+strconv.FormatInt(action, 10)+"/feedback", tok,
		feedback(action, "closed", "success", 0, 0, "Skipped Update."))
	if r.status != http.StatusOK {
		t.Fatalf("feedback: %d %s, want 200 (SWUpdate resends anything else)", r.status, r.body)
	}
	ts := h.tasks("dev-skip")
	if len(ts) != 1 || ts[0]["status"] == "succeeded" {
		t.Errorf("a skipped deployment was recorded as installed: task %v %v (the agent installed nothing)", ts[0]["status"], ts[0]["error_code"])
	}
	if v := h.admin(http.MethodGet, "/devices/dev-skip", nil, http.StatusOK)["current_version"]; v != "1.0.0" {
		t.Errorf("current_version %v after a skipped deployment, want 1.0.0: the device never installed 1.1.0", v)
	}

	// The next window: the device still runs 1.0.0 and must get 1.1.0.
	clock.set(time.Date(2026, 1, 6, 3, 0, 0, 0, time.UTC))
	if links := h.poll("dev-skip", tok); links["deploymentBase"] == "" {
		t.Errorf("in the next window the device, still on 1.0.0, is offered nothing: %v", links)
	}
}

// TestDDIRevokeAfterAnInstallKeepsTheSuccess: SWUpdate reports its whole
// download-and-install as "proceeding" (it streams the image into the
// installer and never sends "downloaded"), so by the README's mapping its
// task stays "downloading" until its closed feedback after the reboot.
// A firmware revoked (or a rollout cancelled) while the device installs
// or reboots must not turn the device's finished install into a
// cancelled task: check rule 5 hands a started task back to finish ("a
// started task always finishes"), and event rule 6 says a DDI
// closed/success sets the device's current_version. Today the
// post-reboot flow SWUpdate runs (poll, GET deploymentBase for the
// action id, POST closed/success) meets a deploymentBase that cancels the
// task (404) and a success refused 409 TASK_FINISHED: the device runs
// 1.1.0 while the service keeps 1.0.0 and calls the task cancelled.
func TestDDIRevokeAfterAnInstallKeepsTheSuccess(t *testing.T) {
	h := newHarness(t)
	tok := h.register("dev-inst", "1.0.0")
	h.release("1.1.0", false, false)
	action := actionOf(t, h.poll("dev-inst", tok)["deploymentBase"], "deploymentBase")
	id := strconv.FormatInt(action, 10)
	fb := root("dev-inst") + "/deploymentBase/" + id + "/feedback"
	// SWUpdate's install, as it reports it (server_install_update).
	for _, body := range []string{
		feedback(action, "proceeding", "none", 0, 1, "Installing Update Chunk Artifacts."),
		feedback(action, "proceeding", "none", 1, 1, "Installed Chunk."),
		feedback(action, "proceeding", "none", 1, 1, "All Chunks Installed."),
	} {
		if r := h.do(http.MethodPost, fb, tok, body); r.status != http.StatusOK {
			t.Fatalf("install feedback: %d %s", r.status, r.body)
		}
	}
	// While the device reboots into 1.1.0, the operator revokes it.
	fwID := h.tasks("dev-inst")[0]["firmware"].(map[string]any)["id"].(string)
	h.admin(http.MethodPost, "/firmwares/"+fwID+"/revoke", nil, http.StatusOK)

	// After the reboot SWUpdate looks up its action (poll, deploymentBase)
	// and reports the result to it (server_handle_initial_state).
	links := h.poll("dev-inst", tok)
	if got := links["deploymentBase"]; got == "" || actionOf(t, got, "deploymentBase") != action {
		t.Fatalf("post-reboot poll: %v, want the started action %d handed back", links, action)
	}
	if r := h.do(http.MethodGet, root("dev-inst")+"/deploymentBase/"+id, tok, nil); r.status != http.StatusOK {
		t.Errorf("deploymentBase of the installed action the poll just offered: %d %s, want 200", r.status, r.body)
	}
	if r := h.do(http.MethodPost, fb, tok, feedback(action, "closed", "success", 0, 0, "Update Installed.")); r.status != http.StatusOK {
		t.Errorf("closed/success of the install: %d %s, want 200", r.status, r.body)
	}
	if v := h.admin(http.MethodGet, "/devices/dev-inst", nil, http.StatusOK)["current_version"]; v != "1.1.0" {
		t.Errorf("current_version %v, want 1.1.0: the device installed it and said so", v)
	}
	if ts := h.tasks("dev-inst"); ts[0]["status"] != "succeeded" {
		t.Errorf("task %v (%v), want succeeded: the install had finished before the revoke reached the device", ts[0]["status"], ts[0]["error_code"])
	}
}
