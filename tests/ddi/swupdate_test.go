// Package ddi_test drives the service with the real hawkBit client SWUpdate
// (suricatta, Debian's 2022.12 package): signed .swu images served from a
// local file server, otad built and started as a process, swupdate
// processes as devices. It is skipped, loudly, only when the swupdate
// binary is not installed (apt-get install -y swupdate); with
// OTA_TEST_REQUIRE_SERVICES=1 a missing binary fails instead.
package ddi_test

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ai-device/ota/tests/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunWithOtad(m)) }

const adminToken = "ddi-e2e-admin-token-0123456789"

// Bounds of every wait on a client.
const (
	clientWait  = 45 * time.Second // one client run reaching what the test waits for
	clientTries = 3                // a hung client is restarted this many times
	settle      = 3 * time.Second  // how long "nothing more happens" is watched
)

// requireTools returns the swupdate binary, skipping loudly when it (or
// openssl) is missing.
func requireTools(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("swupdate")
	if err == nil {
		if _, err = exec.LookPath("openssl"); err != nil {
			bin = ""
		}
	}
	if bin == "" {
		msg := "\n" + strings.Repeat("!", 78) + "\n" +
			"!! SKIPPING the real-client DDI tests: swupdate (or openssl) is not installed.\n" +
			"!! Install it with: apt-get update && apt-get install -y swupdate openssl\n" +
			strings.Repeat("!", 78)
		testenv.Skip(t, "swupdate and openssl", msg)
	}
	out, _ := exec.Command(bin, "-h").CombinedOutput()
	if !bytes.Contains(out, []byte("suricatta")) {
		t.Fatalf("%s was built without suricatta (hawkBit) support:\n%s", bin, out)
	}
	return bin
}

// rig is one otad, one file server, one signing certificate.
type rig struct {
	t        *testing.T
	swupdate string
	dir      string
	cert     string
	key      string
	files    *httptest.Server
	otad     *testenv.Otad
}

