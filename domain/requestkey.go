package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// MaxRequestKeyLen bounds an Idempotency-Key, as the common APIs do.
const MaxRequestKeyLen = 255

// RequestKey is an operator's Idempotency-Key for a creation, and the
// fingerprint of the request it first came with. It is stored with what
// that request created, in the same write, so a request retried after its
// answer was lost finds what it made instead of making it again — even
// when the first one's server stopped right after its commit.
type RequestKey struct{ key, fingerprint string }

// ParseRequestKey reads an Idempotency-Key header: "" is no key; else 1 to
// MaxRequestKeyLen visible ASCII characters (a header value's, without
// spaces, so that what is stored is what the next retry sends).
func ParseRequestKey(s string) (RequestKey, error) {
	if len(s) > MaxRequestKeyLen {
		return RequestKey{}, invalid("Idempotency-Key", "must be at most %d characters", MaxRequestKeyLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return RequestKey{}, invalid("Idempotency-Key", "must be visible ASCII characters only")
		}
	}
	return RequestKey{key: s}, nil
}

// RehydrateRequestKey rebuilds a stored key; only adapters call it.
func RehydrateRequestKey(key, fingerprint string) RequestKey {
	return RequestKey{key: key, fingerprint: fingerprint}
}

// of is k bound to request: its fingerprint is the SHA-256 of the
// request's JSON, so two requests are one when every field they give is
// equal. The zero key stays zero.
func (k RequestKey) of(request any) (RequestKey, error) {
	if k.key == "" {
		return RequestKey{}, nil
	}
	b, err := json.Marshal(request)
	if err != nil { // a value no field's own check refused: still the request's
		return RequestKey{}, invalid("Idempotency-Key", "the request cannot be fingerprinted: %v", err)
	}
	sum := sha256.Sum256(b)
	return RequestKey{key: k.key, fingerprint: hex.EncodeToString(sum[:])}, nil
}

// Key is the operator's key ("" for none).
func (k RequestKey) Key() string { return k.key }

// Fingerprint identifies the request the key came with.
func (k RequestKey) Fingerprint() string { return k.fingerprint }

// IsZero reports whether the request gave no key.
func (k RequestKey) IsZero() bool { return k.key == "" }

// Repeats judges a request that came with k against what stored (the
// same key) was first used for: the same request is a retry, to be
// answered with what the first one made; another request under the same
// key is ErrRequestKeyConflict — answering it with the first one's
// result would hide that the second was never carried out.
func (k RequestKey) Repeats(stored RequestKey) error {
	if k.key != stored.key || k.fingerprint != stored.fingerprint {
		return fmt.Errorf("the Idempotency-Key %.64q was used with another request: %w", k.key, ErrRequestKeyConflict)
	}
	return nil
}
