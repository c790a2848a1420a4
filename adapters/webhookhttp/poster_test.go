package webhookhttp_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ai-device/ota/adapters/webhookhttp"
)

// TestPosterRefusesPrivateDestinations posts to a receiver on loopback:
// refused at connect time, naming the rule and not the URL, unless
// private destinations are allowed; a redirect is not followed.
func TestPosterRefusesPrivateDestinations(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	url := srv.URL + "/hook?token=sekrit"

	status, err := webhookhttp.NewPoster(webhookhttp.Config{}).Post(t.Context(), url, nil, []byte("{}"))
	if !errors.Is(err, webhookhttp.ErrDestinationRefused) || status != 0 || hits.Load() != 0 {
		t.Fatalf("loopback, not allowed: %d, %v, %d hits; want ErrDestinationRefused and no request", status, err, hits.Load())
	}
	if strings.Contains(err.Error(), "sekrit") {
		t.Fatalf("the error repeats the URL: %v", err)
	}
	// A name resolving to loopback is judged by the address dialled.
	named := strings.Replace(url, "127.0.0.1", "localhost", 1)
	if _, err := webhookhttp.NewPoster(webhookhttp.Config{}).Post(t.Context(), named, nil, nil); !errors.Is(err, webhookhttp.ErrDestinationRefused) {
		t.Fatalf("localhost, not allowed: %v", err)
	}

	allowed := webhookhttp.NewPoster(webhookhttp.Config{AllowPrivate: true})
	if status, err := allowed.Post(t.Context(), url, map[string]string{"X-A": "b"}, []byte("{}")); err != nil || status != http.StatusNoContent || hits.Load() != 1 {
		t.Fatalf("loopback, allowed: %d, %v, %d hits", status, err, hits.Load())
	}
	if status, err := allowed.Post(t.Context(), srv.URL+"/moved", nil, nil); err != nil || status != http.StatusFound || hits.Load() != 2 {
		t.Fatalf("redirect: %d, %v, %d hits; want the 302 itself", status, err, hits.Load())
	}
}
