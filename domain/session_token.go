package domain

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"
	"time"
)

// MinSessionSecretLen is the least length of the secret session tokens are
// signed with (256 bits).
const MinSessionSecretLen = 32

// SessionSecret signs and verifies session tokens. It redacts itself when
// printed or logged.
type SessionSecret []byte

// String redacts the secret.
func (SessionSecret) String() string { return "[redacted]" }

// GoString redacts the secret under %#v too.
func (SessionSecret) GoString() string { return "[redacted]" }

// LogValue redacts the secret in structured logs.
func (SessionSecret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// NewSessionSecret makes a random secret, for a process that was given none.
func NewSessionSecret() (SessionSecret, error) {
	b := make([]byte, MinSessionSecretLen)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return b, nil
}

// SessionClaims is what a session token says: which device, under which
// admission generation, until when.
type SessionClaims struct {
	DeviceID   DeviceID
	Generation int64
	Expires    time.Time
}

// Current reports whether a (verified) session token is still good for a
// device whose admission is at generation: it was issued under that very
// generation. Rotating the device's key moves the generation on, so tokens
// issued before stop working at the device's next call.
func (c SessionClaims) Current(generation int64) bool { return c.Generation == generation }

// sessionHeader is the one JWT header issued and accepted (HS256): a token
// naming any other algorithm is refused before its signature is looked at.
var sessionHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

type sessionPayload struct {
	Sub string `json:"sub"`
	Gen int64  `json:"gen"`
	Iat int64  `json:"iat"`
	Exp int64  `json:"exp"`
	Jti string `json:"jti"`
}

// IssueSessionToken signs a short-lived session token (a JWT, HS256, with
// sub = the device id and exp) that a device presents as a bearer token.
// Each call makes a different token (a random jti), so a device that
// authenticates again gets a fresh one.
func IssueSessionToken(secret SessionSecret, c SessionClaims, now time.Time) (string, error) {
	if len(secret) < MinSessionSecretLen {
		return "", invalid("secret", "must be at least %d bytes", MinSessionSecretLen)
	}
	var jti [12]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", err
	}
	p, err := json.Marshal(sessionPayload{Sub: c.DeviceID.String(), Gen: c.Generation, Iat: now.Unix(), Exp: c.Expires.Unix(),
		Jti: base64.RawURLEncoding.EncodeToString(jti[:])})
	if err != nil {
		return "", err
	}
	signed := sessionHeader + "." + base64.RawURLEncoding.EncodeToString(p)
	return signed + "." + base64.RawURLEncoding.EncodeToString(sessionMAC(secret, signed)), nil
}

func sessionMAC(secret SessionSecret, signed string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// VerifySessionToken checks a session token's signature (in constant time)
// and expiry without any stored state; every failure is ErrUnauthorized.
func VerifySessionToken(secret SessionSecret, token string, now time.Time) (SessionClaims, error) {
	if len(secret) < MinSessionSecretLen || len(token) > 2048 {
		return SessionClaims{}, ErrUnauthorized
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] != sessionHeader {
		return SessionClaims{}, ErrUnauthorized
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, sessionMAC(secret, parts[0]+"."+parts[1])) {
		return SessionClaims{}, ErrUnauthorized
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return SessionClaims{}, ErrUnauthorized
	}
	var p sessionPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return SessionClaims{}, ErrUnauthorized
	}
	// The token is the Mender edge's source of the device id: parsed here,
	// once, so a signed token naming no valid device is simply refused.
	id, err := ParseDeviceID(p.Sub)
	if err != nil {
		return SessionClaims{}, ErrUnauthorized
	}
	exp := time.Unix(p.Exp, 0)
	if !now.Before(exp) {
		return SessionClaims{}, ErrUnauthorized
	}
	return SessionClaims{DeviceID: id, Generation: p.Gen, Expires: exp.UTC()}, nil
}
