package postgres_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestCheckHTTPAllocations holds a device's check, through the whole HTTP
// edge and the serving wiring, to the allocations it made when they were
// last cut (docs/BENCHMARKS.md, BenchmarkCheckHTTP), with a little slack
// for the runtime: middleware applied per request, a header key
// canonicalised per request or a scan destination per column each put
// several back. Allocation counts do not depend on the machine's load; the
// budgets include the test's own request and recorder (about 16), and
// raceAllocs more under the race detector (make test), which allocates a
// few more per check.
func TestCheckHTTPAllocations(t *testing.T) {
	budgets := []struct {
		store, kind string
		max         float64
	}{
		{"memory", "noupdate", 60},
		{"memory", "reuse", 73},
		{"postgres", "noupdate", 93},
		{"postgres", "reuse", 119},
	}
	fleets := map[string]*benchFleet{}
	for _, b := range budgets {
		if fleets[b.store] == nil {
			fleets[b.store] = newBenchFleet(t, b.store) // cleaned up when the whole test ends
		}
		t.Run(b.store+"/"+b.kind, func(t *testing.T) {
			f := fleets[b.store]
			devs := f.reuse
			if b.kind == "noupdate" {
				devs = f.noUpd
			}
			body := []byte(`{"model":"` + devs[0].Device.Model() + `","current_version":"1.0.0"}`)
			i := 0
			got := testing.AllocsPerRun(200, func() {
				c := devs[i%len(devs)]
				i++
				req := httptest.NewRequest(http.MethodPost, "/api/v1/devices/"+c.Device.ID().String()+"/ota/check", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+c.Token)
				rec := httptest.NewRecorder()
				f.handler.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					t.Fatalf("%d %s", rec.Code, rec.Body)
				}
			})
			t.Logf("%s/%s: %.0f allocations per check", b.store, b.kind, got)
			if max := b.max + raceAllocs; got > max {
				t.Errorf("%s/%s: %.0f allocations per check, budget %.0f", b.store, b.kind, got, max)
			}
		})
	}
}
