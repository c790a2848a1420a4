package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ai-device/ota/domain"
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
// A cookie holds no secret: it is its expiry, its issue time, a random
// nonce and the signed-in account — its creation time and username, which
// together name the very account whose credentials were checked
// (domain.AccountRef), none for the admin token — signed with
// HMAC-SHA256. The admin token's sessions are signed under a key derived
// from the admin token, so rotating it ends them; users' sessions under
// the session key (OTA_CONSOLE_SESSION_KEY, else derived from the admin
// token under another label). Any replica that shares the keys accepts a
// cookie (no session store, no sticky load balancing), and a stolen cookie
// never reveals a credential. A user's cookie only names their account:
// every request re-reads it (Console.readSession), so a removed user's
// session ends at once, and stays ended when another account is created
// under the name, and the role is the current one. Each session's
// CSRF token is the HMAC of its payload under the same key, so forms need
// no server-side state either. Signing out forgets the cookie in the
// browser and, on the replica that served the sign-out, refuses it until
// it expires.
type sessions struct {
	rootKey []byte // nil when no admin token is configured: no token sign-in
	userKey []byte // nil when neither key is configured: no password sign-in
	secure  bool   // the public URL is https: every cookie is Secure
	ttl     time.Duration
	clock   ports.Clock

	mu      sync.Mutex
	revoked map[string]time.Time // signed-out payloads → their expiry
}

func newSessions(adminToken, sessionKey string, secure bool, ttl time.Duration, clock ports.Clock) *sessions {
	s := &sessions{ttl: ttl, clock: clock, secure: secure, revoked: map[string]time.Time{}}
	derive := func(secret, label string) []byte {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(label))
		return m.Sum(nil)
	}
	if adminToken != "" {
		s.rootKey = derive(adminToken, "ota console session key v1")
		s.userKey = derive(adminToken, "ota console user session key v1")
	}
	if sessionKey != "" {
		s.userKey = derive(sessionKey, "ota console user session key v1")
	}
	return s
}

// session is a signed-in operator's session.
type session struct {
	// payload is the expiry and the issue time (Unix seconds, 8 bytes
	// each), 16 random bytes, the account's creation time (Unix
	// microseconds, 8 bytes; 0 for the admin token) and its username.
	payload []byte
	expires time.Time
	account domain.AccountRef // zero: the admin token's session
	// who is the principal acting, as re-read for this request
	// (Console.readSession).
	who domain.Principal
	// actor is who acting in this request (its id and address): what
	// every change the console makes takes, for its audit record.
	actor domain.Actor
}

const (
	nonceLen   = 16
	payloadLen = 8 + 8 + nonceLen + 8 // before the username
	maxUserLen = 64
	// sessionLabel is what a session's MAC is made under. It names the
	// payload's layout: a cookie of the layout before the account's
	// creation time ("session") is no session, and its holder signs in
	// again.
	sessionLabel = "session v2"
)

var b64 = base64.RawURLEncoding

// key is the key that signs a session of user ("": the admin token's).
func (s *sessions) key(user string) []byte {
	if user == "" {
		return s.rootKey
	}
	return s.userKey
}

func (s *sessions) mac(key []byte, label string, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)
}

// start makes a new session for the account whose credentials were just
// checked (the zero AccountRef: the admin token) and sets its cookie.
func (s *sessions) start(w http.ResponseWriter, r *http.Request, account domain.AccountRef) (session, error) {
	user := account.Name()
	key := s.key(user)
	if key == nil || len(user) > maxUserLen {
		return session{}, errors.New("console: no key signs this session")
	}
	now := s.clock.Now()
	expires := now.Add(s.ttl).Truncate(time.Second)
	payload := make([]byte, payloadLen, payloadLen+len(user))
	binary.BigEndian.PutUint64(payload, uint64(expires.Unix()))
	binary.BigEndian.PutUint64(payload[8:], uint64(now.Unix()))
	if _, err := rand.Read(payload[16 : 16+nonceLen]); err != nil {
		return session{}, err
	}
	if user != "" {
		binary.BigEndian.PutUint64(payload[16+nonceLen:], uint64(account.CreatedAt().UnixMicro()))
	}
	payload = append(payload, user...)
	value := b64.EncodeToString(payload) + "." + b64.EncodeToString(s.mac(key, sessionLabel, payload))
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: value, Path: Prefix + "/", Expires: expires, MaxAge: int(s.ttl / time.Second),
		HttpOnly: true, Secure: s.secureFor(r), SameSite: http.SameSiteStrictMode,
	})
	return session{payload: payload, expires: expires, account: account}, nil
}

// read returns the request's session when its cookie is genuine, unexpired
// and not signed out. It does not re-read the user (Console.readSession
// does).
func (s *sessions) read(r *http.Request) (session, bool) {
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
	if err1 != nil || err2 != nil || len(payload) < payloadLen || len(payload) > payloadLen+maxUserLen {
		return session{}, false
	}
	user := string(payload[payloadLen:])
	key := s.key(user)
	if key == nil || !hmac.Equal(sig, s.mac(key, sessionLabel, payload)) {
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
	var account domain.AccountRef
	if user != "" {
		account = domain.NewAccountRef(user, time.UnixMicro(int64(binary.BigEndian.Uint64(payload[16+nonceLen:]))))
	}
	return session{payload: payload, expires: expires, account: account}, true
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
		HttpOnly: true, Secure: s.secureFor(r), SameSite: http.SameSiteStrictMode,
	})
}

// csrf is the token a session's forms carry.
func (s *sessions) csrf(sess session) string {
	return b64.EncodeToString(s.mac(s.key(sess.account.Name()), "csrf", sess.payload))
}

// validCSRF compares a form's token with the session's in constant time.
func (s *sessions) validCSRF(sess session, token string) bool {
	got, err := b64.DecodeString(token)
	return err == nil && hmac.Equal(got, s.mac(s.key(sess.account.Name()), "csrf", sess.payload))
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
		HttpOnly: true, Secure: s.secureFor(r), SameSite: http.SameSiteStrictMode,
	})
	return token, nil
}

// secureFor reports whether cookies set in answer to r must be Secure:
// the request came over TLS, or the service's public URL is https.
func (s *sessions) secureFor(r *http.Request) bool { return s.secure || overTLS(r) }

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
