package artifacts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/tests/testenv"
)

const adminToken = "artifact-test-admin-token"

// rig is one otad (memory store) with its artifact directory.
type rig struct {
	otad *testenv.Otad
	dir  string
}

func startMemory(t *testing.T, env map[string]string) rig {
	t.Helper()
	dir := t.TempDir()
	e := map[string]string{"OTA_STORE": "memory", "OTA_ARTIFACT_STORE": "file://" + dir}
	for k, v := range env {
		e[k] = v
	}
	o := testenv.StartOtad(t, testenv.OtadConfig{Name: "artifacts", AdminToken: adminToken,
		DatabaseURL: "postgres://unused@127.0.0.1:1/unused?sslmode=disable", RedisURL: "redis://127.0.0.1:1/0", Env: e})
	return rig{otad: o, dir: dir}
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (a answer) code() string {
	if e, ok := a.body["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, header: res.Header, raw: string(b)}
	_ = json.Unmarshal(b, &a.body)
	return a
}

func (r rig) uploadRaw(t *testing.T, query string, body []byte, header http.Header) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.otad.URL+"/api/v1/admin/artifacts"+query, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/octet-stream")
	for k, v := range header {
		req.Header[k] = v
	}
	return do(t, req)
}

// uploadMultipart sends fields (in order) then a file part named fileName.
func (r rig) uploadMultipart(t *testing.T, fields [][2]string, fileName string, body []byte) answer {
	t.Helper()
	return r.uploadMultipartThen(t, fields, fileName, body, nil)
}

// uploadMultipartThen is uploadMultipart with fields after the file too.
func (r rig) uploadMultipartThen(t *testing.T, fields [][2]string, fileName string, body []byte, after [][2]string) answer {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, f := range fields {
		_ = w.WriteField(f[0], f[1])
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, fileName))
	h.Set("Content-Type", "application/octet-stream")
	p, _ := w.CreatePart(h)
	_, _ = p.Write(body)
	for _, f := range after {
		_ = w.WriteField(f[0], f[1])
	}
	_ = w.Close()
	req, _ := http.NewRequest(http.MethodPost, r.otad.URL+"/api/v1/admin/artifacts", &buf)
	req.Header.Set("Content-Type", w.FormDataContentType())
	return do(t, req)
}

func (r rig) get(t *testing.T, path string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.otad.URL+path, nil)
	return do(t, req)
}

