package testenv

// The real-client rigs of tests/ddi (SWUpdate alone) and tests/mender
// (SWUpdate beside mender-client) share what is here: the tool check, a CMS
// signing certificate, signed .swu images, client processes in their own
// process group, and the bounded run-until-it-gets-there loop that restarts
// a hung client.

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// StartClientOtad starts otad for a real-client rig: on a database and Redis
// of its own when OTA_TEST_DATABASE_URL and OTA_TEST_REDIS_URL are set
// (returning the database), else with OTA_STORE=memory (returning nil), so
// that the clients are exercised even on a machine without the services.
func StartClientOtad(t testing.TB, cfg OtadConfig) (*Otad, *sqlx.DB) {
	t.Helper()
	var db *sqlx.DB
	if os.Getenv("OTA_TEST_DATABASE_URL") != "" && os.Getenv("OTA_TEST_REDIS_URL") != "" {
		db, cfg.DatabaseURL = PostgresDB(t)
		cfg.RedisURL = RedisURL(t)
	} else {
		t.Log("no OTA_TEST_DATABASE_URL/OTA_TEST_REDIS_URL: running otad with OTA_STORE=memory")
		cfg.DatabaseURL, cfg.RedisURL = "postgres://unused@127.0.0.1:1/x", "redis://127.0.0.1:1/0"
		if cfg.Env == nil {
			cfg.Env = map[string]string{}
		}
		cfg.Env["OTA_STORE"] = "memory"
	}
	return StartOtad(t, cfg), db
}

// Bounds of every wait on a SWUpdate client.
const (
	// SWUpdateWait is how long one client run may take to reach what the
	// test waits for before it is taken for hung.
	SWUpdateWait = 45 * time.Second
	// SWUpdateTries is how many times a hung client is restarted: the
	// 2022.12 client sometimes hangs mid-install when several run at once.
	SWUpdateTries = 3
)

// RequireSWUpdate returns the swupdate binary, skipping loudly (failing
// under OTA_TEST_REQUIRE_SERVICES=1) when it or openssl is missing, which
// who (the tests' name) needs. A swupdate built without suricatta fails the
// test: it cannot talk to a hawkBit server at all.
func RequireSWUpdate(t testing.TB, who string) string {
	t.Helper()
	bin, err := exec.LookPath("swupdate")
	if err == nil {
		if _, err = exec.LookPath("openssl"); err != nil {
			bin = ""
		}
	}
	if bin == "" {
		msg := "\n" + strings.Repeat("!", 78) + "\n" +
			"!! SKIPPING " + who + ": swupdate (or openssl) is not installed.\n" +
			"!! Install it with: apt-get update && apt-get install -y swupdate openssl\n" +
			strings.Repeat("!", 78)
		Skip(t, "swupdate and openssl", msg)
	}
	out, _ := exec.Command(bin, "-h").CombinedOutput()
	if !bytes.Contains(out, []byte("suricatta")) {
		t.Fatalf("%s was built without suricatta (hawkBit) support:\n%s", bin, out)
	}
	return bin
}

// SWUSigner is a self-signed certificate for signing .swu images; SWUpdate
// checks them against it (swupdate -k Cert).
type SWUSigner struct {
	Cert, Key string // PEM files
	dir       string
}

