package readme

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ai-device/ota/tests/testenv"
)

// chromiumPath is Debian's chromium, as for the console's browser tests.
const chromiumPath = "/usr/bin/chromium"

// stateMark starts the line the test appends to the README's blocks: the
// ids the walk-through drew at random ($MODEL, $DEVICE), which the browser
// walk needs. README.md itself is left as a reader pastes it.
const stateMark = "@@readme-state "

// stateLine is the shell line that prints them.
const stateLine = `echo "` + stateMark + `$MODEL $DEVICE"`

// readmeState finds the ids the appended line printed.
func readmeState(output string) (model, device string, ok bool) {
	for _, l := range strings.Split(output, "\n") {
		if rest, found := strings.CutPrefix(l, stateMark); found {
			model, device, ok = strings.Cut(strings.TrimSpace(rest), " ")
		}
	}
	return model, device, ok && model != "" && device != ""
}

// taskStatuses are the keys of a rollout's stats, as the API names them
// and the console's legend tags them (data-status).
var taskStatuses = []string{"pending", "downloading", "downloaded", "installing", "succeeded", "failed", "cancelled"}

type apiRollout struct {
	ID         string         `json:"id"`
	Version    string         `json:"version"`
	Percentage int            `json:"percentage"`
	Status     string         `json:"status"`
	Stats      map[string]int `json:"stats"`
}

type apiTask struct {
	DeviceID string `json:"device_id"`
	Status   string `json:"status"`
	Firmware struct {
		Version string `json:"version"`
	} `json:"firmware"`
}

type apiDevice struct {
	CurrentVersion *string  `json:"current_version"`
	ActiveTask     *apiTask `json:"active_task"`
}

// fleetCard is what the fleet page shows of one model: its figures by
// label, and its chart's rows.
type fleetCard struct {
	Stats map[string]string `json:"stats"`
	Rows  []struct {
		Label  string `json:"label"`
		N      string `json:"n"`
		Newest bool   `json:"newest"`
	} `json:"rows"`
}

