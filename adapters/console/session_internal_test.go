package console

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// cookieOf starts a session of user on s and returns a request carrying
// its cookie.
func cookieOf(t *testing.T, s *sessions, user string) *http.Request {
	t.Helper()
	w := httptest.NewRecorder()
	if _, err := s.start(w, httptest.NewRequest(http.MethodPost, "/console/sign-in", nil), user); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/console/", nil)
	for _, c := range w.Result().Cookies() {
		r.AddCookie(c)
	}
	return r
}

// Users' sessions are signed under OTA_CONSOLE_SESSION_KEY, so replicas
// sharing it accept them whatever their admin tokens; the admin token's
// sessions are signed under the admin token, so rotating it ends them.
// With no session key, users' sessions are signed under the admin token's
// derived key and end with it too.
func TestSessionKeys(t *testing.T) {
	clk := fixedClock{time.Unix(1_800_000_000, 0)}
	a := newSessions("admin-token-a-0123456789", "shared session key 0123456789abcdef", false, time.Hour, clk)
	b := newSessions("admin-token-b-0123456789", "shared session key 0123456789abcdef", false, time.Hour, clk)
	if s, ok := b.read(cookieOf(t, a, "alice")); !ok || s.user != "alice" {
		t.Errorf("a replica sharing the session key refuses alice's session: %v %q", ok, s.user)
	}
	if _, ok := b.read(cookieOf(t, a, "")); ok {
		t.Error("a replica with another admin token accepts the admin token's session")
	}
	noKey := newSessions("admin-token-a-0123456789", "", false, time.Hour, clk)
	rotated := newSessions("admin-token-c-0123456789", "", false, time.Hour, clk)
	if _, ok := noKey.read(cookieOf(t, noKey, "alice")); !ok {
		t.Error("a session key derived from the admin token signs no session")
	}
	if _, ok := rotated.read(cookieOf(t, noKey, "alice")); ok {
		t.Error("a derived session key survives the admin token's rotation")
	}
	if _, ok := a.read(cookieOf(t, noKey, "alice")); ok {
		t.Error("a session signed under the derived key is accepted under OTA_CONSOLE_SESSION_KEY")
	}
}

// A cookie is Secure when the public URL is https, even over plain HTTP
// behind a proxy that does not say it terminated TLS.
func TestSecureCookiesFromPublicURL(t *testing.T) {
	s := newSessions("admin-token-a-0123456789", "", true, time.Hour, fixedClock{time.Unix(1_800_000_000, 0)})
	w := httptest.NewRecorder()
	if _, err := s.start(w, httptest.NewRequest(http.MethodPost, "/console/sign-in", nil), "alice"); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.Result().Cookies() {
		if !c.Secure || !c.HttpOnly {
			t.Errorf("cookie %s: Secure %v HttpOnly %v", c.Name, c.Secure, c.HttpOnly)
		}
	}
}
