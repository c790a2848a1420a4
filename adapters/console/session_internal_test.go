package console

import (
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// accountNamed is the account user ("": none, the admin token's session).
func accountNamed(user string) domain.AccountRef {
	if user == "" {
		return domain.AccountRef{}
	}
	return domain.NewAccountRef(user, time.Date(2026, 12, 4, 12, 0, 0, 123456000, time.UTC))
}

// cookieOf starts a session of user on s and returns a request carrying
// its cookie.
func cookieOf(t *testing.T, s *sessions, user string) *http.Request {
	t.Helper()
	w := httptest.NewRecorder()
	if _, err := s.start(w, httptest.NewRequest(http.MethodPost, "/console/sign-in", nil), accountNamed(user)); err != nil {
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
	if s, ok := b.read(cookieOf(t, a, "alice")); !ok || !s.account.Equal(accountNamed("alice")) {
		t.Errorf("a replica sharing the session key refuses alice's session: %v %+v", ok, s.account)
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
	if _, err := s.start(w, httptest.NewRequest(http.MethodPost, "/console/sign-in", nil), accountNamed("alice")); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.Result().Cookies() {
		if !c.Secure || !c.HttpOnly {
			t.Errorf("cookie %s: Secure %v HttpOnly %v", c.Name, c.Secure, c.HttpOnly)
		}
	}
}

// A session names its account by name and creation time (the MAC label
// "session v2"); a cookie of the layout before, which named the user
// alone, is no session: its holder signs in once more.
func TestSessionOfTheFormerLayoutIsRefused(t *testing.T) {
	clk := fixedClock{time.Unix(1_800_000_000, 0)}
	s := newSessions("admin-token-a-0123456789", "shared session key 0123456789abcdef", false, time.Hour, clk)
	for _, user := range []string{"alice", "a-longer-name-of-a-user", ""} {
		payload := make([]byte, 8+8+nonceLen, 8+8+nonceLen+len(user))
		binary.BigEndian.PutUint64(payload, uint64(clk.t.Add(time.Hour).Unix()))
		binary.BigEndian.PutUint64(payload[8:], uint64(clk.t.Unix()))
		payload = append(payload, user...)
		r := httptest.NewRequest(http.MethodGet, "/console/", nil)
		r.AddCookie(&http.Cookie{Name: sessionCookie,
			Value: b64.EncodeToString(payload) + "." + b64.EncodeToString(s.mac(s.key(user), "session", payload))})
		if got, ok := s.read(r); ok {
			t.Errorf("a session of the former layout for %q is read as %+v", user, got.account)
		}
	}
	if got, ok := s.read(cookieOf(t, s, "alice")); !ok || !got.account.Equal(accountNamed("alice")) {
		t.Errorf("a session of the current layout: %+v %v", got.account, ok)
	}
}
