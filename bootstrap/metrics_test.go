package bootstrap_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/adapters/httpedge"
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

// TestInFlightCountsRequestsBeingServed: a request counts from the edge's
// start until its answer, in InFlight (which the webhook delivery reads)
// and in the ota_http_requests_in_flight gauge.
func TestInFlightCountsRequestsBeingServed(t *testing.T) {
	m := bootstrap.NewMetrics()
	edge := httpedge.New(m, nil)
	e := echo.New()
	e.Pre(edge.Serve)
	release, once := make(chan struct{}), sync.Once{}
	free := func() { once.Do(func() { close(release) }) }
	edge.Add(e, http.MethodGet, "/slow", func(c echo.Context) error { <-release; return c.NoContent(http.StatusNoContent) })
	srv := httptest.NewServer(e)
	defer srv.Close()
	defer free() // before Close, which waits for the handlers, on a failure too
	gauge := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		for line := range strings.Lines(rec.Body.String()) {
			if strings.HasPrefix(line, "ota_http_requests_in_flight ") {
				return strings.TrimSpace(line)
			}
		}
		return "no ota_http_requests_in_flight"
	}

	answered := make(chan error, 2)
	for range 2 {
		go func() {
			res, err := http.Get(srv.URL + "/slow")
			if err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			answered <- err
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); m.InFlight() != 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d in flight while two requests wait; want 2", m.InFlight())
		}
	}
	if g := gauge(); g != "ota_http_requests_in_flight 2" {
		t.Fatalf("the gauge: %q", g)
	}
	free()
	for range 2 {
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); m.InFlight() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d in flight after both were answered", m.InFlight())
		}
	}
	if res, err := http.Get(srv.URL + "/nowhere"); err != nil || res.StatusCode != http.StatusNotFound {
		t.Fatalf("an unmatched path: %v %v", res, err)
	}
	if n := m.InFlight(); n != 0 {
		t.Fatalf("%d in flight after a 404; want 0", n)
	}
	if s := m.Served(); s <= 0 {
		t.Fatalf("served %v after three requests; want their time", s)
	}
	if n := m.Finished(); n != 3 {
		t.Fatalf("%d finished after three requests; want 3", n)
	}
	before := m.Served()
	m.ObserveRequest(http.MethodGet, "/x", 200, time.Second)
	if got := m.Served() - before; got != time.Second {
		t.Fatalf("a request of 1 s added %v to the time served", got)
	}
	if n := m.Finished(); n != 4 {
		t.Fatalf("%d finished after a fourth request; want 4", n)
	}
}
