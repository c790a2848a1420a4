// Package mender_test drives the service with the real Mender client
// (Debian's mender-client 3.4 and mender-artifact): module-image artifacts
// for an update module of the test's own that writes into a temporary
// directory, served from a local file server, otad built and started as a
// process, mender daemons as devices — each in its own mount namespace
// (unshare), with bind mounts over /usr/share/mender (identity and
// inventory scripts, update modules) and /etc/mender (artifact_info), so
// that the host is left untouched. It is skipped, loudly, only when the
// packages are not installed (apt-get install -y mender-client
// mender-artifact); with OTA_TEST_REQUIRE_SERVICES=1 a missing package fails
// instead.
package mender_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/tests/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunWithOtad(m)) }

const (
	adminToken = "mender-e2e-admin-token-0123456789"
	model      = "cam-x1"
	moduleType = "ota-test"
)

// Bounds of every wait on a client.
const (
	clientWait = 60 * time.Second // a client reaching what the test waits for
	idleWait   = 20 * time.Second // a client going back to idle before it is stopped
)

// tools are the binaries the rig runs.
type tools struct{ mender, artifact, unshare string }

// requireTools returns the binaries, skipping loudly when one is missing.
func requireTools(t *testing.T) tools {
	t.Helper()
	var tl tools
	var missing []string
	for _, x := range []struct {
		name string
		to   *string
	}{{"mender", &tl.mender}, {"mender-artifact", &tl.artifact}, {"unshare", &tl.unshare}} {
		p, err := exec.LookPath(x.name)
		if err != nil {
			missing = append(missing, x.name)
		}
		*x.to = p
	}
	if len(missing) > 0 {
		msg := "\n" + strings.Repeat("!", 78) + "\n" +
			"!! SKIPPING the real-client Mender tests: " + strings.Join(missing, ", ") + " not installed.\n" +
			"!! Install them with: apt-get update && apt-get install -y mender-client mender-artifact\n" +
			strings.Repeat("!", 78)
		testenv.Skip(t, "mender-client and mender-artifact", msg)
	}
	if out, err := exec.Command(tl.unshare, "-m", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Fatalf("the Mender tests run each client in its own mount namespace, and unshare -m fails here (root and CAP_SYS_ADMIN are needed): %v\n%s", err, out)
	}
	return tl
}

// rig is one otad and one file server.
type rig struct {
	t     *testing.T
	tools tools
	dir   string
	files *httptest.Server
	otad  *testenv.Otad
	db    *sqlx.DB // nil when otad runs with OTA_STORE=memory
}

func newRig(t *testing.T) *rig {
	tl := requireTools(t)
	r := &rig{t: t, tools: tl, dir: t.TempDir()}
	www := filepath.Join(r.dir, "www")
	if err := os.MkdirAll(www, 0o755); err != nil {
		t.Fatal(err)
	}
	// Mender clients (Go's HTTP client, which mender-client 3.4 does not
	// rename) fetch NAME.mender, anything else NAME as is: one firmware URL
	// serves both agent families of a mixed fleet. The file
	// server answers Range requests and sends Content-Length, as the
	// Mender client needs.
	fs := http.FileServer(http.Dir(www))
	r.files = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.UserAgent(), "Go-http-client") && !strings.HasSuffix(req.URL.Path, ".mender") {
			req.URL.Path += ".mender"
		}
		fs.ServeHTTP(w, req)
	}))
	t.Cleanup(r.files.Close)

	r.otad, r.db = testenv.StartClientOtad(t, testenv.OtadConfig{Name: "mender", AdminToken: adminToken, Env: map[string]string{
		"OTA_POLL_INTERVAL": "1s", "OTA_DEVICE_RATE_LIMIT": "0",
		"OTA_MENDER_ACCEPT_PENDING": "true", "OTA_MENDER_TOKEN_SECRET": strings.Repeat("k", 40),
	}})
	return r
}