func newRig(t *testing.T) *rig {
	bin := requireTools(t)
	r := &rig{t: t, swupdate: bin, dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(r.dir, "www"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.cert, r.key = filepath.Join(r.dir, "cert.pem"), filepath.Join(r.dir, "key.pem")
	r.run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", r.key, "-out", r.cert,
		"-days", "2", "-subj", "/CN=ota-ddi-test-signer",
		"-addext", "extendedKeyUsage=emailProtection", "-addext", "keyUsage=digitalSignature")
	r.files = httptest.NewServer(http.FileServer(http.Dir(filepath.Join(r.dir, "www"))))
	t.Cleanup(r.files.Close)

	cfg := testenv.OtadConfig{Name: "ddi", AdminToken: adminToken, Env: map[string]string{
		"OTA_POLL_INTERVAL": "1s", "OTA_DEVICE_RATE_LIMIT": "0",
	}}
	if os.Getenv("OTA_TEST_DATABASE_URL") != "" && os.Getenv("OTA_TEST_REDIS_URL") != "" {
		_, cfg.DatabaseURL = testenv.PostgresDB(t)
		cfg.RedisURL = testenv.RedisURL(t)
	} else {
		t.Log("no OTA_TEST_DATABASE_URL/OTA_TEST_REDIS_URL: running otad with OTA_STORE=memory")
		cfg.DatabaseURL, cfg.RedisURL = "postgres://unused@127.0.0.1:1/x", "redis://127.0.0.1:1/0"
		cfg.Env["OTA_STORE"] = "memory"
	}
	r.otad = testenv.StartOtad(t, cfg)
	return r
}

func (r *rig) run(name string, args ...string) {
	r.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		r.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// image is a published .swu.
type image struct {
	url                  string
	size                 int64
	sha256, sha1, md5sum string
}

// buildSWU writes a signed .swu (cpio newc: sw-description, then its CMS
// signature, then the payload for the dummy handler) that installs on
// hardware revision hwRev, and serves it.
func (r *rig) buildSWU(name, version, hwRev string) image {
	r.t.Helper()
	payload := make([]byte, 8192)
	_, _ = rand.Read(payload)
	sum := sha256.Sum256(payload)
	desc := fmt.Sprintf(`software =
{
	version = "%s";
	hardware-compatibility: [ "%s" ];
	images: (
		{
			filename = "payload.bin";
			type = "dummy";
			sha256 = "%s";
		}
	);
}
`, version, hwRev, hex.EncodeToString(sum[:]))
	work := filepath.Join(r.dir, "build-"+name)
	if err := os.MkdirAll(work, 0o755); err != nil {
		r.t.Fatal(err)
	}
	descPath, sigPath := filepath.Join(work, "sw-description"), filepath.Join(work, "sw-description.sig")
	if err := os.WriteFile(descPath, []byte(desc), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.run("openssl", "cms", "-sign", "-in", descPath, "-out", sigPath, "-signer", r.cert, "-inkey", r.key,
		"-outform", "DER", "-nosmimecap", "-binary")
	sig, err := os.ReadFile(sigPath)
	if err != nil {
		r.t.Fatal(err)
	}
	var swu bytes.Buffer
	for _, f := range []struct {
		name string
		data []byte
	}{{"sw-description", []byte(desc)}, {"sw-description.sig", sig}, {"payload.bin", payload}} {
		writeNewc(&swu, f.name, f.data)
	}
	writeNewc(&swu, "TRAILER!!!", nil)
	if err := os.WriteFile(filepath.Join(r.dir, "www", name), swu.Bytes(), 0o644); err != nil {
		r.t.Fatal(err)
	}
	s256, s1, m5 := sha256.Sum256(swu.Bytes()), sha1.Sum(swu.Bytes()), md5.Sum(swu.Bytes())
	return image{url: r.files.URL + "/" + name, size: int64(swu.Len()),
		sha256: hex.EncodeToString(s256[:]), sha1: hex.EncodeToString(s1[:]), md5sum: hex.EncodeToString(m5[:])}
}

// writeNewc appends one cpio "newc" entry: a 110-byte ASCII header, the
// NUL-terminated name padded to 4 bytes, the data padded to 4 bytes.
func writeNewc(w *bytes.Buffer, name string, data []byte) {
	mode := 0o100644
	if data == nil {
		mode = 0
	}
	fmt.Fprintf(w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		0, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	w.WriteString(name)
	w.WriteByte(0)
	for w.Len()%4 != 0 {
		w.WriteByte(0)
	}
	w.Write(data)
	for w.Len()%4 != 0 {
		w.WriteByte(0)
	}
}

// api calls otad with a JSON body and decodes a JSON answer.
func (r *rig) api(method, path, auth string, body any, want int) map[string]any {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, r.otad.URL+path, rd)
	req.Header.Set("Authorization", auth)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		r.t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, raw, want)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
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
	req, _ := http.NewRequest(http.MethodGet, r.otad.URL+"/api/v1/admin/tasks?device_id="+device, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var page struct {
		Items []task `json:"items"`
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("listing tasks of %s: %s", device, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(&page); err != nil {
		return nil, err
	}
	return page.Items, nil
}

// poll is a DDI poll made by the test itself, as the device would; it
// returns the names of the links offered.
func (r *rig) poll(device, token string) map[string]any {
	r.t.Helper()
	return r.api(http.MethodGet, "/DEFAULT/controller/v1/"+device, "TargetToken "+token, nil, http.StatusOK)["_links"].(map[string]any)
}

// client is one swupdate process (and its children, in its own process
// group so that they are stopped together).
type client struct {
	cmd  *exec.Cmd
	log  *testenv.LogBuffer
	done chan struct{}
}

// start runs swupdate as device, with its own TMPDIR (instances share IPC
// sockets otherwise). extra is appended to the suricatta arguments.
func (r *rig) start(device, token, board, tmp string, extra ...string) *client {
	r.t.Helper()
	suricatta := fmt.Sprintf("-t DEFAULT -u %s -i %s -k %s", r.otad.URL, device, token)
	if len(extra) > 0 {
		suricatta += " " + strings.Join(extra, " ")
	}
	return r.launch(tmp, "-v", "-n", "-H", board+":1.0", "-k", r.cert, "-u", suricatta)
}

// launch runs swupdate with args in its own process group and TMPDIR.
func (r *rig) launch(tmp string, args ...string) *client {
	r.t.Helper()
	c := &client{log: &testenv.LogBuffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(r.swupdate, args...)
	c.cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	r.t.Cleanup(c.stop)
	return c
}

// stop ends the client's process group: SIGTERM, then SIGKILL.
func (c *client) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(3 * time.Second):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// runUntil runs a client until cond holds (checked every 100ms), then
// stops it. A client that does not get there within clientWait is taken
// for hung — the 2022.12 client sometimes hangs mid-install when several
// run at once — and is restarted, up to clientTries times. It returns nil,
// having marked the test failed, when every try hung; it may run on a
// goroutine of its own.
func (r *rig) runUntil(what, device, token, board string, cond func() bool, extra ...string) *client {
	r.t.Helper()
	return r.retry(what, device, cond, func(tmp string) *client { return r.start(device, token, board, tmp, extra...) })
}

// retry is runUntil for any way of starting the client.
func (r *rig) retry(what, device string, cond func() bool, start func(tmp string) *client) *client {
	r.t.Helper()
	tmp := r.t.TempDir()
	var c *client
	for try := 1; try <= clientTries; try++ {
		c = start(tmp)
		deadline := time.Now().Add(clientWait)
		for time.Now().Before(deadline) {
			if cond() {
				c.stop()
				return c
			}
			time.Sleep(100 * time.Millisecond)
		}
		c.stop()
		r.t.Logf("%s: swupdate for %s did not get there in %v (try %d of %d); restarting it. Log tail:\n%s",
			what, device, clientWait, try, clientTries, tail(c.log.String(), 15))
	}
	r.t.Errorf("%s: swupdate for %s never got there in %d tries", what, device, clientTries)
	return nil
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
	if !strings.Contains(c.log.String(), fmt.Sprintf("deploymentBase/%d/feedback", action)) {
		t.Fatalf("the client did not send its confirmation to deploymentBase/%d/feedback:\n%s", action, tail(c.log.String(), 30))
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
	c.stop()
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
			if !strings.Contains(failing.log.String(), part) {
				t.Fatalf("task %d: %q is not in the client's log:\n%s", i, part, tail(failing.log.String(), 30))
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
	if want := fmt.Sprintf("cancelAction/%d/feedback", action); !strings.Contains(c.log.String(), want) {
		t.Fatalf("the client never posted %s:\n%s", want, tail(c.log.String(), 30))
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
	c := r.retry("configData then install", "sw-cfg", func() bool {
		ts, _ := r.tryTasks("sw-cfg")
		return len(ts) == 1 && ts[0].Status != "pending" && ts[0].Progress == 100
	}, func(tmp string) *client {
		return r.launch(tmp, "-v", "-n", "-H", "board-d:1.0", "-k", r.cert, "-f", cfg, "-u", "")
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
