package rest

import (
	"net/http"
	"testing"
)

// TestRangeSetWithASatisfiableRangeIsNotRefused: RFC 9110 14.1.1 — a
// range set is satisfiable when any of its ranges is; docs/ERRORS.md's
// RANGE_NOT_SATISFIABLE is a Range "that starts past the end of the image
// or asks for no byte (bytes=-0)". "bytes=0-9,-0" asks for ten bytes, yet
// zeroSuffixRange (download.go) refuses the whole set with 416 as soon as
// any one of its ranges is a zero suffix.
func TestRangeSetWithASatisfiableRangeIsNotRefused(t *testing.T) {
	r := newDownloadRig(t)
	rec := r.do(t, http.MethodGet, devicePath(hostedFwID), tokenDev1, map[string]string{"Range": "bytes=0-9,-0"})
	if rec.Code == http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("bytes=0-9,-0: 416 (%s), want the satisfiable first ten bytes (206)", rec.Body)
	}
}
