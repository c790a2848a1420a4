package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/tests/testenv"
)

// chromiumPath is Debian's chromium (apt-get install chromium; .ci/run
// installs it when missing).
const chromiumPath = "/usr/bin/chromium"

// TestConsoleInABrowser drives the console in a real headless Chromium:
// sign in, publish a firmware (seeing a field error first), start a
// rollout, watch a device's check move the progress bar without reloading
// the page, pause the rollout through its confirmation page, start a
// staged rollout for a tag and see its plan, and save screenshots (to OTA_TEST_ARTIFACTS, or the test's temporary directory).
func TestConsoleInABrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.Skip(t, "chromium", fmt.Sprintf("no browser at %s (%v): install Debian's chromium (apt-get install -y chromium) to run the console's browser test; the handler tests ran without it", chromiumPath, err))
	}
	e := newEnv(t)
	ctx := browser(t)

	base := e.srv.URL + "/console"
	run(t, ctx, "sign in",
		chromedp.Navigate(base+"/rollouts"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("start-rollout")), // back where we were going
	)

	run(t, ctx, "publish with a bad checksum",
		chromedp.Navigate(base+"/firmwares"),
		chromedp.WaitVisible(chromedp.ID("publish-button")),
		chromedp.SendKeys(chromedp.ID("model"), "cam-x1"),
		chromedp.SendKeys(chromedp.ID("version"), "2.1.0"),
		chromedp.SendKeys(chromedp.ID("url"), "https://cdn.example.com/cam-x1/2.1.0.bin"),
		chromedp.SendKeys(chromedp.ID("size_bytes"), "7340032"),
		chromedp.SendKeys(chromedp.ID("sha256"), "NOT-HEX"),
		chromedp.Click(chromedp.ID("publish-button")),
		chromedp.WaitVisible(chromedp.ID("sha256-error")),
	)
	if text := textOf(t, ctx, "#sha256-error"); text != "sha256: must be 64 lowercase hex characters" {
		t.Errorf("error beside sha256: %q", text)
	}
	shoot(t, ctx, "console-publish-error.png")
	run(t, ctx, "publish",
		chromedp.SetValue(chromedp.ID("sha256"), strings.Repeat("5e", 32)),
		chromedp.Click(chromedp.ID("publish-button")),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	)
	if text := textOf(t, ctx, ".flash"); text != "Firmware published." {
		t.Fatalf("after publishing: %q", text)
	}
	fws, err := e.admin.ListFirmwares(context.Background(), "cam-x1")
	if err != nil || len(fws) != 1 {
		t.Fatalf("published firmware: %v, %v", fws, err)
	}
	fw := fws[0]

	// Devices register through the API, as a factory line would.
	tokens := map[string]string{}
	for i := 1; i <= 6; i++ {
		id := fmt.Sprintf("cam-%03d", i)
		var reg struct {
			Token string `json:"token"`
		}
		apiCall(t, e, http.MethodPost, "/api/v1/admin/devices", adminToken,
			fmt.Sprintf(`{"device_id":%q,"model":"cam-x1","current_version":"2.0.3"}`, id), http.StatusCreated, &reg)
		tokens[id] = reg.Token
	}

	run(t, ctx, "start a rollout",
		chromedp.Navigate(base+"/rollouts"),
		chromedp.WaitVisible(chromedp.ID("start-rollout")),
		chromedp.SetValue(chromedp.ID("firmware_id"), fw.ID().String()),
		chromedp.SetValue(chromedp.ID("percentage"), "100"),
		chromedp.SetValue(chromedp.ID("failure_threshold_percent"), "50"),
		chromedp.Click(chromedp.ID("start-rollout")),
		chromedp.WaitVisible(chromedp.ID("action-pause")),
	)
	var listed struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	apiCall(t, e, http.MethodGet, "/api/v1/admin/rollouts", adminToken, "", http.StatusOK, &listed)
	if len(listed.Items) != 1 {
		t.Fatalf("rollouts: %+v", listed)
	}
	rolloutID := listed.Items[0].ID
	total := fmt.Sprintf(`#rollout-%s [data-status="total"]`, rolloutID)

	run(t, ctx, "open the rollout list",
		chromedp.Navigate(base+"/rollouts"),
		chromedp.WaitVisible(chromedp.CSS(total)),
	)
	if text := textOf(t, ctx, total); text != "0" {
		t.Fatalf("tasks before any check: %q", text)
	}
	// One device checks in: the bar on the open page moves by itself.
	var check struct {
		UpdateAvailable bool `json:"update_available"`
	}
	apiCall(t, e, http.MethodPost, "/api/v1/devices/cam-001/ota/check", tokens["cam-001"],
		`{"model":"cam-x1","current_version":"2.0.3"}`, http.StatusOK, &check)
	if !check.UpdateAvailable {
		t.Fatal("the device got no task")
	}
	waitText(t, ctx, total, "1")
	waitText(t, ctx, fmt.Sprintf(`#rollout-%s [data-status="pending"]`, rolloutID), "1")

	// The rest of the fleet checks in and gets on with it, for a picture
	// with every colour of the bar.
	progress := map[string][]string{
		"cam-002": {"downloading", "downloaded", "installing", "succeeded"},
		"cam-003": {"downloading", "downloaded", "installing", "succeeded"},
		"cam-004": {"downloading", "downloaded", "installing"},
		"cam-005": {"downloading"},
		"cam-006": {"downloading", "failed"},
	}
	for id, steps := range progress {
		var c struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		}
		apiCall(t, e, http.MethodPost, "/api/v1/devices/"+id+"/ota/check", tokens[id], `{"model":"cam-x1","current_version":"2.0.3"}`, http.StatusOK, &c)
		for i, st := range steps {
			body := fmt.Sprintf(`{"event_id":"e%d","status":%q}`, i, st)
			if st == "failed" {
				body = fmt.Sprintf(`{"event_id":"e%d","status":"failed","error_code":"E_VERIFY","error_message":"signature check failed"}`, i)
			}
			apiCall(t, e, http.MethodPost, "/api/v1/devices/"+id+"/ota/tasks/"+c.Task.ID+"/events", tokens[id], body, http.StatusOK, nil)
		}
		if steps[len(steps)-1] == "succeeded" { // rebooted into the new image
			apiCall(t, e, http.MethodPost, "/api/v1/devices/"+id+"/ota/check", tokens[id], `{"model":"cam-x1","current_version":"2.1.0"}`, http.StatusOK, nil)
		}
	}
	waitText(t, ctx, total, "6")
	waitText(t, ctx, fmt.Sprintf(`#rollout-%s [data-status="succeeded"]`, rolloutID), "2")
	e.addSecondModel(t)
	run(t, ctx, "reload with the second model", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(total)))

	run(t, ctx, "pause, confirming first",
		chromedp.Navigate(base+"/rollouts/"+rolloutID),
		chromedp.WaitVisible(chromedp.ID("action-pause")),
		chromedp.Click(chromedp.ID("action-pause")),
		chromedp.WaitVisible(chromedp.ID("confirm")),
	)
	if got := e.rollout(rolloutID).Status(); got != domain.RolloutActive {
		t.Fatalf("the confirmation page already changed the rollout to %s", got)
	}
	run(t, ctx, "confirm the pause",
		chromedp.Click(chromedp.ID("confirm")),
		chromedp.WaitVisible(chromedp.ID("action-resume")),
	)
	if text := textOf(t, ctx, "#rollout-status"); text != "paused (manual)" {
		t.Errorf("status after pausing: %q", text)
	}
	if got := e.rollout(rolloutID).Status(); got != domain.RolloutPaused {
		t.Errorf("rollout is %s after pausing in the browser", got)
	}
	shoot(t, ctx, "console-rollout.png")
	run(t, ctx, "fleet", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("model-cam-x1")))
	shoot(t, ctx, "console-fleet.png")
	run(t, ctx, "device", chromedp.Navigate(base+"/devices?id=cam-006"), chromedp.WaitVisible(chromedp.CSS("table.list")))
	if text := textOf(t, ctx, "table.list code"); text != "E_VERIFY" {
		t.Errorf("device history shows error code %q, want E_VERIFY", text)
	}
	shoot(t, ctx, "console-device.png")

	// A staged rollout for a tagged part of the fleet, started from the
	// form: its page shows the plan with the first stage current.
	staged := e.publish("cam-x1", "2.2.0")
	run(t, ctx, "start a staged rollout",
		chromedp.Navigate(base+"/rollouts"),
		chromedp.WaitVisible(chromedp.ID("start-rollout")),
		chromedp.SetValue(chromedp.ID("firmware_id"), staged.ID().String()),
		chromedp.Clear(chromedp.ID("percentage")),
		chromedp.SendKeys(chromedp.ID("tags_all"), "beta"),
		chromedp.SendKeys(chromedp.ID("stage-1-percentage"), "10"),
		chromedp.SendKeys(chromedp.ID("stage-1-min-finished"), "2"),
		chromedp.SendKeys(chromedp.ID("stage-1-soak"), "30m"),
		chromedp.SendKeys(chromedp.ID("stage-2-percentage"), "50"),
		chromedp.SendKeys(chromedp.ID("stage-3-percentage"), "100"),
		chromedp.Click(chromedp.ID("start-rollout")),
		chromedp.WaitVisible(chromedp.ID("rollout-policy")),
	)
	if text := textOf(t, ctx, "#rollout-stage"); !strings.HasPrefix(text, "stage 1 of 3 current, since ") {
		t.Errorf("stage line: %q", text)
	}
	if text := textOf(t, ctx, "tr.stage.current td"); !strings.HasPrefix(text, "1") {
		t.Errorf("the current stage's row starts %q, want stage 1", text)
	}
	stages, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("table.stages tbody tr").length`))
	if err != nil {
		t.Fatal(err)
	}
	if stages != 3 {
		t.Errorf("%d stage rows, want 3", stages)
	}
	if text := textOf(t, ctx, "#rollout-selector"); !strings.Contains(text, "Tags, all of: beta") {
		t.Errorf("selector: %q", text)
	}
	if text := textOf(t, ctx, "#rollout-waits"); !strings.Contains(text, "Stage 1's gate: at least 2 finished tasks, 95% of them succeeded") {
		t.Errorf("waits: %q", text)
	}
	shoot(t, ctx, "console-rollout-policy.png")

	// The list: every rollout, the staged one with its hint (the README's
	// picture, docs/console.png).
	run(t, ctx, "the list with the staged rollout",
		chromedp.Navigate(base+"/rollouts"),
		chromedp.WaitVisible(chromedp.CSS(total)),
	)
	if text := textOf(t, ctx, ".hint"); !strings.Contains(text, "stage 1 of 3") || !strings.Contains(text, "tags beta") {
		t.Errorf("the staged rollout's hint in the list: %q", text)
	}
	shoot(t, ctx, "console-rollouts.png")
}

// browser starts a headless Chromium for the test, with a fresh profile
// and nothing that talks to the network on its own.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 860),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser; it lives as long as ctx, so no
	// timeout here (each step has its own).
	if err := chromedp.Do(ctx); err != nil {
		t.Skipf("chromium at %s does not start (%v); the handler tests ran without it", chromiumPath, err)
	}
	return ctx
}

func run(t *testing.T, ctx context.Context, step string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		shoot(t, ctx, "failed-"+strings.ReplaceAll(step, " ", "-")+".png")
		t.Fatalf("%s: %v", step, err)
	}
}

// textOf is the text content of the first element sel matches ("" if none).
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	text, err := chromedp.Run(sctx, chromedp.Evaluate[string](
		fmt.Sprintf(`(function(){var e=document.querySelector(%q);return e?e.textContent.trim():"";})()`, sel)))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return text
}

// waitText waits, without reloading, until the element's text is want:
// the page's own refresh must bring it.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	got := ""
	for time.Now().Before(deadline) {
		if got = textOf(t, ctx, sel); got == want {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	shoot(t, ctx, "failed-wait.png")
	t.Fatalf("%s shows %q, want %q (the page did not refresh itself)", sel, got, want)
}

// artifacts is where screenshots go: OTA_TEST_ARTIFACTS when set.
func artifacts(t *testing.T) string {
	if dir := os.Getenv("OTA_TEST_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err == nil {
			return dir
		}
	}
	return t.TempDir()
}

func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(artifacts(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Logf("writing %s: %v", path, err)
		return
	}
	t.Logf("screenshot: %s", path)
}

// apiCall calls the JSON API the way devices and scripts do.
func apiCall(t *testing.T, e *env, method, path, token, body string, want int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != want {
		var b bytes.Buffer
		_, _ = b.ReadFrom(res.Body)
		t.Fatalf("%s %s: %d, want %d: %s", method, path, res.StatusCode, want, b.String())
	}
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

// addSecondModel adds a second model with a narrower rollout, so the
// pages show more than one model.
func (e *env) addSecondModel(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	e.clock.advance(time.Minute)
	fw := e.publish("speaker-s2", "1.8.0")
	threshold := 20
	r := e.startRollout(fw, 100, &threshold)
	for i, v := range []string{"1.8.0", "1.8.0", "1.8.0", "1.7.2", "1.7.2", "1.6.0"} {
		id := fmt.Sprintf("spk-%03d", i)
		if _, err := e.admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: id, Model: "speaker-s2"}); err != nil {
			t.Fatal(err)
		}
		ident, err := e.devices.IdentifyDevice(ctx, asDeviceID(id))
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.devices.Check(ctx, ports.CheckRequest{Device: ident, Model: "speaker-s2", CurrentVersion: v})
		if err != nil {
			t.Fatal(err)
		}
		if v == "1.6.0" { // one failure in a sample of one: the rollout pauses itself
			e.fail(id, res.Task.Task.ID().String(), "E_NO_SPACE")
		}
	}
	if got := e.rollout(r.ID().String()); got.PausedReason() != domain.PausedAuto {
		t.Fatalf("speaker rollout is %s, want auto-paused", got.Status())
	}
}
