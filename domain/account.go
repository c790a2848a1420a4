package domain

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/argon2"
)

// ErrUserExists means an account with that username already exists.
var ErrUserExists = errors.New("user already exists")

// Role is what an operator's account is for (docs/DOMAIN.md, roles). Each
// role is a fixed set of permissions: RolePermissions.
type Role string

// The roles, from the least to the most trusted.
const (
	RoleViewer         Role = "viewer"
	RoleReleaser       Role = "releaser"
	RoleRolloutManager Role = "rollout_manager"
	RoleDeviceAdmin    Role = "device_admin"
	RoleAdmin          Role = "admin"
)

// Roles lists every role, for documentation and tests.
func Roles() []Role {
	return []Role{RoleViewer, RoleReleaser, RoleRolloutManager, RoleDeviceAdmin, RoleAdmin}
}

// ParseRole reads a role's name; anything else is a validation error.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles() {
		if string(r) == s {
			return r, nil
		}
	}
	return "", invalid("role", "must be one of viewer, releaser, rollout_manager, device_admin, admin")
}

// Permission is one kind of operator action. Every /api/v1/admin route
// needs exactly one (adapters/rest's route table).
type Permission string

// The permissions. tokens:write is about device tokens (registration and
// rotation); api_tokens:write lets a principal mint and revoke its own
// operator API tokens; audit:read reads the audit log, which names every
// operator and what they did, so it is the admins' alone (read does not
// imply it).
const (
	PermRead           Permission = "read"
	PermArtifactsWrite Permission = "artifacts:write"
	PermFirmwareWrite  Permission = "firmware:write"
	PermRolloutsWrite  Permission = "rollouts:write"
	PermTagsWrite      Permission = "tags:write"
	PermDevicesWrite   Permission = "devices:write"
	PermTokensWrite    Permission = "tokens:write"
	PermAdmissionWrite Permission = "admission:write"
	PermAPITokensWrite Permission = "api_tokens:write"
	PermUsersWrite     Permission = "users:write"
	// PermWebhooksWrite manages webhook subscriptions: where events go,
	// and the secrets that sign them (the admin role's).
	PermWebhooksWrite Permission = "webhooks:write"
	PermAuditRead     Permission = "audit:read"
)

// allPermissions fixes each permission's bit in a PermissionSet.
var allPermissions = []Permission{PermRead, PermArtifactsWrite, PermFirmwareWrite, PermRolloutsWrite, PermTagsWrite,
	PermDevicesWrite, PermTokensWrite, PermAdmissionWrite, PermAPITokensWrite, PermUsersWrite, PermWebhooksWrite, PermAuditRead}

// ParsePermission reads a permission's name; anything else is a validation error.
func ParsePermission(s string) (Permission, error) {
	for _, p := range allPermissions {
		if string(p) == s {
			return p, nil
		}
	}
	return "", invalid("scopes", "%q is not a permission", s)
}

// PermissionSet is a set of permissions. The zero value is empty.
type PermissionSet struct{ bits uint32 }

// PermissionsOf is the set of the permissions given.
func PermissionsOf(ps ...Permission) PermissionSet {
	var s PermissionSet
	for _, p := range ps {
		for i, q := range allPermissions {
			if p == q {
				s.bits |= 1 << i
			}
		}
	}
	return s
}

// ParsePermissions reads a token's requested scopes: at least one, each a
// permission.
func ParsePermissions(names []string) (PermissionSet, error) {
	if len(names) == 0 {
		return PermissionSet{}, invalid("scopes", "must name at least one permission")
	}
	var ps []Permission
	for _, n := range names {
		p, err := ParsePermission(n)
		if err != nil {
			return PermissionSet{}, err
		}
		ps = append(ps, p)
	}
	return PermissionsOf(ps...), nil
}

// Has reports whether p is in the set.
func (s PermissionSet) Has(p Permission) bool {
	o := PermissionsOf(p)
	return o.bits != 0 && s.bits&o.bits == o.bits
}

// Covers reports whether every permission of o is in s.
func (s PermissionSet) Covers(o PermissionSet) bool { return o.bits&^s.bits == 0 }

