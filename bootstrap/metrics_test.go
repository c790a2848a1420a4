package bootstrap_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/bootstrap"
)

// ObserveRequest caches each label set's histogram: repeated observations
// must still land in their own label set, counted once each.
func TestObserveRequestCountsEachLabelSet(t *testing.T) {
	m := bootstrap.NewMetrics()
	for range 3 {
		m.ObserveRequest(http.MethodPost, "/check", 200, time.Millisecond)
	}
	m.ObserveRequest(http.MethodPost, "/check", 401, time.Millisecond)
	m.ObserveRequest(http.MethodGet, "/check", 200, time.Millisecond)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`ota_http_request_duration_seconds_count{code="200",method="POST",route="/check"} 3`,
		`ota_http_request_duration_seconds_count{code="401",method="POST",route="/check"} 1`,
		`ota_http_request_duration_seconds_count{code="200",method="GET",route="/check"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %s in:\n%s", want, body)
		}
	}
}
