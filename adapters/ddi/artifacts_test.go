package ddi_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/ddi"
	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	ddiapp "github.com/ai-device/ota/application/ddi"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// Hosted artifacts over DDI: the whole service on memory adapters, the
// download use case over in-test artifact rows and blobs.

type blobs map[string][]byte

type object struct{ *bytes.Reader }

func (object) Close() error       { return nil }
func (object) ModTime() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

func (blobs) Put(context.Context, string, io.Reader) (int64, error) { panic("not used") }
func (blobs) Delete(context.Context, string) error                  { panic("not used") }
func (blobs) Presign(context.Context, string, time.Duration) (string, error) {
	return "", ports.ErrPresignUnsupported
}
func (b blobs) Open(_ context.Context, key string) (ports.BlobObject, error) {
	if data, ok := b[key]; ok {
		return object{bytes.NewReader(data)}, nil
	}
	return nil, domain.ErrNotFound
}

type hosted struct {
	*harness
	deps application.Deps
	arts *memory.Artifacts
	objs blobs
	cut  *cutListener
}

// cutListener drops the next connection after it has written budget bytes
// (0: never), as a network that fails mid-download does.
type cutListener struct {
	net.Listener
	budget atomic.Int64
}

func (l *cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if n := l.budget.Swap(0); n > 0 {
		return &cutConn{Conn: c, left: n}, nil
	}
	return c, nil
}

type cutConn struct {
	net.Conn
	left int64
}

func (c *cutConn) Write(p []byte) (int, error) {
	if int64(len(p)) >= c.left {
		n, _ := c.Conn.Write(p[:c.left])
		c.Conn.Close()
		return n, net.ErrClosed
	}
	c.left -= int64(len(p))
	return c.Conn.Write(p)
}

func newHostedHarness(t *testing.T) *hosted {
	t.Helper()
	poll := application.PollInterval(90 * time.Second)
	base := testenv.NewMemoryService(t, testenv.MemoryOptions{Clock: local.NewClock(), LockWait: 500 * time.Millisecond, PollInterval: time.Duration(poll)})
	store, deps, devices, admin := base.Store, base.Deps, base.Devices, base.Admin
	svc, err := ddiapp.New(devices, deps.Devices, deps.Rollouts, memory.NewAttributes(store), memory.NewTaskActions(store), deps.Tasks, deps.Metrics,
		deps.Clock, poll, "sw_version")
	if err != nil {
		t.Fatal(err)
	}
	h := &hosted{deps: deps, arts: memory.NewArtifacts(store), objs: blobs{}}
	key, _ := domain.NewLinkKey([]byte(strings.Repeat("d", 32)))
	dl, err := application.NewDownloads(application.DownloadPorts{Firmwares: deps.Firmwares, Devices: deps.Devices,
		Artifacts: h.arts, Blobs: h.objs, Clock: deps.Clock}, application.DownloadConfig{LinkKey: key})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.cut = &cutListener{Listener: l}
	a := ddi.New(ddi.Config{GatewayToken: gatewayToken, PublicURL: "http://" + l.Addr().String() + "/"}, svc, dl)
	e := rest.NewServer(rest.Config{AdminToken: adminToken, Mounts: []httpedge.Mount{a.Mount}}, devices, admin, nil, nil, nil, nil)
	srv := &httptest.Server{Listener: h.cut, Config: &http.Server{Handler: e}}
	srv.Start()
	t.Cleanup(srv.Close)
	h.harness = &harness{t: t, srv: srv}
	return h
}

