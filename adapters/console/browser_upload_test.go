package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ai-device/ota/tests/testenv"
)

// recordProgress makes the page keep, across the navigation that follows
// an upload, what each upload progress event reported and what the bar
// showed after the console's own script handled it: a listener added at
// send(), after the script's, writes both to sessionStorage.
const recordProgress = `(function () {
  sessionStorage.setItem("progress", "[]");
  var send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = function (body) {
    this.upload.addEventListener("progress", function (e) {
      var seen = JSON.parse(sessionStorage.getItem("progress"));
      seen.push({loaded: e.loaded, total: e.total,
        bar: document.getElementById("upload-progress").value,
        shown: !document.getElementById("upload-status").hidden,
        label: document.getElementById("upload-percent").textContent});
      sessionStorage.setItem("progress", JSON.stringify(seen));
    });
    return send.apply(this, arguments);
  };
  return true;
})()`

type progressSeen struct {
	Loaded, Total int64
	Bar           float64
	Shown         bool
	Label         string
}

// TestConsoleUploadInABrowser drives the upload in a real headless
// Chromium: a truncated .mender is refused with the reason on the page; a
// real one uploads with the bar following the bytes sent, its page shows
// what it says about itself, and a firmware is published from it with
// the pre-filled model and an edited version.
func TestConsoleUploadInABrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.Skip(t, "chromium", fmt.Sprintf("no browser at %s (%v): install Debian's chromium (apt-get install -y chromium) to run the console's browser test; the handler tests ran without it", chromiumPath, err))
	}
	e := newEnv(t)
	file := menderFile(t, "cam-x9", "cam-x9-4.0.0", "4.0.0", 6<<20)
	dir := t.TempDir()
	good, cut := filepath.Join(dir, "cam-x9-4.0.0.mender"), filepath.Join(dir, "cut.mender")
	if err := os.WriteFile(good, file, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, file[:len(file)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	base := e.srv.URL + "/console"
	run(t, ctx, "sign in",
		chromedp.Navigate(base+"/firmwares"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("upload-form")),
	)

	run(t, ctx, "upload a truncated file",
		chromedp.SetUploadFiles(chromedp.ID("artifact-file"), []string{cut}),
		chromedp.Click(chromedp.ID("upload-button")),
		chromedp.WaitVisible(chromedp.ID("upload-error")),
	)
	if text := textOf(t, ctx, "#upload-error"); !strings.Contains(text, "truncated") {
		t.Errorf("the refusal on the page: %q", text)
	}
	shoot(t, ctx, "console-upload-refused.png")

	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](recordProgress)); err != nil || !ok {
		t.Fatalf("recording progress: %v", err)
	}
	run(t, ctx, "upload",
		chromedp.SetUploadFiles(chromedp.ID("artifact-file"), []string{good}),
		chromedp.Click(chromedp.ID("upload-button")),
		chromedp.WaitVisible(chromedp.ID("artifact-meta")),
	)
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("progress")`))
	if err != nil {
		t.Fatal(err)
	}
	var seen []progressSeen
	if err := json.Unmarshal([]byte(raw), &seen); err != nil || len(seen) == 0 {
		t.Fatalf("upload progress seen: %s (%v)", raw, err)
	}
	last := seen[len(seen)-1]
	if last.Loaded != last.Total || last.Bar != 100 || last.Label != "100%" || !last.Shown {
		t.Errorf("the bar at the last progress event: %+v (all: %+v)", last, seen)
	}
	for _, s := range seen {
		if want := float64(s.Loaded * 100 / s.Total); s.Bar != want || !s.Shown {
			t.Errorf("at %d of %d bytes the bar shows %v, want %v", s.Loaded, s.Total, s.Bar, want)
		}
	}
	t.Logf("%d progress events", len(seen))

	for sel, want := range map[string]string{
		"#meta-format":        "mender",
		"#meta-artifact-name": "cam-x9-4.0.0",
		"#meta-device-types":  "cam-x9",
		"#meta-version":       "4.0.0",
		"#meta-payload-type":  "rootfs-image",
		"#meta-size":          fmt.Sprintf("6.0 MiB (%d bytes)", len(file)),
	} {
		if got := textOf(t, ctx, sel); got != want {
			t.Errorf("%s shows %q, want %q", sel, got, want)
		}
	}
	model, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("model").value`))
	if err != nil || model != "cam-x9" {
		t.Errorf("model pre-filled with %q (%v)", model, err)
	}
	shoot(t, ctx, "console-upload-confirm.png")

	run(t, ctx, "publish from the upload",
		chromedp.SetValue(chromedp.ID("version"), "4.0.1"),
		chromedp.Click(chromedp.ID("publish-artifact-button")),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	)
	if text := textOf(t, ctx, ".flash"); text != "Firmware published." {
		t.Fatalf("after publishing: %q", text)
	}
	fws, err := e.admin.ListFirmwares(context.Background(), "cam-x9")
	if err != nil || len(fws) != 1 {
		t.Fatalf("published firmware: %v, %v", fws, err)
	}
	if spec := fws[0].Spec(); spec.Version != "4.0.1" || spec.ArtifactID.IsZero() || spec.SizeBytes != int64(len(file)) ||
		spec.ArtifactName != "cam-x9-4.0.0" {
		t.Errorf("published %+v", spec)
	}
}
