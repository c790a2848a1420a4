package console_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/console"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/tests/testenv"
)

// menderFile writes a real .mender file with Debian's mender-artifact: a
// rootfs image for deviceType named name, whose software version is
// version, with size bytes of incompressible payload.
func menderFile(t *testing.T, deviceType, name, version string, size int) []byte {
	t.Helper()
	bin, err := exec.LookPath("mender-artifact")
	if err != nil {
		testenv.Skip(t, "mender-artifact", "mender-artifact is not installed (apt-get install -y mender-artifact): the upload tests build real .mender files with it")
	}
	dir := t.TempDir()
	payload := make([]byte, size)
	_, _ = rand.Read(payload)
	if err := os.WriteFile(filepath.Join(dir, "rootfs.img"), payload, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name+".mender")
	cmd := exec.Command(bin, "write", "rootfs-image", "-t", deviceType, "-n", name, "--software-version", version,
		"-f", filepath.Join(dir, "rootfs.img"), "-o", out, "--no-progress")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mender-artifact: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// upload posts body to the console's upload endpoint as the page's
// script does, with csrf in the header.
func (e *env) upload(c *http.Client, fileName, csrf string, body []byte) (int, map[string]string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/console/artifacts?filename="+url.QueryEscape(fileName), bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if csrf != "" {
		req.Header.Set("X-CSRF-Token", csrf)
	}
	res, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var answer map[string]string
	if err := json.Unmarshal(raw, &answer); err != nil {
		e.t.Fatalf("upload answer %d is not JSON: %s", res.StatusCode, raw)
	}
	return res.StatusCode, answer
}

// uploadCSRF is the token the firmware page gives its upload form.
func (e *env) uploadCSRF() string {
	e.t.Helper()
	page := e.get("/console/firmwares")
	m := regexp.MustCompile(`id="upload-form"[^>]*data-csrf="([^"]+)"`).FindStringSubmatch(page.body)
	if m == nil {
		e.t.Fatalf("no upload form on the firmware page: %s", page.body)
	}
	return html.UnescapeString(m[1])
}