// publishHosted stores an artifact and a firmware of m referring to it,
// rolled out to every device; it returns the firmware id.
func (h *hosted) publishHosted(m, version, fileName string, body []byte) string {
	h.t.Helper()
	s256, s1, s5 := sha256.Sum256(body), sha1.Sum(body), md5.Sum(body)
	d := domain.ArtifactDigest{Size: int64(len(body)), SHA256: hex.EncodeToString(s256[:]), SHA1: hex.EncodeToString(s1[:]), MD5: hex.EncodeToString(s5[:])}
	artID := h.deps.IDs.NewID()
	art, err := domain.NewArtifact(artID, fileName, d, domain.ArtifactMeta{Format: domain.ArtifactSWU}, time.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	if _, _, err := h.arts.Create(context.Background(), art, domain.AuditRecord{}); err != nil {
		h.t.Fatal(err)
	}
	h.objs[art.StorageKey()] = body
	fwID := h.deps.IDs.NewID()
	// Stored directly: this rig mounts no upload route (tests/ddi and
	// tests/mender upload through otad's).
	spec, err := domain.FirmwareSpec{Model: m, Version: version}.WithArtifact(art)
	if err != nil {
		h.t.Fatal(err)
	}
	fw, err := domain.NewFirmware(fwID, spec, time.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.deps.Firmwares.Create(context.Background(), fw, domain.AuditRecord{}); err != nil {
		h.t.Fatal(err)
	}
	if m == model {
		h.admin(http.MethodPost, "/rollouts", map[string]any{"firmware_id": fwID.String(), "percentage": 100}, http.StatusCreated)
	}
	return fwID.String()
}

func TestHostedArtifactOverDDI(t *testing.T) {
	h := newHostedHarness(t)
	tok := h.register("dev-1", "1.0.0")
	body := bytes.Repeat([]byte("swu-image "), 5000)
	fwID := h.publishHosted(model, "1.1.0", "cam-1.1.0.swu", body)

	action := actionOf(t, h.poll("dev-1", tok)["deploymentBase"], "deploymentBase")
	r := h.do(http.MethodGet, root("dev-1")+"/deploymentBase/"+strconv.FormatInt(action, 10), tok, nil)
	if r.status != http.StatusOK {
		t.Fatalf("deploymentBase: %d %s", r.status, r.body)
	}
	arts := r.json(t)["deployment"].(map[string]any)["chunks"].([]any)[0].(map[string]any)["artifacts"].([]any)
	if len(arts) != 1 {
		t.Fatalf("artifacts: %v", arts)
	}
	art := arts[0].(map[string]any)
	href := h.srv.URL + root("dev-1") + "/softwaremodules/" + fwID + "/artifacts/cam-1.1.0.swu"
	s256, s1, s5 := sha256.Sum256(body), sha1.Sum(body), md5.Sum(body)
	hashes := art["hashes"].(map[string]any)
	links := art["_links"].(map[string]any)
	if art["filename"] != "cam-1.1.0.swu" || art["size"].(interface{ String() string }).String() != strconv.Itoa(len(body)) ||
		hashes["sha256"] != hex.EncodeToString(s256[:]) || hashes["sha1"] != hex.EncodeToString(s1[:]) || hashes["md5"] != hex.EncodeToString(s5[:]) {
		t.Errorf("artifact: %v", art)
	}
	if links["download-http"].(map[string]any)["href"] != href || links["md5sum-http"].(map[string]any)["href"] != href+".MD5SUM" {
		t.Errorf("links: %v, want %s", links, href)
	}
	if _, ok := links["download"]; ok {
		t.Error("an https download link under an http public URL")
	}

	path := strings.TrimPrefix(href, h.srv.URL)
	for _, auth := range []string{tok, "GatewayToken " + gatewayToken} {
		if r := h.do(http.MethodGet, path, auth, nil); r.status != http.StatusOK || !bytes.Equal(r.body, body) {
			t.Errorf("download with %s: %d, %d bytes", strings.Fields(auth)[0], r.status, len(r.body))
		}
	}
	req, _ := http.NewRequest(http.MethodGet, href, nil)
	req.Header.Set("Authorization", tok)
	req.Header.Set("Range", "bytes=100-")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusPartialContent || !bytes.Equal(got, body[100:]) || res.Header.Get("ETag") != `"`+hex.EncodeToString(s256[:])+`"` {
		t.Errorf("Range: %d, %d bytes, ETag %q", res.StatusCode, len(got), res.Header.Get("ETag"))
	}
	if r := h.do(http.MethodGet, path+".MD5SUM", tok, nil); r.status != http.StatusOK || string(r.body) != hex.EncodeToString(s5[:])+"  cam-1.1.0.swu\n" {
		t.Errorf("MD5SUM: %d %q", r.status, r.body)
	}
}

// TestHostedArtifactRefusals: hostile paths, missing credentials, another
// model's firmware and a revoked one are each a 4xx with its code.
func TestHostedArtifactRefusals(t *testing.T) {
	h := newHostedHarness(t)
	tok := h.register("dev-1", "1.0.0")
	fwID := h.publishHosted(model, "1.1.0", "cam-1.1.0.swu", []byte("image"))
	otherID := h.publishHosted("cam-x2", "1.1.0", "x2.swu", []byte("other image"))
	base := root("dev-1") + "/softwaremodules/"
	code := func(path, auth string, status int, want string) {
		t.Helper()
		r := h.do(http.MethodGet, path, auth, nil)
		if r.status != status || r.json(t)["error"].(map[string]any)["code"] != want {
			t.Errorf("%s: %d %s, want %d %s", path, r.status, r.body, status, want)
		}
	}
	for _, file := range []string{"..%2F..%2Fetc%2Fpasswd", "%2e%2e", "x%2Fcam-1.1.0.swu", "cam-1.1.0.swu%00", "other.swu", "cam-1.1.0.swu.md5sum"} {
		code(base+fwID+"/artifacts/"+file, tok, http.StatusNotFound, httpedge.CodeNotFound)
	}
	code(base+"..%2F"+fwID+"/artifacts/cam-1.1.0.swu", tok, http.StatusNotFound, httpedge.CodeNotFound)
	code(base+fwID+"/artifacts/cam-1.1.0.swu", "", http.StatusUnauthorized, httpedge.CodeUnauthorized)
	code(base+fwID+"/artifacts/cam-1.1.0.swu", "TargetToken nope", http.StatusUnauthorized, httpedge.CodeUnauthorized)
	code(base+otherID+"/artifacts/x2.swu", tok, http.StatusNotFound, httpedge.CodeNotFound)
	code(base+otherID+"/artifacts/x2.swu.MD5SUM", tok, http.StatusNotFound, httpedge.CodeNotFound)

	h.admin(http.MethodPost, "/firmwares/"+fwID+"/revoke", nil, http.StatusOK)
	code(base+fwID+"/artifacts/cam-1.1.0.swu", tok, http.StatusGone, httpedge.CodeFirmwareGone)
	code(base+fwID+"/artifacts/cam-1.1.0.swu.MD5SUM", tok, http.StatusGone, httpedge.CodeFirmwareGone)
}

// TestCurlResumesAnInterruptedDownload: curl, cut off mid-download, resumes
// with Range (curl -C -) and the file it ends with has the image's sha256.
func TestCurlResumesAnInterruptedDownload(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		testenv.Skip(t, "curl", "curl is not installed")
	}
	h := newHostedHarness(t)
	tok := h.register("dev-1", "1.0.0")
	body := make([]byte, 4<<20)
	for i := range body {
		body[i] = byte(i*31 + i>>9)
	}
	fwID := h.publishHosted(model, "1.1.0", "big.swu", body)
	href := h.srv.URL + root("dev-1") + "/softwaremodules/" + fwID + "/artifacts/big.swu"
	out := filepath.Join(t.TempDir(), "big.swu")

	// The network fails after 1 MiB: curl exits with a partial file.
	h.cut.budget.Store(1 << 20)
	cut := exec.Command(curl, "-sS", "-f", "-H", "Authorization: "+tok, "-o", out, href)
	if msg, err := cut.CombinedOutput(); err == nil {
		t.Fatalf("the first curl was not cut off: %s", msg)
	}
	part, err := os.Stat(out)
	if err != nil || part.Size() == 0 || part.Size() >= int64(len(body)) {
		t.Fatalf("after the cut: %v, %v", part, err)
	}
	resume := exec.Command(curl, "-sS", "-f", "-C", "-", "-w", "%{http_code}", "-H", "Authorization: "+tok, "-o", out, href)
	code, err := resume.Output()
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if string(code) != "206" {
		t.Errorf("resumed with %s, want 206 (a Range request)", code)
	}
	got, _ := os.ReadFile(out)
	if sha256.Sum256(got) != sha256.Sum256(body) {
		t.Fatalf("resumed file: %d bytes, sha256 differs from the image's", len(got))
	}
}
