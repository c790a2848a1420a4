// Package ddi_test drives the service with the real hawkBit client SWUpdate
// (suricatta, Debian's 2022.12 package): signed .swu images served from a
// local file server, otad built and started as a process, swupdate
// processes as devices. It is skipped, loudly, only when the swupdate
// binary is not installed (apt-get install -y swupdate); with
// OTA_TEST_REQUIRE_SERVICES=1 a missing binary fails instead.
package ddi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/tests/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunWithOtad(m)) }

const adminToken = "ddi-e2e-admin-token-0123456789"

// How long "nothing more happens" is watched.
const settle = 3 * time.Second

// rig is one otad, one file server, one signing certificate.
type rig struct {
	t        *testing.T
	swupdate string
	dir      string
	signer   testenv.SWUSigner
	files    *httptest.Server
	otad     *testenv.Otad
}

func newRig(t *testing.T) *rig {
	bin := testenv.RequireSWUpdate(t, "the real-client DDI tests")
	r := &rig{t: t, swupdate: bin, dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(r.dir, "www"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.signer = testenv.NewSWUSigner(t, r.dir, "ota-ddi-test-signer")
	r.files = httptest.NewServer(http.FileServer(http.Dir(filepath.Join(r.dir, "www"))))
	t.Cleanup(r.files.Close)
	r.otad, _ = testenv.StartClientOtad(t, testenv.OtadConfig{Name: "ddi", AdminToken: adminToken, Env: map[string]string{
		"OTA_POLL_INTERVAL": "1s", "OTA_DEVICE_RATE_LIMIT": "0",
	}})
	return r
}

// image is a published .swu.
type image struct {
	url                  string
	size                 int64
	sha256, sha1, md5sum string
}

// buildSWU writes a signed .swu that installs on hardware revision hwRev,
// and serves it as name.
func (r *rig) buildSWU(name, version, hwRev string) image {
	r.t.Helper()
	swu := r.signer.WriteSWU(r.t, filepath.Join(r.dir, "www", name), version, hwRev)
	return image{url: r.files.URL + "/" + name, size: swu.Size, sha256: swu.SHA256, sha1: swu.SHA1, md5sum: swu.MD5}
}

// api calls otad with a JSON body and decodes a JSON answer.
func (r *rig) api(method, path, auth string, body any, want int) map[string]any {
	r.t.Helper()
	m, status, raw, err := testenv.CallJSON(method, r.otad.URL+path, auth, body)
	if err != nil {
		r.t.Fatal(err)
	}
	if status != want {
		r.t.Fatalf("%s %s: %d %s, want %d", method, path, status, raw, want)
	}
	return m
}

func (r *rig) admin(method, path string, body any, want int) map[string]any {
	r.t.Helper()
	return r.api(method, "/api/v1/admin"+path, "Bearer "+adminToken, body, want)
}

func (r *rig) register(device, model string) string {
	return r.admin(http.MethodPost, "/devices", map[string]any{"device_id": device, "model": model, "current_version": "1.0.0"},
		http.StatusCreated)["token"].(string)
}

// release publishes img as version of model and rolls it out to everyone.
func (r *rig) release(model, version string, img image, maxAttempts int) string {
	fw := r.admin(http.MethodPost, "/firmwares", map[string]any{
		"model": model, "version": version, "url": img.url, "size_bytes": img.size,
		"sha256": img.sha256, "sha1": img.sha1, "md5": img.md5sum,
	}, http.StatusCreated)
	return r.admin(http.MethodPost, "/rollouts", map[string]any{"firmware_id": fw["id"], "percentage": 100, "max_attempts": maxAttempts},
		http.StatusCreated)["id"].(string)
}

type task struct {
	ActionID     int64  `json:"action_id"`
	Status       string `json:"status"`
	Progress     int    `json:"progress"`
	Attempt      int    `json:"attempt"`
	ErrorCode    string `json:"error_code"`
	ErrorMessage string `json:"error_message"`
}

func (r *rig) tasks(device string) []task {
	r.t.Helper()
	ts, err := r.tryTasks(device)
	if err != nil {
		r.t.Fatal(err)
	}
	return ts
}

// tryTasks lists the device's tasks without failing the test, for
// conditions checked from other goroutines.
func (r *rig) tryTasks(device string) ([]task, error) {
	return testenv.ListTasks[task](r.otad.URL, adminToken, device)
}

// poll is a DDI poll made by the test itself, as the device would; it
// returns the names of the links offered.
func (r *rig) poll(device, token string) map[string]any {
	r.t.Helper()
	return r.api(http.MethodGet, "/DEFAULT/controller/v1/"+device, "TargetToken "+token, nil, http.StatusOK)["_links"].(map[string]any)
}

// start runs swupdate as device, with its own TMPDIR. extra is appended to
// the suricatta arguments.
func (r *rig) start(device, token, board, tmp string, extra ...string) *testenv.Client {
	r.t.Helper()
	return testenv.StartSWUpdate(r.t, r.swupdate, tmp, r.otad.URL, device, token, board, r.signer.Cert, extra...)
}

// runUntil runs a client until cond holds, restarting a hung one (see
// testenv.RunSWUpdateUntil).
func (r *rig) runUntil(what, device, token, board string, cond func() bool, extra ...string) *testenv.Client {
	r.t.Helper()
	return testenv.RunSWUpdateUntil(r.t, what, device, cond, func(tmp string) *testenv.Client {
		return r.start(device, token, board, tmp, extra...)
	})
}

func TestSWUpdateInstallsAndConfirmsAfterReboot(t *testing.T) {
	r := newRig(t)
	token := r.register("sw-1", "board-a")
	img := r.buildSWU("board-a-1.1.0.swu", "1.1.0", "1.0")
	r.release("board-a", "1.1.0", img, 3)

	// The device's first poll (made here, before the client runs) creates
	// the task: pending.
	if _, ok := r.poll("sw-1", token)["deploymentBase"]; !ok {
		t.Fatal("no deploymentBase offered")
	}
	ts := r.tasks("sw-1")
	if len(ts) != 1 || ts[0].Status != "pending" {
		t.Fatalf("before the client runs: %+v, want one pending task", ts)
	}
	action := ts[0].ActionID

	// The client downloads and installs; its feedback moves the task.
	if c := r.runUntil("install", "sw-1", token, "board-a", func() bool {
		ts, _ := r.tryTasks("sw-1")
		return len(ts) == 1 && (ts[0].Status == "downloading" || ts[0].Status == "installing") && ts[0].Progress == 100
	}); c == nil {
		t.FailNow()
	}
	if ts := r.tasks("sw-1"); len(ts) != 1 || ts[0].Status == "succeeded" {
		t.Fatalf("after the install, before the reboot: %+v, want the one task still open", ts)
	}

	// Restarted "after the reboot" with -c 2, the client confirms success.
	c := r.runUntil("confirm", "sw-1", token, "board-a", func() bool {
		ts, _ := r.tryTasks("sw-1")
		return len(ts) == 1 && ts[0].Status == "succeeded"
	}, "-c", "2")
	if c == nil {
		t.FailNow()
	}
	ts = r.tasks("sw-1")
	if len(ts) != 1 || ts[0].ActionID != action || ts[0].Status != "succeeded" || ts[0].Progress != 100 {
		t.Fatalf("after the confirmation: %+v", ts)
	}
	if !strings.Contains(c.Log.String(), fmt.Sprintf("deploymentBase/%d/feedback", action)) {
		t.Fatalf("the client did not send its confirmation to deploymentBase/%d/feedback:\n%s", action, c.Log.Tail(30))
	}
	if v := r.admin(http.MethodGet, "/devices/sw-1", nil, http.StatusOK)["current_version"]; v != "1.1.0" {
		t.Fatalf("current_version %v, want 1.1.0", v)
	}
	if links := r.poll("sw-1", token); links["deploymentBase"] != nil {
		t.Fatalf("an installed image is offered again: %v", links)
	}
}

func TestSWUpdateBadImageFailsAndIsRetried(t *testing.T) {
	r := newRig(t)
	token := r.register("sw-bad", "board-b")
	// Built for hardware revision 9.9: the client (revision 1.0) refuses it.
	img := r.buildSWU("board-b-2.0.0.swu", "2.0.0", "9.9")
	r.release("board-b", "2.0.0", img, 2)

	failing := r.runUntil("fail twice", "sw-bad", token, "board-b", func() bool {
		ts, _ := r.tryTasks("sw-bad")
		return len(ts) == 2 && ts[0].Status == "failed" && ts[1].Status == "failed"
	})
	if failing == nil {
		t.FailNow()
	}
	// max_attempts reached: the image is not offered again, however long
	// the client keeps polling.
	c := r.start("sw-bad", token, "board-b", t.TempDir())
	time.Sleep(settle)
	c.Stop()
	ts := r.tasks("sw-bad")
	if len(ts) != 2 {
		t.Fatalf("%d tasks, want exactly max_attempts=2: %+v", len(ts), ts)
	}
	for i, tk := range ts {
		if tk.Status != "failed" || tk.Attempt != i+1 || tk.ErrorCode != "DDI_FAILURE" || tk.ErrorMessage == "" {
			t.Fatalf("task %d: %+v", i, tk)
		}
		// The message is the client's own reason, as it logged it.
		for _, part := range strings.Split(tk.ErrorMessage, "; ") {
			if !strings.Contains(failing.Log.String(), part) {
				t.Fatalf("task %d: %q is not in the client's log:\n%s", i, part, failing.Log.Tail(30))
			}
		}
	}
}

func TestSWUpdateAcknowledgesCancel(t *testing.T) {
	r := newRig(t)
	token := r.register("sw-c", "board-c")
	img := r.buildSWU("board-c-1.1.0.swu", "1.1.0", "1.0")
	rollout := r.release("board-c", "1.1.0", img, 3)

	r.poll("sw-c", token) // creates the pending task
	action := r.tasks("sw-c")[0].ActionID
	r.admin(http.MethodPatch, "/rollouts/"+rollout, map[string]any{"status": "cancelled"}, http.StatusOK)

	if _, ok := r.poll("sw-c", token)["cancelAction"]; !ok {
		t.Fatal("the cancelled rollout's task is not announced as cancelAction")
	}
	c := r.runUntil("acknowledge cancel", "sw-c", token, "board-c", func() bool {
		_, pending := r.poll("sw-c", token)["cancelAction"]
		return !pending
	})
	if c == nil {
		t.FailNow()
	}
	if want := fmt.Sprintf("cancelAction/%d/feedback", action); !strings.Contains(c.Log.String(), want) {
		t.Fatalf("the client never posted %s:\n%s", want, c.Log.Tail(30))
	}
	ts := r.tasks("sw-c")
	if len(ts) != 1 || ts[0].ErrorCode != "ROLLOUT_CANCELLED" {
		t.Fatalf("tasks: %+v", ts)
	}
}

func TestFiveSWUpdateClientsGetOneTaskEach(t *testing.T) {
	r := newRig(t)
	img := r.buildSWU("board-f-1.1.0.swu", "1.1.0", "1.0")
	r.release("board-f", "1.1.0", img, 3)
	devices := []string{"sw-f1", "sw-f2", "sw-f3", "sw-f4", "sw-f5"}
	tokens := map[string]string{}
	for _, d := range devices {
		tokens[d] = r.register(d, "board-f")
	}
	phase := func(what string, cond func(ts []task) bool, extra ...string) {
		var wg sync.WaitGroup
		for _, d := range devices {
			wg.Go(func() {
				r.runUntil(what, d, tokens[d], "board-f", func() bool {
					ts, err := r.tryTasks(d)
					return err == nil && cond(ts)
				}, extra...)
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	phase("install", func(ts []task) bool {
		return len(ts) == 1 && ts[0].Status != "pending" && ts[0].Progress == 100
	})
	phase("confirm", func(ts []task) bool { return len(ts) == 1 && ts[0].Status == "succeeded" }, "-c", "2")
	for _, d := range devices {
		if ts := r.tasks(d); len(ts) != 1 || ts[0].Status != "succeeded" {
			t.Errorf("%s: %+v, want exactly one succeeded task", d, ts)
		}
	}
}

// The README's configuration-file setup: a device registered without a
// version reports it through configData (the identify section), and is
// then offered the update.
func TestSWUpdateReportsItsVersionThroughConfigData(t *testing.T) {
	r := newRig(t)
	token := r.admin(http.MethodPost, "/devices", map[string]any{"device_id": "sw-cfg", "model": "board-d"},
		http.StatusCreated)["token"].(string)
	img := r.buildSWU("board-d-1.1.0.swu", "1.1.0", "1.0")
	r.release("board-d", "1.1.0", img, 3)
	if links := r.poll("sw-cfg", token); links["deploymentBase"] != nil || links["configData"] == nil {
		t.Fatalf("a device of unknown version must be asked for configData only: %v", links)
	}
	cfg := filepath.Join(r.dir, "swupdate.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`globals :
{
	verbose = true;
};
suricatta :
{
	tenant      = "DEFAULT";
	id          = "sw-cfg";
	url         = "%s";
	targettoken = "%s";
};
identify : (
	{ name = "sw_version"; value = "1.0.0"; },
	{ name = "hw_rev"; value = "1.0"; }
);
`, r.otad.URL, token)), 0o600); err != nil {
		t.Fatal(err)
	}
	c := testenv.RunSWUpdateUntil(t, "configData then install", "sw-cfg", func() bool {
		ts, _ := r.tryTasks("sw-cfg")
		return len(ts) == 1 && ts[0].Status != "pending" && ts[0].Progress == 100
	}, func(tmp string) *testenv.Client {
		return testenv.StartClient(t, []string{"TMPDIR=" + tmp}, r.swupdate, "-v", "-n", "-H", "board-d:1.0", "-k", r.signer.Cert, "-f", cfg, "-u", "")
	})
	if c == nil {
		t.FailNow()
	}
	if v := r.admin(http.MethodGet, "/devices/sw-cfg", nil, http.StatusOK)["current_version"]; v != "1.0.0" {
		t.Fatalf("current_version %v, want the 1.0.0 reported in configData", v)
	}
	if links := r.poll("sw-cfg", token); links["configData"] != nil {
		t.Fatalf("configData still asked for after the device reported it: %v", links)
	}
}