func inputValue(body, id string) string {
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `" name="[^"]*" value="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		return "<none>"
	}
	return html.UnescapeString(m[1])
}

// TestUploadShowsTheFileAndPublishesFromIt: an uploaded .mender file's
// page shows what it says about itself and what the service computed, the
// publish form is pre-filled from it, and publishing makes a firmware
// whose image is the artifact.
func TestUploadShowsTheFileAndPublishesFromIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustSignIn()
	file := menderFile(t, "cam-x7", "cam-x7-release", "3.2.1", 20000)
	sum := sha256.Sum256(file)

	code, answer := e.upload(e.client, "cam-x7-3.2.1.mender", e.uploadCSRF(), file)
	if code != http.StatusOK || !strings.HasPrefix(answer["location"], "/console/artifacts/") {
		t.Fatalf("upload: %d %v", code, answer)
	}
	page := e.get(answer["location"])
	if page.code != http.StatusOK {
		t.Fatalf("artifact page: %d %s", page.code, page.body)
	}
	for _, want := range []string{
		`<dd id="meta-format">mender</dd>`,
		`<dd id="meta-artifact-name"><code>cam-x7-release</code></dd>`,
		`<dd id="meta-device-types"><code>cam-x7</code></dd>`,
		`<dd id="meta-version"><code>3.2.1</code></dd>`,
		`<dd id="meta-payload-type"><code>rootfs-image</code></dd>`,
		`<code>rootfs-image.version</code> = <code>3.2.1</code>`,
		fmt.Sprintf(`(%d bytes)`, len(file)),
		`<code id="meta-sha256">` + hex.EncodeToString(sum[:]) + `</code>`,
	} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the artifact page lacks %s", want)
		}
	}
	if !strings.Contains(page.body, `<textarea id="release_notes" name="release_notes"`) || !strings.Contains(page.body, `name="mandatory" value="1"`) {
		t.Errorf("the artifact's publish form lacks the release notes or the mandatory box")
	}
	for _, f := range []string{"min_source_version", "signature"} {
		if fieldBlock(page.body, f) == "" {
			t.Errorf("the artifact's publish form lacks the field %s", f)
		}
	}
	if m, v := inputValue(page.body, "model"), inputValue(page.body, "version"); m != "cam-x7" || v != "3.2.1" {
		t.Errorf("publish form pre-filled with model %q, version %q", m, v)
	}

	// The operator edits the version before publishing.
	r := e.post(answer["location"], url.Values{"csrf": {e.csrf(answer["location"])}, "model": {"cam-x7"},
		"version": {"3.2.1-rc.1"}, "release_notes": {"from the console"}})
	if r.code != http.StatusSeeOther || r.header.Get("Location") != "/console/firmwares?model=cam-x7&done=published" {
		t.Fatalf("publish: %d %s %s", r.code, r.header.Get("Location"), r.body)
	}
	fws, err := e.admin.ListFirmwares(context.Background(), "cam-x7")
	if err != nil || len(fws) != 1 {
		t.Fatalf("firmwares: %v %v", fws, err)
	}
	spec := fws[0].Spec()
	if spec.Version != "3.2.1-rc.1" || spec.ArtifactID.String() != strings.TrimPrefix(answer["location"], "/console/artifacts/") ||
		spec.SizeBytes != int64(len(file)) || spec.SHA256 != hex.EncodeToString(sum[:]) || spec.ArtifactName != "cam-x7-release" ||
		spec.URL != "" {
		t.Errorf("published %+v", spec)
	}
}

// TestUploadRefusesAnUnreadableFileWithTheReason: a truncated .mender is
// refused with the API's code and the reason, and nothing is kept.
func TestUploadRefusesAnUnreadableFileWithTheReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustSignIn()
	file := menderFile(t, "cam-x7", "cut", "1.0.0", 20000)
	code, answer := e.upload(e.client, "cut.mender", e.uploadCSRF(), file[:3000])
	if code != http.StatusUnprocessableEntity || !strings.Contains(answer["error"], "truncated") || answer["location"] != "" {
		t.Fatalf("truncated upload: %d %v", code, answer)
	}
	if list, err := e.artifacts.ListArtifacts(context.Background()); err != nil || len(list) != 0 {
		t.Errorf("artifacts after a refused upload: %v %v", list, err)
	}
}

// TestUploadNeedsASessionAndItsToken: without a session, or without the
// session's CSRF token, nothing is read or stored.
func TestUploadNeedsASessionAndItsToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := []byte("an image")
	if code, answer := e.upload(newClient(t), "a.bin", "", body); code != http.StatusUnauthorized || answer["error"] == "" {
		t.Errorf("without a session: %d %v", code, answer)
	}
	e.mustSignIn()
	if code, _ := e.upload(e.client, "a.bin", "", body); code != http.StatusForbidden {
		t.Errorf("without the token: %d", code)
	}
	if code, _ := e.upload(e.client, "a.bin", "forged", body); code != http.StatusForbidden {
		t.Errorf("with a forged token: %d", code)
	}
	if list, err := e.artifacts.ListArtifacts(context.Background()); err != nil || len(list) != 0 {
		t.Errorf("artifacts: %v %v", list, err)
	}
	// The same upload with the token is stored: the refusals above were
	// for the token alone.
	if code, answer := e.upload(e.client, "a.bin", e.uploadCSRF(), body); code != http.StatusOK {
		t.Errorf("with the token: %d %v", code, answer)
	}
}

// TestArtifactPublishShowsFieldErrors: what the service refuses is shown
// beside its field on the artifact page, the operator's input kept.
func TestArtifactPublishShowsFieldErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustSignIn()
	code, answer := e.upload(e.client, "plain.bin", e.uploadCSRF(), []byte("raw image bytes"))
	if code != http.StatusOK {
		t.Fatalf("upload: %d %v", code, answer)
	}
	page := e.get(answer["location"])
	if !strings.Contains(page.body, `<dd id="meta-format">raw</dd>`) || inputValue(page.body, "model") != "" {
		t.Errorf("a raw file's page: %s", page.body)
	}
	r := e.post(answer["location"], url.Values{"csrf": {e.csrf(answer["location"])}, "model": {"cam-x1"}, "version": {"not-a-version"}})
	if r.code != http.StatusBadRequest || !strings.Contains(r.body, `id="version-error"`) || inputValue(r.body, "version") != "not-a-version" {
		t.Errorf("a bad version: %d %s", r.code, r.body)
	}
	if fws, _ := e.admin.ListFirmwares(context.Background(), "cam-x1"); len(fws) != 0 {
		t.Errorf("published anyway: %v", fws)
	}
	if r := e.get("/console/artifacts/" + domain.UUIDOf([16]byte{1}).String()); r.code != http.StatusNotFound {
		t.Errorf("an unknown artifact: %d", r.code)
	}
}

// TestConsoleWithoutArtifactsHasNoUpload: a console built without the
// upload use case shows no upload form and has no upload endpoint.
func TestConsoleWithoutArtifactsHasNoUpload(t *testing.T) {
	t.Parallel()
	svc := testenv.NewMemoryService(t, testenv.MemoryOptions{})
	con, err := console.New(console.Config{AdminToken: adminToken, RefreshEvery: time.Second}, svc.Admin, svc.Fleet, svc.Deps.Clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	e := &env{t: t, srv: srv, client: newClient(t)}
	e.mustSignIn()
	if page := e.get("/console/firmwares"); strings.Contains(page.body, "upload-form") {
		t.Error("an upload form without uploads")
	}
	if r := e.post("/console/artifacts", url.Values{"csrf": {e.csrf("/console/firmwares")}}); r.code != http.StatusNotFound {
		t.Errorf("upload endpoint: %d", r.code)
	}
}

// slowReader sends n bytes in chunks, pausing between them.
type slowReader struct {
	left  int
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.pause)
	n := min(len(p), s.left, 1000)
	for i := range p[:n] {
		p[i] = 'x'
	}
	s.left -= n
	return n, nil
}

// TestUploadOutlastsTheServersReadTimeout: an upload that takes longer
// than the server's read timeout, bytes arriving all along, is stored;
// the timeout bounds a pause, not the upload.
func TestUploadOutlastsTheServersReadTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := httptest.NewUnstartedServer(e.srv.Config.Handler)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	e.srv = srv
	e.mustSignIn()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/console/artifacts?filename=slow.bin", &slowReader{left: 12000, pause: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-CSRF-Token", e.uploadCSRF())
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("a 1.8 s upload behind a 0.5 s read timeout: %d %s", res.StatusCode, raw)
	}
	if list, _ := e.artifacts.ListArtifacts(context.Background()); len(list) != 1 || list[0].Digest().Size != 12000 {
		t.Errorf("stored: %v", list)
	}
}

// rawUpload sends the upload's request line and headers as they are,
// then body, on its own connection, and reads the answer: a test can
// announce what it does not send.
func (e *env) rawUpload(headers, body string) (int, string) {
	e.t.Helper()
	csrf := e.uploadCSRF()
	target, _ := url.Parse(e.srv.URL + "/console/artifacts")
	var cookies []string
	for _, c := range e.client.Jar.Cookies(target) {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	conn, err := net.Dial("tcp", target.Host)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /console/artifacts?filename=x.bin HTTP/1.1\r\nHost: %s\r\nCookie: %s\r\nX-CSRF-Token: %s\r\n"+
		"Content-Type: application/octet-stream\r\n%s\r\n%s", target.Host, strings.Join(cookies, "; "), csrf, headers, body)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}

// TestUploadWithABrokenBodyIsTheCallersFault: a body that breaks off
// (here a chunked body with a corrupt chunk header) is 400 with the API's
// words, not a 500 blaming the service, and nothing is kept.
func TestUploadWithABrokenBodyIsTheCallersFault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustSignIn()
	code, raw := e.rawUpload("Transfer-Encoding: chunked\r\n", "1388\r\n"+strings.Repeat("y", 5000)+"\r\nZZ\r\n")
	if code != http.StatusBadRequest || !strings.Contains(raw, "ended before its end") {
		t.Errorf("a broken body: %d %s", code, raw)
	}
	if list, _ := e.artifacts.ListArtifacts(context.Background()); len(list) != 0 {
		t.Errorf("stored: %v", list)
	}
}

// TestUploadAnnouncedOverTheLimitIsRefusedAtOnce: a Content-Length over
// the limit (1 GiB in the test service) is 413 before the body is sent.
func TestUploadAnnouncedOverTheLimitIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustSignIn()
	code, raw := e.rawUpload("Content-Length: 2147483648\r\n", "only a few bytes")
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("2 GiB announced: %d %s", code, raw)
	}
}
