package artifacts

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ai-device/ota/tests/testenv"
)

// fixture is one of adapters/artifactfile's committed hostile files.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "adapters", "artifactfile", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUnreadableFilesAreRefusedWithTheReason: otad, the built binary,
// answers every file that claims a format it is not in 422
// ARTIFACT_UNREADABLE with the reason in the message — by a raw body or a
// multipart form alike — and keeps nothing of it.
func TestUnreadableFilesAreRefusedWithTheReason(t *testing.T) {
	r := startMemory(t, nil)
	for _, c := range []struct{ file, reason string }{
		{"truncated.mender", "not a readable mender file: truncated: the file ends inside header.tar.gz"},
		{"header-bomb.mender", "the header is larger than 16777216 bytes once decompressed"},
		{"not-a-tar.mender", "not a readable mender file: not a tar archive"},
		{"malformed-sw-description.swu", `not a readable swu file: sw-description: line 4: expected '=' or ':' after "hardware-compatibility"`},
		{"wrong-magic.swu", "not a readable swu file: not a cpio newc or crc archive"},
		{"huge-sw-description.swu", "sw-description is 4294967295 bytes, more than 1048576"},
	} {
		t.Run(c.file, func(t *testing.T) {
			body := fixture(t, c.file)
			for how, send := range map[string]func() answer{
				"raw":       func() answer { return r.uploadRaw(t, "?filename="+c.file, body, nil) },
				"multipart": func() answer { return r.uploadMultipart(t, nil, c.file, body) },
			} {
				before := tempFiles()
				a := send()
				msg, _ := a.body["error"].(map[string]any)["message"].(string)
				if a.status != http.StatusUnprocessableEntity || a.code() != "ARTIFACT_UNREADABLE" || !strings.Contains(msg, c.reason) {
					t.Errorf("%s: %d %s, want 422 ARTIFACT_UNREADABLE with %q", how, a.status, a.raw, c.reason)
				}
				r.assertEmpty(t, before)
			}
		})
	}
}

// TestUploadReadsWhatTheFileSays: a real .mender file (Debian's
// mender-artifact) and a real .swu file (GNU cpio, as SWUpdate's
// documentation builds one) come back with what they say about
// themselves, through otad's API.
func TestUploadReadsWhatTheFileSays(t *testing.T) {
	for _, tool := range []string{"mender-artifact", "cpio"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skip(t, tool, tool+" is not installed (apt-get install -y "+tool+"): the test builds real files with it")
		}
	}
	r := startMemory(t, nil)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	payload := write("rootfs.img", strings.Repeat("root file system ", 1000))
	out := filepath.Join(dir, "cam.mender")
	if b, err := exec.Command("mender-artifact", "write", "rootfs-image", "-t", "cam-x1", "-t", "cam-x2", "-n", "cam-5.0.0",
		"--software-version", "5.0.0", "-f", payload, "-o", out, "--no-progress").CombinedOutput(); err != nil {
		t.Fatalf("mender-artifact: %v\n%s", err, b)
	}
	mender, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	a := r.uploadRaw(t, "?filename=cam-5.0.0.mender", mender, nil)
	meta, _ := a.body["meta"].(map[string]any)
	if a.status != http.StatusCreated || a.body["format"] != "mender" || meta["artifact_name"] != "cam-5.0.0" ||
		!reflect.DeepEqual(meta["device_types"], []any{"cam-x1", "cam-x2"}) || meta["payload_type"] != "rootfs-image" ||
		meta["version"] != "5.0.0" {
		t.Errorf(".mender upload: %d %s", a.status, a.raw)
	}

	write("sw-description", "software =\n{\n\tversion = \"2.0.1\";\n\thardware-compatibility = [ \"1.0\", \"revC\" ];\n\tdescription = \"speaker image\";\n};\n")
	cmd := exec.Command("cpio", "--quiet", "-o", "-H", "crc")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader("sw-description\nrootfs.img\n")
	swu, err := cmd.Output()
	if err != nil {
		t.Fatalf("cpio: %v", err)
	}
	a = r.uploadMultipart(t, nil, "speaker-2.0.1.swu", swu)
	meta, _ = a.body["meta"].(map[string]any)
	if a.status != http.StatusCreated || a.body["format"] != "swu" || meta["version"] != "2.0.1" ||
		!reflect.DeepEqual(meta["device_types"], []any{"1.0", "revC"}) || meta["description"] != "speaker image" {
		t.Errorf(".swu upload: %d %s", a.status, a.raw)
	}
}