// stored lists the files under the store directory.
func (r rig) stored(t *testing.T) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(r.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// uploadTemp is the name fileblob gives an upload's temporary file: the
// key's last element (the artifact id), a hex stamp, .tmp.
var uploadTemp = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.[0-9a-f]+\.tmp$`)

// tempFiles lists os.TempDir's files named like an upload's temporary
// file (the store keeps them next to their object; none may appear here).
func tempFiles() map[string]bool {
	out := map[string]bool{}
	entries, _ := os.ReadDir(os.TempDir())
	for _, e := range entries {
		if uploadTemp.MatchString(e.Name()) {
			out[e.Name()] = true
		}
	}
	return out
}

// assertEmpty: no object, no temporary file, no row.
func (r rig) assertEmpty(t *testing.T, tmpBefore map[string]bool) {
	t.Helper()
	if files := r.stored(t); len(files) > 0 {
		t.Errorf("files left in the store: %v", files)
	}
	for name := range tempFiles() {
		if !tmpBefore[name] {
			t.Errorf("temporary file left in %s: %s", os.TempDir(), name)
		}
	}
	if a := r.get(t, "/api/v1/admin/artifacts"); a.status != 200 || len(a.body["items"].([]any)) != 0 {
		t.Errorf("artifact rows left: %d %s", a.status, a.raw)
	}
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestUploadPublishDelete(t *testing.T) {
	t.Parallel()
	r := startMemory(t, nil)
	body := bytes.Repeat([]byte("image-"), 50_000)
	a := r.uploadRaw(t, "?filename=fw-1.0.0.bin", body, http.Header{"X-Checksum-Sha256": {strings.ToUpper(sum(body))}})
	if a.status != http.StatusCreated || a.body["sha256"] != sum(body) || a.body["size_bytes"] != float64(len(body)) ||
		a.body["file_name"] != "fw-1.0.0.bin" || a.body["format"] != "raw" {
		t.Fatalf("raw upload = %d %s", a.status, a.raw)
	}
	id := a.body["id"].(string)
	// The same bytes as multipart, under another name: the same artifact, 200.
	again := r.uploadMultipart(t, [][2]string{{"sha256", sum(body)}}, "copy.bin", body)
	if again.status != http.StatusOK || again.body["id"] != id {
		t.Fatalf("the same content again = %d %s, want 200 with id %s", again.status, again.raw, id)
	}
	if files := r.stored(t); len(files) != 1 {
		t.Errorf("store holds %v, want one object", files)
	}
	if g := r.get(t, "/api/v1/admin/artifacts/"+id); g.status != 200 || g.body["sha1"] != a.body["sha1"] {
		t.Errorf("GET the artifact = %d %s", g.status, g.raw)
	}
	// Publish a firmware from it: size and checksums are the artifact's.
	pub := func(b string) answer {
		req, _ := http.NewRequest(http.MethodPost, r.otad.URL+"/api/v1/admin/firmwares", strings.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		return do(t, req)
	}
	fw := pub(`{"model":"cam-x1","version":"1.0.0","artifact_id":"` + id + `"}`)
	if fw.status != http.StatusCreated || fw.body["artifact_id"] != id || fw.body["sha256"] != sum(body) ||
		fw.body["size_bytes"] != float64(len(body)) || fw.body["md5"] != a.body["md5"] {
		t.Fatalf("publishing from the artifact = %d %s", fw.status, fw.raw)
	}
	for _, c := range []struct{ body, code string }{
		{`{"model":"cam-x1","version":"1.0.1","artifact_id":"` + id + `","sha256":"` + strings.Repeat("0", 64) + `"}`, "VALIDATION_FAILED"},
		{`{"model":"cam-x1","version":"1.0.1","artifact_id":"` + id + `","url":"https://x.example/a.bin"}`, "VALIDATION_FAILED"},
		{`{"model":"cam-x1","version":"1.0.1","artifact_id":"not-a-uuid"}`, "VALIDATION_FAILED"},
		{`{"model":"cam-x1","version":"1.0.1","artifact_id":"00000000-0000-4000-8000-000000000000"}`, "NOT_FOUND"},
	} {
		if got := pub(c.body); got.code() != c.code {
			t.Errorf("publish %s = %d %s, want %s", c.body, got.status, got.raw, c.code)
		}
	}
	del := func() answer {
		req, _ := http.NewRequest(http.MethodDelete, r.otad.URL+"/api/v1/admin/artifacts/"+id, nil)
		return do(t, req)
	}
	if d := del(); d.status != http.StatusConflict || d.code() != "ARTIFACT_IN_USE" {
		t.Errorf("DELETE an artifact in use = %d %s, want 409 ARTIFACT_IN_USE", d.status, d.raw)
	}
	if files := r.stored(t); len(files) != 1 {
		t.Errorf("the refused delete touched the store: %v", files)
	}
	other := r.uploadRaw(t, "", []byte("another"), http.Header{"Content-Disposition": {`attachment; filename="other.img"`}})
	if other.status != http.StatusCreated || other.body["file_name"] != "other.img" {
		t.Fatalf("upload named by Content-Disposition = %d %s", other.status, other.raw)
	}
	req, _ := http.NewRequest(http.MethodDelete, r.otad.URL+"/api/v1/admin/artifacts/"+other.body["id"].(string), nil)
	if d := do(t, req); d.status != http.StatusNoContent {
		t.Errorf("DELETE an unused artifact = %d %s", d.status, d.raw)
	}
	if files := r.stored(t); len(files) != 1 {
		t.Errorf("after deleting the unused artifact the store holds %v, want the used one only", files)
	}
}

// Every hostile or wrong upload is a 4xx with its code, and leaves no
// object, no temporary file and no row.
func TestUploadRefusals(t *testing.T) {
	t.Parallel()
	r := startMemory(t, map[string]string{"OTA_ARTIFACT_MAX_BYTES": "1000000"})
	body := []byte("some image bytes")
	for _, c := range []struct {
		name   string
		send   func() answer
		status int
		code   string
	}{
		{"traversal in the query", func() answer { return r.uploadRaw(t, "?filename=../x", body, nil) }, 400, "VALIDATION_FAILED"},
		{"escaped traversal", func() answer { return r.uploadRaw(t, "?filename=%2e%2e", body, nil) }, 400, "VALIDATION_FAILED"},
		{"escaped separator", func() answer { return r.uploadRaw(t, "?filename=..%2fx", body, nil) }, 400, "VALIDATION_FAILED"},
		{"a path", func() answer { return r.uploadRaw(t, "?filename=a/b", body, nil) }, 400, "VALIDATION_FAILED"},
		{"traversal in Content-Disposition", func() answer {
			return r.uploadRaw(t, "", body, http.Header{"Content-Disposition": {`attachment; filename="../../etc/passwd"`}})
		}, 400, "VALIDATION_FAILED"},
		{"traversal in a multipart file name", func() answer { return r.uploadMultipart(t, nil, "../x", body) }, 400, "VALIDATION_FAILED"},
		{"no name", func() answer { return r.uploadRaw(t, "", body, nil) }, 400, "VALIDATION_FAILED"},
		{"no file part", func() answer { return r.uploadMultipart(t, nil, "", nil) }, 400, "VALIDATION_FAILED"},
		{"unknown multipart field", func() answer { return r.uploadMultipart(t, [][2]string{{"sha265", sum(body)}}, "a.bin", body) }, 400, "VALIDATION_FAILED"},
		// The file streams to the store: a field after it comes too late.
		{"sha256 after the file", func() answer {
			return r.uploadMultipartThen(t, nil, "a.bin", body, [][2]string{{"sha256", sum([]byte("other"))}})
		}, 400, "VALIDATION_FAILED"},
		{"unknown field after the file", func() answer {
			return r.uploadMultipartThen(t, nil, "a.bin", body, [][2]string{{"sha265", sum(body)}})
		}, 400, "VALIDATION_FAILED"},
		{"wrong declared checksum", func() answer {
			return r.uploadRaw(t, "?filename=a.bin&sha256="+sum([]byte("other")), body, nil)
		}, 422, "CHECKSUM_MISMATCH"},
		{"wrong checksum in multipart", func() answer {
			return r.uploadMultipart(t, [][2]string{{"sha256", sum([]byte("other"))}}, "a.bin", body)
		}, 422, "CHECKSUM_MISMATCH"},
		{"malformed checksum", func() answer { return r.uploadRaw(t, "?filename=a.bin&sha256=xyz", body, nil) }, 400, "VALIDATION_FAILED"},
		{"over the limit", func() answer { return r.uploadRaw(t, "?filename=big.bin", make([]byte, 3_000_000), nil) }, 413, "ARTIFACT_TOO_LARGE"},
		{"over the limit, chunked", func() answer {
			// No Content-Length: the limit is found while the body streams.
			req, _ := http.NewRequest(http.MethodPost, r.otad.URL+"/api/v1/admin/artifacts?filename=big.bin",
				io.MultiReader(bytes.NewReader(make([]byte, 3_000_000))))
			return do(t, req)
		}, 413, "ARTIFACT_TOO_LARGE"},
		{"empty", func() answer { return r.uploadRaw(t, "?filename=a.bin", nil, nil) }, 400, "VALIDATION_FAILED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := tempFiles()
			a := c.send()
			if a.status != c.status || a.code() != c.code {
				t.Fatalf("= %d %s, want %d %s", a.status, a.raw, c.status, c.code)
			}
			r.assertEmpty(t, before)
		})
	}
}

// A client that goes away mid-body leaves nothing: the upload's object
// is never committed and its temporary file is removed.
func TestAbortedUploadLeavesNothing(t *testing.T) {
	t.Parallel()
	r := startMemory(t, nil)
	before := tempFiles()
	conn, err := net.Dial("tcp", r.otad.Addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /api/v1/admin/artifacts?filename=cut.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", adminToken, 50<<20)
	chunk := make([]byte, 1<<20)
	for range 5 {
		if _, err := conn.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the upload's temporary file exists, then hang up.
	deadline := time.Now().Add(10 * time.Second)
	for len(r.stored(t)) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(r.stored(t)) == 0 {
		t.Fatal("the upload never reached the store")
	}
	_ = conn.Close()
	deadline = time.Now().Add(10 * time.Second)
	for len(r.stored(t)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	r.assertEmpty(t, before)
	logged := func() bool {
		return strings.Contains(r.otad.Log(), `"status":499`) || strings.Contains(r.otad.Log(), "UPLOAD_INCOMPLETE")
	}
	for deadline := time.Now().Add(5 * time.Second); !logged() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !logged() {
		t.Errorf("the aborted upload was not logged as the client's (499 or UPLOAD_INCOMPLETE):\n%s", r.otad.LogTail(10))
	}
	if strings.Contains(r.otad.Log(), `"status":500`) {
		t.Errorf("the aborted upload was a 500:\n%s", r.otad.LogTail(10))
	}
}
