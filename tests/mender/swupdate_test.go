package mender_test

// SWUpdate (hawkBit DDI) devices beside mender-client ones; the helpers
// are copied from tests/ddi, which owns the SWUpdate rig.

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ai-device/ota/tests/testenv"
)

// swuImage is a published .swu with the digests DDI agents check.
type swuImage struct {
	image
	sha1, md5sum string
}

// buildSWU writes a signed .swu for hardware revision 1.0 carrying a dummy
// payload, serves it as name, and returns it with the signing certificate.
func (r *rig) buildSWU(name, version string) (swuImage, string) {
	r.t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		testenv.Skip(r.t, "openssl", "openssl is not installed")
	}
	cert, key := filepath.Join(r.dir, "cert.pem"), filepath.Join(r.dir, "key.pem")
	r.run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
		"-days", "2", "-subj", "/CN=ota-mender-test-signer",
		"-addext", "extendedKeyUsage=emailProtection", "-addext", "keyUsage=digitalSignature")
	payload := make([]byte, 8192)
	_, _ = rand.Read(payload)
	sum := sha256.Sum256(payload)
	desc := fmt.Sprintf(`software =
{
	version = "%s";
	hardware-compatibility: [ "1.0" ];
	images: (
		{
			filename = "payload.bin";
			type = "dummy";
			sha256 = "%s";
		}
	);
}
`, version, hex.EncodeToString(sum[:]))
	work := filepath.Join(r.dir, "build-swu")
	if err := os.MkdirAll(work, 0o755); err != nil {
		r.t.Fatal(err)
	}
	descPath, sigPath := filepath.Join(work, "sw-description"), filepath.Join(work, "sw-description.sig")
	if err := os.WriteFile(descPath, []byte(desc), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.run("openssl", "cms", "-sign", "-in", descPath, "-out", sigPath, "-signer", cert, "-inkey", key,
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
	return swuImage{image: image{url: r.files.URL + "/" + name, size: int64(swu.Len()), sha256: hex.EncodeToString(s256[:])},
		sha1: hex.EncodeToString(s1[:]), md5sum: hex.EncodeToString(m5[:])}, cert
}

// writeNewc appends one cpio "newc" entry.
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

// swupdate runs one SWUpdate (suricatta) client in its own process group
// and TMPDIR until cond holds, restarting a hung one up to three times
// (the 2022.12 client sometimes hangs mid-install when several run).
func (r *rig) swupdate(bin, cert, device, token string, cond func() bool) bool {
	r.t.Helper()
	tmp := r.t.TempDir()
	for try := 1; try <= 3; try++ {
		log := &testenv.LogBuffer{}
		cmd := exec.Command(bin, "-v", "-n", "-H", "board:1.0", "-k", cert, "-u",
			fmt.Sprintf("-t DEFAULT -u %s -i %s -k %s", r.otad.URL, device, token))
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			r.t.Error(err)
			return false
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		ok := false
		for deadline := time.Now().Add(clientWait); time.Now().Before(deadline) && !ok; {
			ok = cond()
			time.Sleep(100 * time.Millisecond)
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if ok {
			return true
		}
		r.t.Logf("swupdate %s did not get there (try %d of 3); log tail:\n%s", device, try, tail(log.String(), 15))
	}
	return false
}

func TestMixedFleetGetsOneTaskPerDevice(t *testing.T) {
	r := newRig(t)
	swBin, err := exec.LookPath("swupdate")
	if err != nil {
		testenv.Skip(t, "swupdate", "\n"+"!! SKIPPING the mixed-fleet test: swupdate is not installed (apt-get install -y swupdate)")
	}
	// One firmware for the whole fleet: SWUpdate fetches release-2 (the
	// .swu), mender-client release-2.mender from the same URL.
	swu, cert := r.buildSWU("release-2", "2.0.0")
	r.buildArtifact("release-2", false)
	rollout := r.release("2.0.0", "release-2", swu.image, 3, map[string]any{"sha1": swu.sha1, "md5": swu.md5sum})

	var menders []*device
	for i, kind := range []string{"rsa", "ecdsa", "ed25519"} {
		d := r.newDevice(fmt.Sprintf("mix-m%d", i+1), "release-1", kind)
		r.register(d)
		menders = append(menders, d)
	}
	swTokens := map[string]string{}
	for _, id := range []string{"mix-s1", "mix-s2"} {
		swTokens[id] = r.admin(http.MethodPost, "/devices", map[string]any{"device_id": id, "model": model, "current_version": "1.0.0"},
			http.StatusCreated)["token"].(string)
	}

	var wg sync.WaitGroup
	var clients []*client
	for _, d := range menders {
		clients = append(clients, r.start(d))
	}
	for id, tok := range swTokens {
		wg.Go(func() {
			if !r.swupdate(swBin, cert, id, tok, func() bool {
				ts, err := r.tryTasks(id)
				return err == nil && len(ts) == 1 && ts[0].Status != "pending" && ts[0].Progress == 100
			}) {
				t.Errorf("swupdate %s never installed", id)
			}
		})
	}
	for _, d := range menders {
		r.waitFor(d.id+" succeeds", clientWait, func() bool { return r.oneTask(d.id, "succeeded") },
			func() string { return fmt.Sprintf("tasks: %+v", r.tasks(d.id)) })
	}
	wg.Wait()
	for _, c := range clients {
		r.stopWhenIdle(c)
	}
	for _, d := range menders {
		if ts := r.tasks(d.id); len(ts) != 1 || ts[0].Status != "succeeded" || !d.installed() {
			t.Errorf("%s: %+v installed=%v, want exactly one succeeded task", d.id, ts, d.installed())
		}
	}
	for id := range swTokens {
		if ts := r.tasks(id); len(ts) != 1 {
			t.Errorf("%s: %+v, want exactly one task", id, ts)
		}
	}
	stats := r.admin(http.MethodGet, "/rollouts/"+rollout, nil, http.StatusOK)["stats"].(map[string]any)
	total := 0.0
	for _, v := range stats {
		total += v.(float64)
	}
	if total != 5 || stats["succeeded"].(float64) < 3 {
		t.Fatalf("rollout stats %v, want 5 tasks (3 succeeded by mender clients)", stats)
	}
}