// intersect is the permissions in both sets.
func (s PermissionSet) intersect(o PermissionSet) PermissionSet {
	return PermissionSet{s.bits & o.bits}
}

// List is the set's permissions in a fixed order.
func (s PermissionSet) List() []Permission {
	out := []Permission{}
	for i, p := range allPermissions {
		if s.bits&(1<<i) != 0 {
			out = append(out, p)
		}
	}
	return out
}

// RolePermissions is the one table of what each role may do
// (docs/DOMAIN.md, roles). Every role reads and manages its own API tokens;
// only admins manage accounts.
func RolePermissions(r Role) PermissionSet {
	base := []Permission{PermRead, PermAPITokensWrite}
	switch r {
	case RoleViewer:
		return PermissionsOf(base...)
	case RoleReleaser:
		return PermissionsOf(append(base, PermArtifactsWrite, PermFirmwareWrite)...)
	case RoleRolloutManager:
		return PermissionsOf(append(base, PermRolloutsWrite, PermTagsWrite)...)
	case RoleDeviceAdmin:
		return PermissionsOf(append(base, PermDevicesWrite, PermTokensWrite, PermAdmissionWrite)...)
	case RoleAdmin:
		return PermissionsOf(allPermissions...)
	}
	return PermissionSet{}
}

// ParseUsername reads an account's name: 1–64 characters of [a-z0-9._-],
// starting with a letter or digit. Lowercase only, so that two accounts
// cannot differ by case alone.
func ParseUsername(s string) (string, error) {
	if len(s) == 0 || len(s) > 64 {
		return "", invalid("username", "must be 1-64 characters")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return "", invalid("username", "must be lowercase letters, digits, '.', '_' or '-', starting with a letter or digit")
		}
	}
	return s, nil
}

// Password hashing: argon2id with the parameters OWASP recommends for it
// (19 MiB of memory, 2 passes, 1 lane), a 16-byte random salt and a 32-byte
// key, stored as a PHC string ("$argon2id$v=19$m=19456,t=2,p=1$salt$key")
// so that stronger parameters can be adopted later without breaking the
// hashes already stored: each is verified with its own.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonKeyLen    = 32
	argonSaltLen   = 16
	// MinPasswordLen is the shortest password accepted; long passphrases
	// beat composition rules (NIST SP 800-63B).
	MinPasswordLen = 12
	maxPasswordLen = 1024 // bounds the work one hash can cost
)

// HashPassword hashes a new password (argon2id, above) after checking its
// length and that it is text (ValidateText: valid UTF-8, no NUL), as every
// other operator text is: a password no form or terminal can type back is
// refused before it is hashed, not stored.
func HashPassword(password string) (string, error) {
	if len(password) < MinPasswordLen || len(password) > maxPasswordLen {
		return "", invalid("password", "must be %d-%d characters", MinPasswordLen, maxPasswordLen)
	}
	if err := ValidateText("password", password, maxPasswordLen); err != nil {
		return "", err
	}
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads,
		enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// passwordMatches verifies a password against a stored PHC string with the
// string's own parameters, comparing the keys in constant time. A string it
// cannot read matches nothing.
func passwordMatches(phc, password string) bool {
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || len(password) > maxPasswordLen {
		return false
	}
	var version int
	var mem, passes uint32
	var lanes uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &passes, &lanes); err != nil || mem == 0 || passes == 0 || lanes == 0 {
		return false
	}
	enc := base64.RawStdEncoding
	salt, err1 := enc.DecodeString(parts[4])
	key, err2 := enc.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(key) == 0 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, passes, mem, lanes, uint32(len(key)))
	return subtle.ConstantTimeCompare(got, key) == 1
}

// User is an operator's account.
type User struct {
	name         string
	role         Role
	passwordHash string
	createdAt    time.Time
}

// ParsePasswordUsername reads the name of an account with a password:
// ParseUsername's rule, and not a name single sign-on reserves (S7). The
// CLI judges its flag with it before it connects.
func ParsePasswordUsername(username string) (string, error) {
	name, err := ParseUsername(username)
	if err != nil {
		return "", err
	}
	if reservedUsername(name) {
		return "", invalid("username", "names starting with %q or %q are single sign-on users'", externalPrefix, externalDigestPrefix)
	}
	return name, nil
}

