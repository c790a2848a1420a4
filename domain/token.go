package domain

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
)

// TokenHash is the SHA-256 of a device token. Only the hash is stored: a
// leaked database does not let anyone speak as a device.
type TokenHash [sha256.Size]byte

// NewDeviceToken makes a fresh random device token (256 bits, URL-safe
// base64) and its hash. The plain token is shown to the operator once.
func NewDeviceToken() (string, TokenHash, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", TokenHash{}, err
	}
	tok := "dev_" + base64.RawURLEncoding.EncodeToString(b[:])
	return tok, HashToken(tok), nil
}

// HashToken hashes a presented token for lookup and comparison.
func HashToken(token string) TokenHash { return sha256.Sum256([]byte(token)) }

// Matches compares in constant time, so response timing does not leak how
// much of a guessed token was right.
func (h TokenHash) Matches(other TokenHash) bool {
	return subtle.ConstantTimeCompare(h[:], other[:]) == 1
}

// SecretEqual compares two secrets in constant time (their hashes, so that
// even the length is not leaked).
func SecretEqual(a, b string) bool {
	return HashToken(a).Matches(HashToken(b))
}