// consolePagesAgreeWithTheAPI opens, in a real headless Chromium, the
// console of the otad the README's blocks just ran against, and reads the
// walk-through's final state there: the fleet page's card of the README's
// model, the device pages of $DEVICE, of a fleet device and of a device
// holding a task of the revoked 1.2.0, the 1.2.0 and 1.3.0 rollout pages and
// the firmware list all say what the admin API says — compared with the
// API, not with numbers written here, since the rollout's bucket hash moves
// the counts from run to run — and the revoked 1.2.0 is marked on its
// rollout's page, the firmware list and that device's page.
func consolePagesAgreeWithTheAPI(t *testing.T, base, token, model, device string) {
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.Skip(t, "chromium", fmt.Sprintf("no browser at %s (%v): install Debian's chromium (apt-get install -y chromium) to read the README's state in the console", chromiumPath, err))
	}
	api := func(path string, out any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+"/api/v1"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: HTTP %d", path, res.StatusCode)
		}
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	q := url.QueryEscape

	// What the API says of the README's final state.
	var fleet struct {
		Items []struct {
			Devices       int     `json:"devices"`
			PolledHour    int     `json:"polled_last_hour"`
			PolledDay     int     `json:"polled_last_day"`
			NewestVersion *string `json:"newest_version"`
			OnNewest      int     `json:"on_newest"`
			Versions      []struct {
				Version *string `json:"version"`
				Devices int     `json:"devices"`
			} `json:"versions"`
		} `json:"items"`
	}
	api("/admin/fleet?model="+q(model), &fleet)
	if len(fleet.Items) != 1 || fleet.Items[0].NewestVersion == nil {
		t.Fatalf("the API's fleet of %s: %+v", model, fleet)
	}
	want := fleet.Items[0]
	var listed struct {
		Items []apiRollout `json:"items"`
	}
	api("/admin/rollouts?model="+q(model), &listed)
	rollouts := map[string]apiRollout{}
	for _, r := range listed.Items {
		var one apiRollout
		api("/admin/rollouts/"+r.ID, &one) // the stats the README's step 6 reads
		one.Version = r.Version
		rollouts[r.Version] = one
	}
	r120, r130 := rollouts["1.2.0"], rollouts["1.3.0"]
	if r120.ID == "" || r130.ID == "" {
		t.Fatalf("the README's rollouts of 1.2.0 and 1.3.0: %+v", listed.Items)
	}
	var firmwares struct {
		Items []struct {
			ID      string `json:"id"`
			Version string `json:"version"`
			Status  string `json:"status"`
		} `json:"items"`
	}
	api("/admin/firmwares?model="+q(model), &firmwares)
	revokedID := ""
	for _, f := range firmwares.Items {
		if f.Version == "1.2.0" && f.Status == "revoked" {
			revokedID = f.ID
		}
	}
	if revokedID == "" {
		t.Fatalf("the README's step 8 left 1.2.0 unrevoked: %+v", firmwares.Items)
	}
	// A device holding a task of 1.2.0: one still downloading it (step 8
	// lets started tasks finish) when the hash admitted one, else any
	// device that had one.
	var tasks struct {
		Items []apiTask `json:"items"`
	}
	api("/admin/tasks?rollout_id="+q(r120.ID)+"&limit=100", &tasks)
	if len(tasks.Items) == 0 {
		t.Fatalf("the README's 1.2.0 rollout has no tasks: %+v", r120)
	}
	holder := tasks.Items[0].DeviceID
	for _, tk := range tasks.Items {
		if tk.Status == "downloading" {
			holder = tk.DeviceID
			break
		}
	}
	devices := map[string]apiDevice{}
	for _, id := range []string{device, model + "-01", holder} {
		var d apiDevice
		api("/admin/devices/"+q(id), &d)
		if d.CurrentVersion == nil {
			t.Fatalf("the API's %s reports no version: %+v", id, d)
		}
		devices[id] = d
	}

	b := browserContext(t)
	con := base + "/console"
	step(t, b, "sign in",
		chromedp.Navigate(con+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("model-"+model)),
	)

	// The fleet page: the model's figures and chart are the API's.
	card, err := chromedp.Run(b, chromedp.Evaluate[fleetCard](fmt.Sprintf(`(function(){
		var c = document.getElementById(%q), stats = {}, rows = [];
		c.querySelectorAll("dl.stats > div").forEach(function(d){ stats[d.querySelector("dt").textContent.trim()] = d.querySelector("dd").textContent.trim(); });
		c.querySelectorAll("svg.chart g.row").forEach(function(g){ rows.push({label: g.querySelector("text").textContent.trim(), n: g.querySelector("text.n").textContent.trim(), newest: g.classList.contains("newest")}); });
		return {stats: stats, rows: rows};
	})()`, "model-"+model)))
	if err != nil {
		t.Fatalf("reading the fleet page: %v", err)
	}
	shot(t, b, "readme-fleet.png")
	if got := card.Stats["Devices"]; got != strconv.Itoa(want.Devices) {
		t.Errorf("fleet page: %s devices, the API %d", got, want.Devices)
	}
	for label, n := range map[string]int{"Polled last hour": want.PolledHour, "Polled last day": want.PolledDay} {
		if got := card.Stats[label]; got != strconv.Itoa(n) {
			t.Errorf("fleet page: %s %q, the API %d", label, got, n)
		}
	}
	newestLabel := "On newest (" + *want.NewestVersion + ")"
	if got, share := card.Stats[newestLabel], fmt.Sprintf("%.0f%%", 100*float64(want.OnNewest)/float64(want.Devices)); got != share {
		t.Errorf("fleet page: %q on newest is %q, the API's %d of %d is %s (figures: %v)", newestLabel, got, want.OnNewest, want.Devices, share, card.Stats)
	}
	if len(card.Rows) != len(want.Versions) {
		t.Errorf("fleet chart: %d versions, the API %d", len(card.Rows), len(want.Versions))
	}
	chart := map[string]string{}
	for i, row := range card.Rows {
		chart[row.Label] = row.N
		if i >= len(want.Versions) {
			continue
		}
		v, label := want.Versions[i], "not reported"
		if v.Version != nil {
			label = *v.Version
		}
		if row.Label != label || row.N != strconv.Itoa(v.Devices) {
			t.Errorf("fleet chart row %d: %s × %s, the API %s × %d", i, row.Label, row.N, label, v.Devices)
		}
		if row.Newest != (label == *want.NewestVersion) || row.Newest && row.N != strconv.Itoa(want.OnNewest) {
			t.Errorf("fleet chart row %s (newest: %v, %s devices); the API's newest is %s on %d", label, row.Newest, row.N, *want.NewestVersion, want.OnNewest)
		}
	}
	// Every lab device that installed 1.3.0 runs it: the chart's 1.3.0 row
	// counts the 1.3.0 rollout's successes.
	if got := chart["1.3.0"]; got != strconv.Itoa(r130.Stats["succeeded"]) {
		t.Errorf("fleet chart: %q devices on 1.3.0, its rollout %d succeeded", got, r130.Stats["succeeded"])
	}

	// The rollout pages: each status's count, the total, the share and the
	// status are the API's; 1.2.0's is marked revoked, 1.3.0's is not.
	for _, r := range []apiRollout{r120, r130} {
		step(t, b, "the "+r.Version+" rollout",
			chromedp.Navigate(con+"/rollouts/"+r.ID),
			chromedp.WaitVisible(chromedp.ID("rollout-counts")),
		)
		shot(t, b, "readme-rollout-"+r.Version+".png")
		total := 0
		for _, st := range taskStatuses {
			total += r.Stats[st]
			// The legend lists only the statuses some task has.
			got := textAt(t, b, fmt.Sprintf(`#rollout-counts [data-status=%q]`, st))
			if got == "" {
				got = "0"
			}
			if got != strconv.Itoa(r.Stats[st]) {
				t.Errorf("rollout %s page: %s %s, the API %d", r.Version, got, st, r.Stats[st])
			}
		}
		if got := textAt(t, b, `#rollout-counts [data-status="total"]`); got != strconv.Itoa(total) {
			t.Errorf("rollout %s page: total %s, the API's stats sum to %d", r.Version, got, total)
		}
		if got := textAt(t, b, "#rollout-percentage"); got != fmt.Sprintf("%d%%", r.Percentage) {
			t.Errorf("rollout %s page: share %s, the API %d%%", r.Version, got, r.Percentage)
		}
		if got := textAt(t, b, "#rollout-status"); !strings.HasPrefix(got, r.Status) {
			t.Errorf("rollout %s page: status %q, the API %q", r.Version, got, r.Status)
		}
		mark, wantMark := textAt(t, b, "#rollout-revoked"), ""
		if r.Version == "1.2.0" {
			wantMark = "revoked"
		}
		if mark != wantMark {
			t.Errorf("rollout %s page: revoked mark %q, want %q", r.Version, mark, wantMark)
		}
	}

	// The firmware list: each firmware's status is the API's, 1.2.0 marked.
	step(t, b, "the firmware list",
		chromedp.Navigate(con+"/firmwares?model="+q(model)),
		chromedp.WaitVisible(chromedp.ID("fw-"+revokedID)),
	)
	shot(t, b, "readme-firmwares.png")
	for _, f := range firmwares.Items {
		if got := textAt(t, b, fmt.Sprintf(`[id="fw-%s"] .badge.st-%s`, f.ID, f.Status)); got != f.Status {
			t.Errorf("firmware list: %s marked %q, the API says %s", f.Version, got, f.Status)
		}
	}
	if got := textAt(t, b, `[id="fw-`+revokedID+`"] .badge.st-revoked`); got != "revoked" {
		t.Errorf("firmware list: the revoked 1.2.0 is marked %q", got)
	}

	// The device pages: the version the API records and, for the device
	// holding a 1.2.0 task, the revoked mark beside it.
	for _, id := range []string{device, model + "-01", holder} {
		d := devices[id]
		step(t, b, "device "+id,
			chromedp.Navigate(con+"/devices?id="+q(id)),
			chromedp.WaitVisible(chromedp.ID("current-version")),
		)
		if got := textAt(t, b, "#current-version"); got != *d.CurrentVersion {
			t.Errorf("device %s page: on %q, the API %q", id, got, *d.CurrentVersion)
		} else if chart[got] == "" {
			t.Errorf("device %s page: on %s, a version the fleet chart does not count (%v)", id, got, chart)
		}
		active, wantActive := textAt(t, b, "#active-revoked"), ""
		if d.ActiveTask != nil && d.ActiveTask.Firmware.Version == "1.2.0" {
			wantActive = "revoked"
		}
		if active != wantActive {
			t.Errorf("device %s page: active task (the API's: %+v) marked %q, want %q", id, d.ActiveTask, active, wantActive)
		}
		if id != holder {
			continue
		}
		shot(t, b, "readme-device-revoked.png")
		rows, err := chromedp.Run(b, chromedp.Evaluate[int](`Array.from(document.querySelectorAll("table.list tbody tr td:nth-child(2)")).filter(function(td){ return td.textContent.trim() === "1.2.0 revoked"; }).length`))
		if err != nil {
			t.Fatal(err)
		}
		if rows == 0 {
			t.Errorf("device %s page: its 1.2.0 task in the history is not marked revoked", id)
		}
	}
	if devices[device].CurrentVersion == nil || *devices[device].CurrentVersion != "1.1.0" {
		t.Errorf("the API's %s: %+v, the README's walk-through leaves it on 1.1.0", device, devices[device])
	}
}

// browserContext starts a headless Chromium with a fresh profile and
// nothing that talks to the network on its own.
func browserContext(t *testing.T) context.Context {
	t.Helper()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
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
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 860),
	)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		testenv.Skip(t, "chromium", fmt.Sprintf("chromium at %s does not start (%v)", chromiumPath, err))
	}
	return ctx
}

func step(t *testing.T, ctx context.Context, name string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		shot(t, ctx, "failed-"+strings.ReplaceAll(name, " ", "-")+".png")
		t.Fatalf("%s: %v", name, err)
	}
}

// textAt is the trimmed text of the first element sel matches, "" if none.
func textAt(t *testing.T, ctx context.Context, sel string) string {
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

// shot saves a screenshot to OTA_TEST_ARTIFACTS when set.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("OTA_TEST_ARTIFACTS")
	if dir == "" || os.MkdirAll(dir, 0o755) != nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Logf("screenshot %s: %v", name, err)
	}
}