// NewSWUSigner makes a signing certificate named cn in dir.
func NewSWUSigner(t testing.TB, dir, cn string) SWUSigner {
	t.Helper()
	s := SWUSigner{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem"), dir: dir}
	runTool(t, "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", s.Key, "-out", s.Cert,
		"-days", "2", "-subj", "/CN="+cn,
		"-addext", "extendedKeyUsage=emailProtection", "-addext", "keyUsage=digitalSignature")
	return s
}

// SWU is a written .swu image with the digests a DDI agent checks.
type SWU struct {
	Size              int64
	SHA256, SHA1, MD5 string
}

// WriteSWU writes to path a signed .swu (cpio newc: sw-description, then its
// CMS signature, then a random payload for the dummy handler) of version
// that installs on hardware revision hwRev.
func (s SWUSigner) WriteSWU(t testing.TB, path, version, hwRev string) SWU {
	t.Helper()
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
	work, err := os.MkdirTemp(s.dir, "build-swu-")
	if err != nil {
		t.Fatal(err)
	}
	descPath, sigPath := filepath.Join(work, "sw-description"), filepath.Join(work, "sw-description.sig")
	if err := os.WriteFile(descPath, []byte(desc), 0o644); err != nil {
		t.Fatal(err)
	}
	runTool(t, "openssl", "cms", "-sign", "-in", descPath, "-out", sigPath, "-signer", s.Cert, "-inkey", s.Key,
		"-outform", "DER", "-nosmimecap", "-binary")
	sig, err := os.ReadFile(sigPath)
	if err != nil {
		t.Fatal(err)
	}
	var swu bytes.Buffer
	for _, f := range []struct {
		name string
		data []byte
	}{{"sw-description", []byte(desc)}, {"sw-description.sig", sig}, {"payload.bin", payload}} {
		writeNewc(&swu, f.name, f.data)
	}
	writeNewc(&swu, "TRAILER!!!", nil)
	if err := os.WriteFile(path, swu.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	s256, s1, m5 := sha256.Sum256(swu.Bytes()), sha1.Sum(swu.Bytes()), md5.Sum(swu.Bytes())
	return SWU{Size: int64(swu.Len()), SHA256: hex.EncodeToString(s256[:]),
		SHA1: hex.EncodeToString(s1[:]), MD5: hex.EncodeToString(m5[:])}
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

func runTool(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// Client is a real device client (swupdate, mender) running in its own
// process group, so that it and its children are stopped together.
type Client struct {
	cmd  *exec.Cmd
	Log  *LogBuffer // its output
	done chan struct{}
}

// StartClient runs name with args in a process group of its own, with env
// added to the test's environment; the test's cleanup stops it.
func StartClient(t testing.TB, env []string, name string, args ...string) *Client {
	t.Helper()
	c := &Client{Log: &LogBuffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(name, args...)
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = c.Log, c.Log
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(c.Stop)
	return c
}

// Signal sends sig to the client process itself.
func (c *Client) Signal(sig os.Signal) { _ = c.cmd.Process.Signal(sig) }

// Stop ends the client's process group: SIGTERM, then (after 5s) SIGKILL.
func (c *Client) Stop() {
	select {
	case <-c.done:
		return
	default:
	}
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
	}
}

// StartSWUpdate runs swupdate bin as device of otad at url with its token,
// on hardware board revision 1.0, trusting cert. Each device gets its own
// TMPDIR tmp (instances share IPC sockets otherwise); extra is appended to
// the suricatta arguments.
func StartSWUpdate(t testing.TB, bin, tmp, url, device, token, board, cert string, extra ...string) *Client {
	t.Helper()
	suricatta := fmt.Sprintf("-t DEFAULT -u %s -i %s -k %s", url, device, token)
	if len(extra) > 0 {
		suricatta += " " + strings.Join(extra, " ")
	}
	return StartClient(t, []string{"TMPDIR=" + tmp}, bin, "-v", "-n", "-H", board+":1.0", "-k", cert, "-u", suricatta)
}

// RunSWUpdateUntil runs a client (start, given a TMPDIR of its own) until
// cond holds (checked every 100ms), then stops it. A client that does not
// get there within SWUpdateWait is taken for hung and restarted, up to
// SWUpdateTries times. It returns nil, having marked the test failed, when
// every try hung; it may run on a goroutine of its own.
func RunSWUpdateUntil(t testing.TB, what, device string, cond func() bool, start func(tmp string) *Client) *Client {
	t.Helper()
	tmp := t.TempDir()
	for try := 1; try <= SWUpdateTries; try++ {
		c := start(tmp)
		for deadline := time.Now().Add(SWUpdateWait); time.Now().Before(deadline); {
			if cond() {
				c.Stop()
				return c
			}
			time.Sleep(100 * time.Millisecond)
		}
		c.Stop()
		t.Logf("%s: swupdate for %s did not get there in %v (try %d of %d); restarting it. Log tail:\n%s",
			what, device, SWUpdateWait, try, SWUpdateTries, c.Log.Tail(15))
	}
	t.Errorf("%s: swupdate for %s never got there in %d tries", what, device, SWUpdateTries)
	return nil
}