// NewUser makes an account, hashing its password.
func NewUser(username, role, password string, now time.Time) (User, error) {
	name, err := ParsePasswordUsername(username)
	if err != nil {
		return User{}, err
	}
	r, err := ParseRole(role)
	if err != nil {
		return User{}, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return User{}, err
	}
	return User{name: name, role: r, passwordHash: hash, createdAt: now.UTC().Truncate(time.Microsecond)}, nil
}

// RehydrateUser rebuilds a stored account; the store trusts what it wrote.
func RehydrateUser(name string, role Role, passwordHash string, createdAt time.Time) User {
	return User{name: name, role: role, passwordHash: passwordHash, createdAt: createdAt.UTC().Truncate(time.Microsecond)}
}

// Name is the account's username.
func (u User) Name() string { return u.name }

// Role is the account's role.
func (u User) Role() Role { return u.role }

// PasswordHash is the stored PHC string (never the password).
func (u User) PasswordHash() string { return u.passwordHash }

// CreatedAt is when the account was made.
func (u User) CreatedAt() time.Time { return u.createdAt }

// Ref is this account among every account that has had its name.
func (u User) Ref() AccountRef { return AccountRef{name: u.name, createdAt: u.createdAt} }

// Is reports whether u is the very account r names: the same name and the
// same creation. An account created under the name after r's was removed
// is not.
func (u User) Is(r AccountRef) bool { return u.Ref().Equal(r) }

// AccountRef names one account, told apart from every other account that
// had or will have its name: its username and when it was created, to the
// microsecond as stored. A name is free again once its account is removed
// (a new hire given a freed name, the same person re-created with another
// role), and what was checked against the removed account — a password, a
// session, the owner of a token — must not act as the account created
// after it: the creation time is the account's version. The zero
// AccountRef names no account.
type AccountRef struct {
	name      string
	createdAt time.Time
}

// NewAccountRef is the account named name created at createdAt, as an
// edge carries it back (a console session's cookie) or a store reads it.
func NewAccountRef(name string, createdAt time.Time) AccountRef {
	return AccountRef{name: name, createdAt: createdAt.UTC().Truncate(time.Microsecond)}
}

// Name is the account's username.
func (r AccountRef) Name() string { return r.name }

// CreatedAt is when the account was created.
func (r AccountRef) CreatedAt() time.Time { return r.createdAt }

// IsZero reports whether r names no account.
func (r AccountRef) IsZero() bool { return r.name == "" }

// Equal reports whether r and o name the same account.
func (r AccountRef) Equal(o AccountRef) bool {
	return r.name == o.name && r.createdAt.Equal(o.createdAt)
}

// PasswordMatches verifies a presented password, in constant time. A
// single sign-on user has none: nothing matches, at the cost of a hash, so
// that the password form's timing does not tell their names apart.
func (u User) PasswordMatches(password string) bool {
	if u.External() {
		passwordMatches(externalDecoyHash(), password)
		return false
	}
	return passwordMatches(u.passwordHash, password)
}

// APIToken is an operator's bearer token for the admin API: a random
// 256-bit secret shown once and stored as its SHA-256, with scopes that
// are a subset of what its grantor could do, an expiry, its last use and
// whether it was revoked.
type APIToken struct {
	id         UUID
	owner      AccountRef // the very account that minted it
	name       string
	hash       TokenHash
	scopes     PermissionSet
	createdAt  time.Time
	expiresAt  time.Time
	lastUsedAt time.Time // zero: never used
	revokedAt  time.Time // zero: not revoked
}

// MaxTokenLifetime bounds a token's expiry: a forgotten CI secret stops
// working within a year.
const MaxTokenLifetime = 366 * 24 * time.Hour