func (r *rig) run(name string, args ...string) {
	r.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		r.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// image is a published artifact.
type image struct {
	url    string
	size   int64
	sha256 string
}

// buildArtifact writes a module-image artifact for the test's update
// module, named name, carrying a random payload (and a file named "fail",
// which makes the module fail, when fail is set), and serves it as
// name.mender.
func (r *rig) buildArtifact(name string, fail bool) image {
	r.t.Helper()
	work := filepath.Join(r.dir, "build-"+name)
	if err := os.MkdirAll(work, 0o755); err != nil {
		r.t.Fatal(err)
	}
	payload := make([]byte, 16<<10) // artifacts under 4 KiB are refused by the client
	_, _ = rand.Read(payload)
	files := []string{filepath.Join(work, "payload.bin")}
	if err := os.WriteFile(files[0], payload, 0o644); err != nil {
		r.t.Fatal(err)
	}
	if fail {
		files = append(files, filepath.Join(work, "fail"))
		if err := os.WriteFile(files[1], []byte("fail\n"), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	out := filepath.Join(r.dir, "www", name+".mender")
	args := []string{"write", "module-image", "-T", moduleType, "-n", name, "-t", model, "-o", out}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	r.run(r.tools.artifact, args...)
	raw, err := os.ReadFile(out)
	if err != nil {
		r.t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	return image{url: r.files.URL + "/" + name + ".mender", size: int64(len(raw)), sha256: hex.EncodeToString(sum[:])}
}

// api calls otad with a JSON body and decodes a JSON answer.
func (r *rig) api(method, path, auth string, body any, want int) map[string]any {
	r.t.Helper()
	m, status, raw, err := r.tryAPI(method, path, auth, body)
	if err != nil {
		r.t.Fatal(err)
	}
	if status != want {
		r.t.Fatalf("%s %s: %d %s, want %d", method, path, status, raw, want)
	}
	return m
}

func (r *rig) tryAPI(method, path, auth string, body any) (map[string]any, int, []byte, error) {
	return testenv.CallJSON(method, r.otad.URL+path, auth, body)
}

func (r *rig) admin(method, path string, body any, want int) map[string]any {
	r.t.Helper()
	return r.api(method, "/api/v1/admin"+path, "Bearer "+adminToken, body, want)
}

// release publishes img as version under artifact name (with the DDI
// digests of swu when given) and rolls it out to every device.
func (r *rig) release(version, artifactName string, img image, maxAttempts int, extra map[string]any) string {
	r.t.Helper()
	body := map[string]any{
		"model": model, "version": version, "url": img.url, "size_bytes": img.size,
		"sha256": img.sha256, "artifact_name": artifactName,
	}
	for k, v := range extra {
		body[k] = v
	}
	fw := r.admin(http.MethodPost, "/firmwares", body, http.StatusCreated)
	return r.admin(http.MethodPost, "/rollouts", map[string]any{"firmware_id": fw["id"], "percentage": 100, "max_attempts": maxAttempts},
		http.StatusCreated)["id"].(string)
}

type task struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	Progress  int    `json:"progress"`
	Attempt   int    `json:"attempt"`
	ErrorCode string `json:"error_code"`
}

// tryTasks lists the device's tasks without failing the test.
func (r *rig) tryTasks(device string) ([]task, error) {
	return testenv.ListTasks[task](r.otad.URL, adminToken, device)
}

func (r *rig) tasks(device string) []task {
	r.t.Helper()
	ts, err := r.tryTasks(device)
	if err != nil {
		r.t.Fatal(err)
	}
	return ts
}

// oneTask reports whether the device has exactly one task, in status.
func (r *rig) oneTask(device string, status ...string) bool {
	ts, err := r.tryTasks(device)
	if err != nil || len(ts) != 1 {
		return false
	}
	for _, s := range status {
		if ts[0].Status == s {
			return true
		}
	}
	return false
}

// waitFor polls cond every 200ms for at most d; on timeout it fails the
// test, showing what explain returns.
func (r *rig) waitFor(what string, d time.Duration, cond func() bool, explain func() string) {
	r.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.t.Fatalf("%s: not reached within %v\n%s", what, d, explain())
}

// accessCount counts otad's access log lines of route answered with status.
func (r *rig) accessCount(method, route string, status int) int {
	re := regexp.MustCompile(`"method":"` + method + `","route":"` + regexp.QuoteMeta(route) + `","status":` + fmt.Sprint(status) + `\b`)
	return len(re.FindAllStringIndex(r.otad.Log(), -1))
}

const (
	routeNext   = "/api/devices/v2/deployments/device/deployments/next"
	routeStatus = "/api/devices/v1/deployments/device/deployments/:id/status"
	routeLog    = "/api/devices/v1/deployments/device/deployments/:id/log"
)

// inventoryAttr reads one stored attribute of the device ("" when otad
// runs in memory: the admin API does not show attributes).
func (r *rig) inventoryAttr(device, name string) (string, bool) {
	if r.db == nil {
		return "", false
	}
	var v *string
	if err := r.db.Get(&v, `SELECT attributes->>$2 FROM device_attributes WHERE device_id = $1`, device, name); err != nil || v == nil {
		return "", true
	}
	return *v, true
}

// device is one mender-client's world: its own /usr/share/mender and
// /etc/mender (bind-mounted in its namespace), data directory, key,
// and the directory its update module installs into.
type device struct {
	id      string
	root    string
	pubPEM  string
	target  string // where the module installs the payload
	hold    string // while this file exists, the module's Download waits
	modLog  string // the module's record of the states it ran
	confArg string
	dataDir string
}

// newDevice prepares a device running artifact installed, with a key
// pair of kind (rsa: RSA-3072 as mender-client makes, ecdsa, ed25519).
func (r *rig) newDevice(id, installed, kind string) *device {
	r.t.Helper()
	root := filepath.Join(r.dir, "dev-"+id)
	d := &device{id: id, root: root, target: filepath.Join(root, "target"), hold: filepath.Join(root, "HOLD"),
		modLog: filepath.Join(root, "module.log"), confArg: filepath.Join(root, "mender.conf"), dataDir: filepath.Join(root, "data")}
	for _, sub := range []string{"share/identity", "share/inventory", "share/modules/v3", "etc", "data", "target"} {
		if err := os.MkdirAll(filepath.Join(root, sub), 0o755); err != nil {
			r.t.Fatal(err)
		}
	}
	write := func(rel, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(root, rel), []byte(content), mode); err != nil {
			r.t.Fatal(err)
		}
	}
	write("share/identity/mender-device-identity", "#!/bin/sh\necho device_id="+id+"\necho mac=02:00:00:00:00:01\n", 0o755)
	write("share/inventory/mender-inventory-test", "#!/bin/sh\necho hostname="+id+"\necho test_rig=mender-e2e\n", 0o755)
	write("share/modules/v3/"+moduleType, fmt.Sprintf(`#!/bin/sh
# The test's update module: installs the payload into %[1]s.
STATE="$1"
FILES="$2"
echo "$STATE" >> %[2]s
case "$STATE" in
  Download)
    n=0
    while [ -e %[3]s ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done
    ;;
  ArtifactInstall)
    if [ -e "$FILES/files/fail" ]; then
      echo "ota-test module: the payload asks to fail" >&2
      exit 1
    fi
    cp "$FILES"/files/* %[1]s/
    ;;
  NeedsArtifactReboot) echo No ;;
  SupportsRollback) echo No ;;
esac
exit 0
`, d.target, d.modLog, d.hold), 0o755)
	write("etc/artifact_info", "artifact_name="+installed+"\n", 0o644)
	write("data/device_type", "device_type="+model+"\n", 0o644)
	conf, _ := json.Marshal(map[string]any{
		"ServerURL": r.otad.URL, "UpdatePollIntervalSeconds": 5, "InventoryPollIntervalSeconds": 5,
		"RetryPollIntervalSeconds": 2, "DBus": map[string]any{"Enabled": false},
	})
	write("mender.conf", string(conf), 0o644)
	priv, pub := newKey(r.t, kind)
	write("data/mender-agent.pem", priv, 0o600)
	d.pubPEM = pub
	return d
}

// newKey makes a private key as mender-client stores it, and its public
// key in PEM.
func newKey(t *testing.T, kind string) (string, string) {
	t.Helper()
	var (
		block *pem.Block
		pub   any
	)
	switch kind {
	case "rsa":
		k, err := rsa.GenerateKey(rand.Reader, 3072)
		if err != nil {
			t.Fatal(err)
		}
		block, pub = &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}, &k.PublicKey
	case "ecdsa":
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, _ := x509.MarshalECPrivateKey(k)
		block, pub = &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}, &k.PublicKey
	case "ed25519":
		p, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, _ := x509.MarshalPKCS8PrivateKey(k)
		block, pub = &pem.Block{Type: "PRIVATE KEY", Bytes: der}, p
	default:
		t.Fatalf("key kind %q", kind)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(block)), string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// register preauthorizes the device with its public key.
func (r *rig) register(d *device) {
	r.t.Helper()
	r.admin(http.MethodPost, "/devices", map[string]any{"device_id": d.id, "model": model, "public_key": d.pubPEM}, http.StatusCreated)
}

// moduleStates returns the states the device's update module ran.
func (d *device) moduleStates() string {
	b, _ := os.ReadFile(d.modLog)
	return strings.Join(strings.Fields(string(b)), " ")
}

// installed reports whether the module installed a payload.
func (d *device) installed() bool {
	_, err := os.Stat(filepath.Join(d.target, "payload.bin"))
	return err == nil
}

// client is one mender daemon in its own mount namespace.
type client struct {
	*testenv.Client
	d *device
}

// start runs the device's mender daemon: unshare gives it a private mount
// namespace in which its own directories are bound over /usr/share/mender
// and /etc/mender; the shell then execs mender, so the process is the
// daemon itself (kick reaches it).
func (r *rig) start(d *device) *client {
	r.t.Helper()
	script := fmt.Sprintf("mount --bind %s /usr/share/mender && mount --bind %s /etc/mender && "+
		"exec %s --no-syslog --config %s --fallback-config %s --data %s daemon",
		filepath.Join(d.root, "share"), filepath.Join(d.root, "etc"), r.tools.mender,
		d.confArg, filepath.Join(d.root, "absent.conf"), d.dataDir)
	c := &client{Client: testenv.StartClient(r.t, nil, r.tools.unshare, "-m", "--propagation", "private", "sh", "-c", script), d: d}
	r.t.Cleanup(func() {
		c.Stop()
		if r.t.Failed() {
			r.t.Logf("mender %s log tail:\n%s\nmodule states: %s", d.id, c.Log.Tail(25), d.moduleStates())
		}
	})
	return c
}

// kick makes the daemon poll now (SIGUSR1).
func (c *client) kick() { c.Signal(syscall.SIGUSR1) }

// idle reports whether the daemon's last state transition was into
// waiting: it is not in the middle of an update.
func (c *client) idle() bool {
	lines := strings.Split(c.Log.String(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "State transition:") {
			return strings.Contains(lines[i], "-> check-wait") || strings.Contains(lines[i], "-> idle") ||
				strings.Contains(lines[i], "-> authorize-wait")
		}
	}
	return false
}

// stopWhenIdle waits (bounded) for the daemon to be idle, then stops it: a
// client killed mid-update reports failure on its next start.
func (r *rig) stopWhenIdle(c *client) {
	r.t.Helper()
	deadline := time.Now().Add(idleWait)
	for !c.idle() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !c.idle() {
		r.t.Errorf("mender %s was not idle within %v", c.d.id, idleWait)
	}
	c.Stop()
}

func osWriteFile(p string, b []byte) error { return os.WriteFile(p, b, 0o644) }

func removeFile(p string) error { return os.Remove(p) }
