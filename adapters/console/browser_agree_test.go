package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/tests/testenv"
)

// TestConsolePagesAgreeInABrowser builds a small fleet through the API and
// the use cases — five cameras on 1.1.0, 1.2.0 rolled out to all, three
// installing it and checking in with 1.2.0, a fourth holding a pending
// task; 1.3.0 rolled out to a tagged canary that starts downloading it,
// then revoked — and reads, in a real Chromium, that the fleet page, the
// device pages, the device list and the rollout page agree on versions and
// counts, and that the revoked firmware is marked on its rollout's page,
// the firmware list and the page of the device holding its task.
func TestConsolePagesAgreeInABrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.Skip(t, "chromium", fmt.Sprintf("no browser at %s (%v): install Debian's chromium (apt-get install -y chromium) to run the console's browser test; the handler tests ran without it", chromiumPath, err))
	}
	e := newEnv(t)
	ctx := context.Background()

	tokens := map[string]string{}
	for i := 1; i <= 5; i++ {
		id := fmt.Sprintf("cam-%d", i)
		var reg struct {
			Token string `json:"token"`
		}
		apiCall(t, e, http.MethodPost, "/api/v1/admin/devices", adminToken,
			fmt.Sprintf(`{"device_id":%q,"model":"cam","current_version":"1.1.0"}`, id), http.StatusCreated, &reg)
		tokens[id] = reg.Token
	}
	checkIn := func(id, version string) string {
		t.Helper()
		var c struct {
			Task *struct {
				ID string `json:"id"`
			} `json:"task"`
		}
		apiCall(t, e, http.MethodPost, "/api/v1/devices/"+id+"/ota/check", tokens[id],
			fmt.Sprintf(`{"model":"cam","current_version":%q}`, version), http.StatusOK, &c)
		if c.Task == nil {
			return ""
		}
		return c.Task.ID
	}
	report := func(id, task string, steps ...string) {
		t.Helper()
		for i, st := range steps {
			apiCall(t, e, http.MethodPost, "/api/v1/devices/"+id+"/ota/tasks/"+task+"/events", tokens[id],
				fmt.Sprintf(`{"event_id":"e%d","status":%q}`, i, st), http.StatusOK, nil)
		}
	}

	release := e.publish("cam", "1.2.0")
	released := e.startRollout(release, 100, nil)
	for _, id := range []string{"cam-1", "cam-2", "cam-3"} {
		task := checkIn(id, "1.1.0")
		if task == "" {
			t.Fatalf("%s got no task", id)
		}
		report(id, task, "downloading", "downloaded", "installing", "succeeded")
		if again := checkIn(id, "1.2.0"); again != "" { // rebooted into the new image
			t.Fatalf("%s on 1.2.0 got another task %s", id, again)
		}
	}
	if checkIn("cam-4", "1.1.0") == "" {
		t.Fatal("cam-4 got no task")
	}

	// 1.3.0 goes to the canary only; it starts downloading, then the
	// firmware is revoked: the started task finishes, no one else gets it.
	if _, err := e.admin.SetDeviceTags(ctx, testActor, asDeviceID("cam-5"), []string{"canary"}); err != nil {
		t.Fatal(err)
	}
	bad := e.publish("cam", "1.3.0")
	badRollout := e.startSpec(bad, domain.RolloutSpec{Percentage: 100, Selector: domain.SelectorSpec{TagsAll: []string{"canary"}}})
	canary := checkIn("cam-5", "1.1.0")
	if canary == "" {
		t.Fatal("the canary got no task")
	}
	report("cam-5", canary, "downloading")
	apiCall(t, e, http.MethodPost, "/api/v1/admin/firmwares/"+bad.ID().String()+"/revoke", adminToken, "", http.StatusOK, nil)
	if v, err := e.admin.GetDevice(ctx, asDeviceID("cam-5")); err != nil || v.ActiveTask == nil || !v.ActiveTask.Firmware.Revoked() {
		t.Fatalf("cam-5 does not hold a task of the revoked firmware: %+v, %v", v, err)
	}

	b := browser(t)
	base := e.srv.URL + "/console"
	run(t, b, "sign in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("model-cam")),
	)

	// The fleet page: 3 of 5 cameras on the newest released firmware,
	// 1.2.0 (1.3.0 is revoked, so it is not the newest).
	if text := textOf(t, b, "#model-cam dt:has(+ dd.share)"); text != "On newest (1.2.0)" {
		t.Errorf("fleet: newest label %q, want On newest (1.2.0)", text)
	}
	if text := textOf(t, b, "#model-cam .share"); text != "60%" {
		t.Errorf("fleet: on newest %q, want 60%%", text)
	}
	onNewest := textOf(t, b, "#model-cam g.row.newest text.n")
	if onNewest != "3" {
		t.Errorf("fleet chart: %q devices on 1.2.0, want 3", onNewest)
	}
	shoot(t, b, "agree-fleet.png")

	// The rollout page of 1.2.0 counts as many successes as the chart has
	// devices on 1.2.0, and cam-4's pending task.
	run(t, b, "the 1.2.0 rollout",
		chromedp.Navigate(base+"/rollouts/"+released.ID().String()),
		chromedp.WaitVisible(chromedp.ID("rollout-counts")),
	)
	if text := textOf(t, b, `#rollout-counts [data-status="succeeded"]`); text != onNewest {
		t.Errorf("rollout: %q succeeded, the fleet chart %q devices on 1.2.0", text, onNewest)
	}
	if text := textOf(t, b, `#rollout-counts [data-status="pending"]`); text != "1" {
		t.Errorf("rollout: %q pending, want 1 (cam-4)", text)
	}
	if text := textOf(t, b, "#rollout-revoked"); text != "" {
		t.Errorf("the released firmware's rollout is marked %q", text)
	}

	// Each device page says what the fleet page counted.
	for _, d := range []struct{ id, want string }{
		{"cam-1", "1.2.0"}, {"cam-2", "1.2.0"}, {"cam-3", "1.2.0"}, {"cam-4", "1.1.0"}, {"cam-5", "1.1.0"},
	} {
		id, want := d.id, d.want
		run(t, b, "device "+id,
			chromedp.Navigate(base+"/devices?id="+id),
			chromedp.WaitVisible(chromedp.ID("current-version")),
		)
		if text := textOf(t, b, "#current-version"); text != want {
			t.Errorf("device %s: current version %q, want %q", id, text, want)
		}
	}
	// The canary's page (the last one open) marks its revoked task.
	if text := textOf(t, b, "#active-revoked"); text != "revoked" {
		t.Errorf("cam-5's active task of the revoked firmware is marked %q", text)
	}
	shoot(t, b, "agree-device-revoked.png")

	// The device list agrees too, and leads to the device pages.
	run(t, b, "the device list",
		chromedp.Navigate(base+"/devices?model=cam"),
		chromedp.WaitVisible(chromedp.ID("device-list")),
	)
	on120, err := chromedp.Run(b, chromedp.Evaluate[int](
		`Array.from(document.querySelectorAll("#device-list tbody tr td:nth-child(3)")).filter(td => td.textContent.trim() === "1.2.0").length`))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(on120) != onNewest {
		t.Errorf("device list: %d devices on 1.2.0, the fleet chart %s", on120, onNewest)
	}
	shoot(t, b, "agree-devices.png")
	run(t, b, "from the list to a device",
		chromedp.Click(chromedp.CSS(`#device-cam-2 a`)),
		chromedp.WaitVisible(chromedp.ID("current-version")),
	)
	if text := textOf(t, b, "#current-version"); text != "1.2.0" {
		t.Errorf("cam-2 from the list: %q", text)
	}

	// The revoked firmware's rollout says so, and not that it admits its share.
	run(t, b, "the revoked firmware's rollout",
		chromedp.Navigate(base+"/rollouts/"+badRollout.ID().String()),
		chromedp.WaitVisible(chromedp.ID("rollout-revoked")),
	)
	if text := textOf(t, b, "#rollout-status"); text != "active" {
		t.Errorf("revoked firmware's rollout status %q", text)
	}
	waits := textOf(t, b, "#rollout-waits")
	if !strings.Contains(waits, "its firmware is revoked") || strings.Contains(waits, "admits its share") {
		t.Errorf("revoked firmware's rollout waits for %q", waits)
	}
	if text := textOf(t, b, "#rollout-counts [data-status=\"downloading\"]"); text != "1" {
		t.Errorf("the canary's started task: %q downloading, want 1", text)
	}
	shoot(t, b, "agree-rollout-revoked.png")

	run(t, b, "the firmware list",
		chromedp.Navigate(base+"/firmwares?model=cam"),
		chromedp.WaitVisible(chromedp.ID("fw-"+bad.ID().String())),
	)
	if text := textOf(t, b, "#fw-"+bad.ID().String()+" .badge.st-revoked"); text != "revoked" {
		t.Errorf("firmware list: 1.3.0 marked %q", text)
	}
	if text := textOf(t, b, "#fw-"+release.ID().String()+" .badge.st-released"); text != "released" {
		t.Errorf("firmware list: 1.2.0 marked %q", text)
	}

	run(t, b, "the rollout list",
		chromedp.Navigate(base+"/rollouts"),
		chromedp.WaitVisible(chromedp.ID("rollout-"+badRollout.ID().String())),
	)
	if text := textOf(t, b, "#rollout-"+badRollout.ID().String()+" .revoked-mark"); text != "revoked" {
		t.Errorf("rollout list: the revoked firmware's rollout marked %q", text)
	}
	if text := textOf(t, b, "#rollout-"+released.ID().String()+" .revoked-mark"); text != "" {
		t.Errorf("rollout list: the released firmware's rollout marked %q", text)
	}
}
