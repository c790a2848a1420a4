package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ai-device/ota/bootstrap"
)

// TestConsoleCookiesAreSecureWhateverTheSchemesCase: docs/DOMAIN.md S2
// says the console's cookies are Secure "over TLS or when OTA_PUBLIC_URL
// is https". A URL's scheme is case-insensitive (RFC 3986 3.1), and the
// configuration accepts HTTPS://… as an https URL; behind a proxy that
// terminates TLS without X-Forwarded-Proto, the cookies must still be
// Secure, or a browser sends the session over plain http.
func TestConsoleCookiesAreSecureWhateverTheSchemesCase(t *testing.T) {
	for _, public := range []string{"https://ota.example.com", "HTTPS://ota.example.com"} {
		env := edgeEnv()
		env["OTA_PUBLIC_URL"] = public
		cfg, err := bootstrap.LoadConfig(func(k string) string { return env[k] }, true)
		if err != nil {
			t.Fatalf("%s: %v", public, err)
		}
		app, cleanup, err := initMemoryApp(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		app.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/console/sign-in", nil))
		cleanup()
		cookies := rec.Result().Cookies()
		if len(cookies) == 0 {
			t.Fatalf("%s: the sign-in page set no cookie (%d)", public, rec.Code)
		}
		for _, c := range cookies {
			if !c.Secure {
				t.Errorf("OTA_PUBLIC_URL=%s: cookie %s is not Secure", public, c.Name)
			}
		}
	}
}