// NewAPIToken mints a token for the grantor's user. The scopes must be
// within what the grantor may do now (a token minting a token passes on
// at most its own scopes), and a token minting a token passes on at most
// its own lifetime: anything wider or longer is an escalation,
// ErrForbidden — a leaked token cannot be turned into a longer-lived one.
// It returns the token and its secret, which is shown once.
func NewAPIToken(id UUID, grantor Principal, name string, scopes PermissionSet, expiresAt, now time.Time) (APIToken, string, error) {
	owner, ok := grantor.Account()
	if !ok {
		return APIToken{}, "", fmt.Errorf("%w: only a user's session or token can own API tokens", ErrForbidden)
	}
	if id.IsZero() {
		return APIToken{}, "", invalid("id", "is required")
	}
	if name == "" || len(name) > 64 {
		return APIToken{}, "", invalid("name", "must be 1-64 characters")
	}
	if err := ValidateText("name", name, 64); err != nil {
		return APIToken{}, "", err
	}
	if scopes.bits == 0 {
		return APIToken{}, "", invalid("scopes", "must name at least one permission")
	}
	if !grantor.Permissions().Covers(scopes) {
		return APIToken{}, "", fmt.Errorf("%w: the scopes exceed the grantor's permissions", ErrForbidden)
	}
	now = now.UTC().Truncate(time.Microsecond)
	expiresAt = expiresAt.UTC().Truncate(time.Microsecond)
	if !expiresAt.After(now) || expiresAt.Sub(now) > MaxTokenLifetime {
		return APIToken{}, "", invalid("expires_at", "must be in the future, within 366 days")
	}
	if !grantor.until.IsZero() && expiresAt.After(grantor.until) {
		return APIToken{}, "", fmt.Errorf("%w: the token would outlive the token minting it (expires %s)", ErrForbidden,
			grantor.until.Format(time.RFC3339))
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return APIToken{}, "", err
	}
	secret := APITokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return APIToken{id: id, owner: owner, name: name, hash: HashToken(secret), scopes: scopes,
		createdAt: now, expiresAt: expiresAt}, secret, nil
}

// APITokenPrefix starts every API token's secret, so that a leaked one is
// recognisable (secret scanners) and never mistaken for a device token.
const APITokenPrefix = "ota_"

// RehydrateAPIToken rebuilds a stored token of the account owner.
func RehydrateAPIToken(id UUID, owner AccountRef, name string, hash TokenHash, scopes PermissionSet,
	createdAt, expiresAt, lastUsedAt, revokedAt time.Time) APIToken {
	us := func(t time.Time) time.Time {
		if t.IsZero() {
			return t
		}
		return t.UTC().Truncate(time.Microsecond)
	}
	return APIToken{id: id, owner: NewAccountRef(owner.name, owner.createdAt), name: name, hash: hash, scopes: scopes, createdAt: us(createdAt),
		expiresAt: us(expiresAt), lastUsedAt: us(lastUsedAt), revokedAt: us(revokedAt)}
}

// ID is the token's id (not its secret).
func (t APIToken) ID() UUID { return t.id }

// Owner is the username the token acts for.
func (t APIToken) Owner() string { return t.owner.name }

// OwnerAccount is the account the token belongs to: the one that minted
// it, not another created later under its name.
func (t APIToken) OwnerAccount() AccountRef { return t.owner }

// OwnedBy reports whether p acts for the very account that owns t (in
// person or through a token): not root, not another user, and not an
// account created under the owner's name after the owner was removed.
func (t APIToken) OwnedBy(p Principal) bool {
	a, ok := p.Account()
	return ok && t.owner.Equal(a)
}

// Name is the owner's label for the token ("ci").
func (t APIToken) Name() string { return t.name }

// Hash is the SHA-256 of the secret, what is stored.
func (t APIToken) Hash() TokenHash { return t.hash }

// Scopes are the permissions the token was granted.
func (t APIToken) Scopes() PermissionSet { return t.scopes }

// CreatedAt is when the token was minted.
func (t APIToken) CreatedAt() time.Time { return t.createdAt }

// ExpiresAt is when the token stops working.
func (t APIToken) ExpiresAt() time.Time { return t.expiresAt }

// LastUsedAt is the token's last authenticated use (zero: never).
func (t APIToken) LastUsedAt() time.Time { return t.lastUsedAt }

// RevokedAt is when the token was revoked (zero: it was not).
func (t APIToken) RevokedAt() time.Time { return t.revokedAt }

