package rest

import (
	"net/http"
	"strings"
	"testing"
)

// A multipart upload's fields after its file part were read by nobody: a
// "sha256" sent after the file (curl -F file=@x -F sha256=…) was dropped
// silently and the upload stored unchecked; a misspelt field after it was
// not refused either. The file is streamed, so a field after it comes too
// late to check it against: it is refused, VALIDATION_FAILED, saying it
// must come first (ERRORS.md: "a multipart field other than file and
// sha256", and one after the file).
func TestMultipartFieldsAfterTheFileAreNotDropped(t *testing.T) {
	a := APIPrefix + "/admin/artifacts"
	filePart := "--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"fw.bin\"\r\nContent-Type: application/octet-stream\r\n\r\nxyz\r\n"
	for _, c := range []struct{ name, after string }{
		{"sha256 after the file", "--XX\r\nContent-Disposition: form-data; name=\"sha256\"\r\n\r\n" + "ABC" + "\r\n--XX--\r\n"},
		{"unknown field after the file", "--XX\r\nContent-Disposition: form-data; name=\"sha265\"\r\n\r\n" + "ABC" + "\r\n--XX--\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			rec := h.do(t, req{method: http.MethodPost, path: a, token: testAdminToken, body: filePart + c.after,
				contentType: "multipart/form-data; boundary=XX"})
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"VALIDATION_FAILED"`) ||
				!strings.Contains(rec.Body.String(), "before the file part") {
				t.Fatalf("status %d %s, the use case handed sha256 %q: want 400 VALIDATION_FAILED, the field must come before the file",
					rec.Code, rec.Body, h.artifacts.upload.SHA256)
			}
		})
	}
}
