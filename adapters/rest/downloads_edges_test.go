package rest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// TestUnsatisfiableRangeIsAnErrorAnswer: the OpenAPI document says every
// response carries Cache-Control: no-store and every error is
// {"error": {"code", "message", "request_id"}} (docs/ERRORS.md: "Every
// error answer has the same shape, whatever the endpoint"). A download's
// 416 (a range past the end) is an error answer like any other, on the
// device route and on a signed link.
func TestUnsatisfiableRangeIsAnErrorAnswer(t *testing.T) {
	r := newDownloadRig(t)
	for name, path := range map[string]string{"device route": devicePath(hostedFwID), "signed link": r.link(t, hostedFwID, dev1)} {
		token := tokenDev1
		if name == "signed link" {
			token = ""
		}
		rec := r.do(t, http.MethodGet, path, token, map[string]string{"Range": "bytes=200000-"})
		if rec.Code != http.StatusRequestedRangeNotSatisfiable {
			t.Fatalf("%s: %d, want 416", name, rec.Code)
		}
		if got := rec.Header().Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: 416 Cache-Control = %q, want no-store (every response carries it)", name, got)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: 416 Content-Type = %q, body %q; want the JSON error body", name, ct, rec.Body)
		}
	}
}

// TestZeroSuffixRangeIsUnsatisfiable: "bytes=-0" asks for the last zero
// bytes, which RFC 9110 (14.1.1: a suffix-range is satisfiable only with a
// non-zero suffix-length) calls unsatisfiable: 416, as the document says
// for a range with nothing to send. The route answers 206 with an empty
// body and a Content-Range whose last byte precedes its first.
func TestZeroSuffixRangeIsUnsatisfiable(t *testing.T) {
	r := newDownloadRig(t)
	rec := r.do(t, http.MethodGet, devicePath(hostedFwID), tokenDev1, map[string]string{"Range": "bytes=-0"})
	if rec.Code != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("bytes=-0: %d Content-Range %q, %d bytes; want 416", rec.Code, rec.Header().Get("Content-Range"), rec.Body.Len())
	}
}

// TestMultiRangeAnswerMatchesTheDocument: the document's 206
// (ArtifactPart) is application/octet-stream with a Content-Range header;
// a Range of two parts is answered multipart/byteranges, a body the
// document does not describe.
func TestMultiRangeAnswerMatchesTheDocument(t *testing.T) {
	doc := loadSpec(t)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	r := newDownloadRig(t)
	hdr := map[string]string{"Range": "bytes=0-9,20-29"}
	rec := r.do(t, http.MethodGet, devicePath(hostedFwID), tokenDev1, hdr)
	if rec.Code != http.StatusPartialContent {
		t.Fatalf("two ranges: %d", rec.Code)
	}
	validateAgainstSpec(t, router, req{method: http.MethodGet, path: devicePath(hostedFwID), token: tokenDev1, header: hdr}, rec)
}

// A precondition that does not hold (If-Match another tag) is answered as
// every error is: 412 PRECONDITION_FAILED, the JSON body, no-store.
func TestFailedPreconditionIsAnErrorAnswer(t *testing.T) {
	r := newDownloadRig(t)
	rec := r.do(t, http.MethodGet, devicePath(hostedFwID), tokenDev1, map[string]string{"If-Match": `"not-the-image"`})
	if rec.Code != http.StatusPreconditionFailed || rec.Header().Get("Cache-Control") != "no-store" ||
		rec.Header().Get("Content-Type") != "application/json" || !strings.Contains(rec.Body.String(), `"PRECONDITION_FAILED"`) {
		t.Fatalf("If-Match of another tag: %d %q %q %s", rec.Code, rec.Header().Get("Cache-Control"), rec.Header().Get("Content-Type"), rec.Body)
	}
}
