package artifacts

import (
	"bytes"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/ai-device/ota/tests/testenv"
)

// mountSmallDisk mounts a 2 MiB tmpfs on a fresh directory and unmounts it
// when t ends (after the otad started later has stopped: cleanups run last
// registered first). Without the right to mount, t is skipped — or fails
// where services are required.
func mountSmallDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		testenv.Skip(t, "mount", "cannot mount a tmpfs (root and mount(8) needed): "+strings.TrimSpace(string(out))+": "+err.Error())
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// An upload larger than the free space of a file:// store is 503
// SERVICE_BUSY (the documented choice: the remedy is the operator's, and a
// retry then succeeds) with a message naming the store, not a 500; it
// leaves no object, no temporary file and no row; and the service needs
// nothing done to it to take the next upload that fits.
func TestFullDisk(t *testing.T) {
	t.Parallel()
	dir := mountSmallDisk(t)
	r := startMemory(t, map[string]string{"OTA_ARTIFACT_STORE": "file://" + dir})
	r.dir = dir
	big := bytes.Repeat([]byte("firmware"), 4<<20/8) // 4 MiB onto a 2 MiB disk
	for _, c := range []struct {
		name string
		send func() answer
	}{
		{"raw", func() answer { return r.uploadRaw(t, "?filename=big.bin", big, nil) }},
		{"multipart", func() answer { return r.uploadMultipart(t, nil, "big.bin", big) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := tempFiles()
			a := c.send()
			if a.status != http.StatusServiceUnavailable || a.code() != "SERVICE_BUSY" || a.header.Get("Retry-After") == "" {
				t.Fatalf("upload onto a full disk = %d %s (Retry-After %q), want 503 SERVICE_BUSY with Retry-After",
					a.status, a.raw, a.header.Get("Retry-After"))
			}
			msg, _ := a.body["error"].(map[string]any)["message"].(string)
			if !strings.Contains(msg, "artifact store") || !strings.Contains(msg, "full") {
				t.Errorf("message %q does not say the artifact store is full", msg)
			}
			r.assertEmpty(t, before)
		})
	}
	if strings.Contains(r.otad.Log(), `"status":500`) {
		t.Errorf("an upload onto the full disk was logged as a 500:\n%s", r.otad.LogTail(10))
	}
	small := bytes.Repeat([]byte("small image "), 50_000) // 600 kB: fits
	if a := r.uploadRaw(t, "?filename=small.bin", small, nil); a.status != http.StatusCreated || a.body["sha256"] != sum(small) {
		t.Fatalf("an upload that fits, after the full disk = %d %s, want 201", a.status, a.raw)
	}
	if files := r.stored(t); len(files) != 1 {
		t.Errorf("the store holds %v, want the small upload's object only", files)
	}
}
