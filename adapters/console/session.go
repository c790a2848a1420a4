package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ai-device/ota/ports"
)

// Cookie names. The session cookie is scoped to the console's path, so the
// JSON API never sees it (the API authenticates with a bearer header only).
const (
	sessionCookie = "ota_console"
	signInCookie  = "ota_console_signin"
)

// sessions issues and checks signed session cookies.
//
// A cookie holds no secret: it is an expiry and a random nonce, signed with
// HMAC-SHA256 under a key derived from the admin token. Any replica that
// shares the admin token accepts it (no session store, no sticky load
// balancing), rotating the admin token ends every session, and a stolen
// cookie never reveals the token. Each session's CSRF token is the HMAC of
// its nonce under the same key, so forms need no server-side state either.
// Signing out forgets the cookie in the browser and, on the replica that
// served the sign-out, refuses it until it expires.
type sessions struct {
	key   []byte // nil when no admin token is configured: nobody signs in
	ttl   time.Duration
	clock ports.Clock

	mu      sync.Mutex
	revoked map[string]time.Time // signed-out nonces → their expiry
}

func newSessions(adminToken string, ttl time.Duration, clock ports.Clock) *sessions {
	s := &sessions{ttl: ttl, clock: clock, revoked: map[string]time.Time{}}
	if adminToken != "" {
		m := hmac.New(sha256.New, []byte(adminToken))
		m.Write([]byte("ota console session key v1"))
		s.key = m.Sum(nil)
	}
	return s
}

// session is a signed-in operator's session.
type session struct {
	payload []byte // 8 bytes of expiry (Unix seconds) + 16 random bytes
	expires time.Time
}

const nonceLen = 16

var b64 = base64.RawURLEncoding

func (s *sessions) mac(label string, payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(label))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)
}

// start makes a new session and sets its cookie.
func (s *sessions) start(w http.ResponseWriter, r *http.Request) (session, error) {
	expires := s.clock.Now().Add(s.ttl).Truncate(time.Second)
	payload := make([]byte, 8+nonceLen)
	binary.BigEndian.PutUint64(payload, uint64(expires.Unix()))
	if _, err := rand.Read(payload[8:]); err != nil {
		return session{}, err
	}
	value := b64.EncodeToString(payload) + "." + b64.EncodeToString(s.mac("session", payload))
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: value, Path: Prefix + "/", Expires: expires, MaxAge: int(s.ttl / time.Second),
		HttpOnly: true, Secure: overTLS(r), SameSite: http.SameSiteStrictMode,
	})
	return session{payload: payload, expires: expires}, nil
}

// read returns the request's session when its cookie is genuine, unexpired
// and not signed out.
func (s *sessions) read(r *http.Request) (session, bool) {
	if s.key == nil {
		return session{}, false
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false
	}
	p, m, ok := strings.Cut(c.Value, ".")
	if !ok {
		return session{}, false
	}
	payload, err1 := b64.DecodeString(p)
	sig, err2 := b64.DecodeString(m)
	if err1 != nil || err2 != nil || len(payload) != 8+nonceLen {
		return session{}, false
	}
	if !hmac.Equal(sig, s.mac("session", payload)) {
		return session{}, false
	}
	expires := time.Unix(int64(binary.BigEndian.Uint64(payload)), 0)
	now := s.clock.Now()
	if !now.Before(expires) {
		return session{}, false
	}
	s.mu.Lock()
	_, gone := s.revoked[string(payload)]
	s.mu.Unlock()
	if gone {
		return session{}, false
	}
	return session{payload: payload, expires: expires}, true
}

// end signs a session out: the browser drops the cookie, and this replica
// refuses it from now on.
func (s *sessions) end(w http.ResponseWriter, r *http.Request, sess session) {
	now := s.clock.Now()
	s.mu.Lock()
	for k, exp := range s.revoked {
		if !now.Before(exp) {
			delete(s.revoked, k)
		}
	}
	s.revoked[string(sess.payload)] = sess.expires
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: "", Path: Prefix + "/", MaxAge: -1,
		HttpOnly: true, Secure: overTLS(r), SameSite: http.SameSiteStrictMode,
	})
}

// csrf is the token a session's forms carry.
func (s *sessions) csrf(sess session) string {
	return b64.EncodeToString(s.mac("csrf", sess.payload))
}

// validCSRF compares a form's token with the session's in constant time.
func (s *sessions) validCSRF(sess session, token string) bool {
	got, err := b64.DecodeString(token)
	return err == nil && hmac.Equal(got, s.mac("csrf", sess.payload))
}

// signInToken sets the short-lived cookie the sign-in form must echo (a
// double-submit token: a page on another site can neither read the cookie
// nor, with SameSite=Strict, send it).
func (s *sessions) signInToken(w http.ResponseWriter, r *http.Request) (string, error) {
	b := make([]byte, nonceLen)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := b64.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{
		Name: signInCookie, Value: token, Path: Prefix + "/sign-in", MaxAge: 3600,
		HttpOnly: true, Secure: overTLS(r), SameSite: http.SameSiteStrictMode,
	})
	return token, nil
}

// overTLS reports whether the browser reached us over HTTPS: directly, or
// through a proxy that terminated TLS and says so. Trusting the header can
// only make a cookie stricter (a Secure cookie is never sent back over
// plain HTTP), so a forged header harms no one but its sender.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// validSignInToken checks the sign-in form's token against its cookie, in
// constant time.
func validSignInToken(r *http.Request, token string) bool {
	c, err := r.Cookie(signInCookie)
	if err != nil || c.Value == "" || token == "" {
		return false
	}
	return hmac.Equal([]byte(c.Value), []byte(token))
}