// Usable says whether the token authenticates at now: not revoked, not
// expired. A token that does not is ErrUnauthorized, as an unknown one.
func (t APIToken) Usable(now time.Time) error {
	if !t.revokedAt.IsZero() || !now.Before(t.expiresAt) {
		return ErrUnauthorized
	}
	return nil
}

// Revoke ends the token at now. Revoking a revoked token keeps its first
// revocation time.
func (t APIToken) Revoke(now time.Time) APIToken {
	if t.revokedAt.IsZero() {
		t.revokedAt = now.UTC().Truncate(time.Microsecond)
	}
	return t
}

// principalKind is how a principal authenticated.
type principalKind int

const (
	principalNone principalKind = iota
	principalRoot
	principalUser
	principalToken
)

// Principal is who is acting: the break-glass root (OTA_ADMIN_TOKEN), a
// user's session, or a user's API token. Every mutating admin call carries
// one, so that it can be judged (Can) and recorded. The zero Principal may
// do nothing.
type Principal struct {
	kind principalKind
	// account is the account the principal was checked against (a
	// session's, a token's owner); the zero AccountRef for root.
	account AccountRef
	token   UUID
	perms   PermissionSet
	// until is when a token principal's token expires (zero for the
	// others): a token it mints must not outlive it (NewAPIToken).
	until time.Time
}

// RootPrincipal is the break-glass root: every permission, no account.
func RootPrincipal() Principal {
	return Principal{kind: principalRoot, perms: PermissionsOf(allPermissions...)}
}

// UserPrincipal is a user acting in person (a session): their role's permissions.
func UserPrincipal(u User) Principal {
	return Principal{kind: principalUser, account: u.Ref(), perms: RolePermissions(u.role)}
}

// TokenPrincipal is a user acting through an API token: the token's scopes
// as far as the owner's role still allows them, so a demoted user's tokens
// shrink with the role. owner must be the very account that owns the token
// (not another of its name): else the principal may do nothing.
func TokenPrincipal(t APIToken, owner User) Principal {
	if !owner.Is(t.owner) {
		return Principal{}
	}
	return Principal{kind: principalToken, account: owner.Ref(), token: t.id, perms: t.scopes.intersect(RolePermissions(owner.role)),
		until: t.expiresAt}
}

// Can reports whether the principal holds the permission.
func (p Principal) Can(perm Permission) bool { return p.perms.Has(perm) }

// Permissions is everything the principal may do.
func (p Principal) Permissions() PermissionSet { return p.perms }

// Username is the user acting (a session or a token's owner); root has none.
func (p Principal) Username() (string, bool) { return p.account.name, p.account.name != "" }

// Account is the account the user acting was checked against (their
// session's, or their token's owner), which stays that account: if it is
// removed and another is created under its name, the principal is not the
// new one's. Root has none.
func (p Principal) Account() (AccountRef, bool) { return p.account, !p.account.IsZero() }

// TokenID is the API token acting, if one is.
func (p Principal) TokenID() (UUID, bool) { return p.token, p.kind == principalToken }

// IsRoot reports whether the break-glass root is acting.
func (p Principal) IsRoot() bool { return p.kind == principalRoot }

// String names the actor for logs and the audit record: "root",
// "user:alice" or "token:<id>(alice)". It never carries a secret.
func (p Principal) String() string {
	switch p.kind {
	case principalRoot:
		return "root"
	case principalUser:
		return "user:" + p.account.name
	case principalToken:
		return "token:" + p.token.String() + "(" + p.account.name + ")"
	}
	return "nobody"
}

// lastUseResolution is how precisely a token's last use is kept: a token
// used in a loop writes once a minute, not once a request.
const lastUseResolution = time.Minute

// UseNeedsRecord reports whether a use at now moves the recorded last use.
func (t APIToken) UseNeedsRecord(now time.Time) bool {
	return t.lastUsedAt.IsZero() || now.Sub(t.lastUsedAt) >= lastUseResolution
}

// Used records a use at now (UseNeedsRecord says when to store it).
func (t APIToken) Used(now time.Time) APIToken {
	t.lastUsedAt = now.UTC().Truncate(time.Microsecond)
	return t
}
