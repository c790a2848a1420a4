package httpedge

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
)

// An audit record names the connection's peer without its port, and the
// peer as given when it carries no port; a forwarded-for header is the
// client's word and is not believed.
func TestActorOfNamesThePeer(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.10:51234":  "192.0.2.10",
		"[2001:db8::1]:443": "2001:db8::1",
		"@unix-socket":      "@unix-socket",
	} {
		r := httptest.NewRequest(http.MethodPost, "/api/v1/admin/users", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "203.0.113.99")
		if got := SourceAddress(r); got != want {
			t.Errorf("SourceAddress(%q) = %q, want %q", remote, got, want)
		}
		a, err := ActorOf(r, domain.RootPrincipal())
		if err != nil {
			t.Fatal(err)
		}
		rec, err := a.Record(time.Unix(0, 0), domain.AuditUserRemove, "alice", nil, nil)
		if err != nil || rec.Source() != want {
			t.Errorf("record from %q: %v, source %q, want %q", remote, err, rec.Source(), want)
		}
	}
}

// A group's routes are mounted under its prefix, behind its middleware
// and then their own, outermost first.
func TestGroupPrefixesAndOrdersMiddleware(t *testing.T) {
	ed, e := New(nil, nil), echo.New()
	var order []string
	mark := func(name string) echo.MiddlewareFunc {
		return func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error { order = append(order, name); return next(c) }
		}
	}
	add := ed.Group(e, "/api/v1/admin", mark("group"))
	add(http.MethodGet, "/things", func(c echo.Context) error { return c.String(http.StatusOK, "ok") }, mark("route"))
	for path, code := range map[string]int{"/api/v1/admin/things": http.StatusOK, "/things": http.StatusNotFound} {
		order = nil
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != code {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, code)
		}
		if code == http.StatusOK && strings.Join(order, ",") != "group,route" {
			t.Errorf("GET %s ran middleware %v, want group then route", path, order)
		}
	}
}
