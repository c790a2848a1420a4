package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"
)

// External users are operators who sign in through the identity provider
// (OIDC single sign-on) rather than with a password. They are accounts like
// any other, so that a session names one and every request re-reads it
// (sessions end when the account is removed, the role acting is the stored
// one), but they have no password: the password form never admits them.
// Their names are reserved (ExternalUsername), so that no password account
// can be created under a name the provider's users will take.

// Prefixes of external users' names. "oidc-" is followed by the subject
// itself when it is a valid username's tail; "oidc." by a digest of a
// subject that is not. No subject can produce the other form.
const (
	externalPrefix       = "oidc-"
	externalDigestPrefix = "oidc."
)

// externalDigestLen is how many hex digits of the subject's SHA-256 name
// an external user whose subject is not a readable name (160 bits).
const externalDigestLen = 40

// ExternalUsername is the account name of the identity provider's subject
// (the ID token's "sub", stable and unique at one issuer): "oidc-" and the
// subject when that makes a valid username (lowercase letters, digits, '.',
// '_', '-'; 64 characters in all), else "oidc." and 40 hex digits of the
// subject's SHA-256. An empty subject is a validation error.
func ExternalUsername(subject string) (string, error) {
	if subject == "" {
		return "", invalid("sub", "is required")
	}
	if name, err := ParseUsername(externalPrefix + subject); err == nil {
		return name, nil
	}
	sum := sha256.Sum256([]byte(subject))
	return externalDigestPrefix + hex.EncodeToString(sum[:])[:externalDigestLen], nil
}

// reservedUsername reports whether a name belongs to external users.
func reservedUsername(name string) bool {
	return strings.HasPrefix(name, externalPrefix) || strings.HasPrefix(name, externalDigestPrefix)
}

// NewExternalUser makes the account of a provider's user: no password
// (PasswordMatches is false for every password), the role the provider's
// claim maps to. name must be an ExternalUsername.
func NewExternalUser(name string, role Role, now time.Time) (User, error) {
	if _, err := ParseUsername(name); err != nil {
		return User{}, err
	}
	if !reservedUsername(name) {
		return User{}, invalid("username", "an external user's name starts with %q or %q", externalPrefix, externalDigestPrefix)
	}
	if _, err := ParseRole(string(role)); err != nil {
		return User{}, err
	}
	return User{name: name, role: role, createdAt: now.UTC().Truncate(time.Microsecond)}, nil
}

// External reports whether the account signs in through the identity
// provider: it has no password.
func (u User) External() bool { return u.passwordHash == "" }

// RoleFromClaim maps the provider's role claim, as its values (one for a
// string claim, each element of a list), to a role: the most trusted of
// the values that name a role, in the order of Roles (viewer, releaser,
// rollout_manager, device_admin, admin). Values that name no role are
// ignored; none at all is false.
func RoleFromClaim(values []string) (Role, bool) {
	best, found := -1, false
	roles := Roles()
	for _, v := range values {
		for i, r := range roles {
			if string(r) == v && i > best {
				best, found = i, true
			}
		}
	}
	if !found {
		return "", false
	}
	return roles[best], true
}

// externalDecoyHash is a hash, made once, that an external user's password
// check spends its time on (its answer is ignored).
var externalDecoyHash = sync.OnceValue(func() string {
	h, err := HashPassword("decoy password, never admitted")
	if err != nil {
		panic(err)
	}
	return h
})
