package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// firmwareRow is the firmware list's row of one firmware.
func firmwareRow(t *testing.T, body, id string) string {
	t.Helper()
	row := regexp.MustCompile(`(?s)<tr id="fw-` + regexp.QuoteMeta(id) + `"[^>]*>.*?</tr>`).FindString(body)
	if row == "" {
		t.Fatalf("no row for firmware %s:\n%s", id, body)
	}
	return row
}

// A revoked firmware's rollout keeps its status (active) but admits no
// device (check rule 5): every page that shows it, its rollouts or a task
// of it marks it revoked, and no page says the rollout admits its share.
// A released firmware's rollout beside it carries no mark.
func TestRevokedFirmwareIsMarkedEverywhere(t *testing.T) {
	e := newEnv(t)
	bad := e.publish("cam", "2.0.0")
	good := e.publish("dome", "2.0.0")
	badRollout := e.startRollout(bad, 100, nil)
	goodRollout := e.startRollout(good, 100, nil)
	if e.deviceWithTask("dev-1", "cam", "1.0.0") == nil || e.deviceWithTask("dev-2", "dome", "1.0.0") == nil {
		t.Fatal("no task")
	}
	if _, err := e.admin.RevokeFirmware(context.Background(), testActor, bad.ID()); err != nil {
		t.Fatal(err)
	}
	e.mustSignIn()

	page := e.get("/console/rollouts/" + badRollout.ID().String())
	wantStatus(t, "revoked rollout", page, http.StatusOK)
	wantBody(t, "revoked rollout", page, `id="rollout-revoked"`, `class="badge revoked-mark"`, `class="waits wait-revoked"`,
		"Nothing: its firmware is revoked, so it admits no device and cannot be resumed.")
	if strings.Contains(page.body, "admits its share") {
		t.Errorf("the revoked firmware's rollout says it admits its share:\n%s", page.body)
	}
	page = e.get("/console/rollouts/" + goodRollout.ID().String())
	wantBody(t, "released rollout", page, "Nothing: it admits its share of the fleet.")
	if strings.Contains(page.body, "revoked-mark") {
		t.Errorf("a released firmware's rollout is marked revoked:\n%s", page.body)
	}

	list := e.get("/console/rollouts")
	if row := rowOf(t, list.body, badRollout.ID().String()); !strings.Contains(row, "revoked-mark") || !strings.Contains(row, "firmware revoked") {
		t.Errorf("the revoked firmware's rollout row is not marked:\n%s", row)
	}
	if row := rowOf(t, list.body, goodRollout.ID().String()); strings.Contains(row, "revoked") {
		t.Errorf("a released firmware's rollout row is marked:\n%s", row)
	}
	// The live refresh renders the same rows.
	if row := rowOf(t, e.get("/console/rollouts/rows").body, badRollout.ID().String()); !strings.Contains(row, "revoked-mark") {
		t.Errorf("the refreshed row is not marked:\n%s", row)
	}

	// dev-1's pending task is cancelled only at its next check: until
	// then its active task is of the revoked firmware, and says so.
	dev := e.get("/console/devices?id=dev-1")
	wantBody(t, "device holding a revoked task", dev, `id="active-revoked"`)
	_, history, _ := strings.Cut(dev.body, "Task history")
	if !strings.Contains(history, "revoked-mark") {
		t.Errorf("the history does not mark the revoked firmware's task:\n%s", history)
	}
	if dev := e.get("/console/devices?id=dev-2"); strings.Contains(dev.body, "revoked-mark") {
		t.Errorf("a device with a released firmware's task is marked:\n%s", dev.body)
	}

	fws := e.get("/console/firmwares").body
	if row := firmwareRow(t, fws, bad.ID().String()); !strings.Contains(row, `class="revoked"`) || !strings.Contains(row, `badge st-revoked">revoked<`) {
		t.Errorf("the firmware list does not mark the revoked firmware:\n%s", row)
	}
	if row := firmwareRow(t, fws, good.ID().String()); strings.Contains(row, "revoked") {
		t.Errorf("the firmware list marks a released firmware:\n%s", row)
	}
}
