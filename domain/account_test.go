package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

var at0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func mustUser(t *testing.T, name string, role domain.Role) domain.User {
	t.Helper()
	u, err := domain.NewUser(name, string(role), "correct horse battery", at0)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestRolePermissions pins the roles table of docs/DOMAIN.md.
func TestRolePermissions(t *testing.T) {
	want := map[domain.Role]string{
		domain.RoleViewer:         "read api_tokens:write",
		domain.RoleReleaser:       "read artifacts:write firmware:write api_tokens:write",
		domain.RoleRolloutManager: "read rollouts:write tags:write api_tokens:write",
		domain.RoleDeviceAdmin:    "read devices:write tokens:write admission:write api_tokens:write",
		domain.RoleAdmin:          "read artifacts:write firmware:write rollouts:write tags:write devices:write tokens:write admission:write api_tokens:write users:write webhooks:write audit:read",
	}
	for _, r := range domain.Roles() {
		var got []string
		for _, p := range domain.RolePermissions(r).List() {
			got = append(got, string(p))
		}
		if strings.Join(got, " ") != want[r] {
			t.Errorf("%s: %v, want %s", r, got, want[r])
		}
	}
	if _, err := domain.ParseRole("root"); !errors.Is(err, domain.ErrValidation) {
		t.Errorf("ParseRole(root) = %v", err)
	}
}

func TestNewUser(t *testing.T) {
	u := mustUser(t, "alice", domain.RoleReleaser)
	if !u.PasswordMatches("correct horse battery") || u.PasswordMatches("correct horse batterz") || u.PasswordMatches("") {
		t.Error("password verification")
	}
	if strings.Contains(u.PasswordHash(), "horse") || !strings.HasPrefix(u.PasswordHash(), "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash %q", u.PasswordHash())
	}
	for _, tc := range []struct{ name, role, pw string }{
		{"", "admin", "correct horse battery"},
		{"Alice", "admin", "correct horse battery"},
		{"-x", "admin", "correct horse battery"},
		{strings.Repeat("a", 65), "admin", "correct horse battery"},
		{"bob", "root", "correct horse battery"},
		{"bob", "admin", "short"},
	} {
		if _, err := domain.NewUser(tc.name, tc.role, tc.pw, at0); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("NewUser(%q, %q, %q) = %v, want a validation error", tc.name, tc.role, tc.pw, err)
		}
	}
}

func TestAPITokenScopes(t *testing.T) {
	releaser := mustUser(t, "rel", domain.RoleReleaser)
	id := domain.UUIDOf([16]byte{1})
	ci := domain.PermissionsOf(domain.PermArtifactsWrite, domain.PermFirmwareWrite)
	tok, secret, err := domain.NewAPIToken(id, domain.UserPrincipal(releaser), "ci", ci, at0.Add(time.Hour), at0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, domain.APITokenPrefix) || domain.HashToken(secret) != tok.Hash() || tok.Owner() != "rel" {
		t.Fatalf("secret %q, token %+v", secret, tok)
	}
	p := domain.TokenPrincipal(tok, releaser)
	if !p.Can(domain.PermFirmwareWrite) || p.Can(domain.PermRead) || p.Can(domain.PermAPITokensWrite) {
		t.Errorf("token principal may %v", p.Permissions().List())
	}
	// Escalations: a user beyond their role, a token beyond its scopes.
	for name, tc := range map[string]struct {
		grantor domain.Principal
		scopes  domain.PermissionSet
	}{
		"releaser asks users:write":      {domain.UserPrincipal(releaser), domain.PermissionsOf(domain.PermUsersWrite)},
		"token asks read beyond its own": {p, domain.PermissionsOf(domain.PermFirmwareWrite, domain.PermRead)},
		"root owns no tokens":            {domain.RootPrincipal(), domain.PermissionsOf(domain.PermRead)},
		"nobody":                         {domain.Principal{}, domain.PermissionsOf(domain.PermRead)},
	} {
		if _, _, err := domain.NewAPIToken(id, tc.grantor, "x", tc.scopes, at0.Add(time.Hour), at0); !errors.Is(err, domain.ErrForbidden) {
			t.Errorf("%s: %v, want ErrForbidden", name, err)
		}
	}
	// A token within its own scopes may mint a narrower one, living up to
	// its own expiry, not a moment longer: a leaked token cannot be turned
	// into one that outlives it.
	if _, _, err := domain.NewAPIToken(id, p, "narrow", domain.PermissionsOf(domain.PermArtifactsWrite), at0.Add(time.Hour), at0); err != nil {
		t.Errorf("narrower token: %v", err)
	}
	if _, _, err := domain.NewAPIToken(id, p, "longer", domain.PermissionsOf(domain.PermArtifactsWrite), at0.Add(time.Hour+time.Microsecond), at0); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("a token outliving the token minting it: %v, want ErrForbidden", err)
	}
	if _, _, err := domain.NewAPIToken(id, domain.UserPrincipal(releaser), "long", ci, at0.Add(300*24*time.Hour), at0); err != nil {
		t.Errorf("a user in person mints any lifetime within the limit: %v", err)
	}
	for _, exp := range []time.Time{{}, at0, at0.Add(-time.Second), at0.Add(domain.MaxTokenLifetime + time.Second)} {
		if _, _, err := domain.NewAPIToken(id, domain.UserPrincipal(releaser), "x", ci, exp, at0); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("expiry %v: %v", exp, err)
		}
	}
	// A demoted owner's token shrinks with the role.
	viewer := domain.RehydrateUser("rel", domain.RoleViewer, releaser.PasswordHash(), at0)
	if domain.TokenPrincipal(tok, viewer).Can(domain.PermFirmwareWrite) {
		t.Error("a demoted owner's token kept firmware:write")
	}
	if domain.TokenPrincipal(tok, mustUser(t, "other", domain.RoleAdmin)).Can(domain.PermFirmwareWrite) {
		t.Error("a token acted for a user who does not own it")
	}
}

func TestAPITokenUsable(t *testing.T) {
	u := mustUser(t, "alice", domain.RoleViewer)
	tok, _, err := domain.NewAPIToken(domain.UUIDOf([16]byte{2}), domain.UserPrincipal(u), "x", domain.PermissionsOf(domain.PermRead), at0.Add(time.Hour), at0)
	if err != nil {
		t.Fatal(err)
	}
	if err := tok.Usable(at0.Add(time.Hour - time.Microsecond)); err != nil {
		t.Errorf("before expiry: %v", err)
	}
	if err := tok.Usable(at0.Add(time.Hour)); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("at expiry: %v", err)
	}
	r := tok.Revoke(at0.Add(time.Minute))
	if err := r.Usable(at0.Add(2 * time.Minute)); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("revoked: %v", err)
	}
	if !r.Revoke(at0.Add(time.Hour)).RevokedAt().Equal(at0.Add(time.Minute)) {
		t.Error("a second revocation moved the first")
	}
}

func TestPrincipal(t *testing.T) {
	if domain.RootPrincipal().String() != "root" || !domain.RootPrincipal().Can(domain.PermUsersWrite) {
		t.Error("root")
	}
	var nobody domain.Principal
	for _, p := range domain.RolePermissions(domain.RoleAdmin).List() {
		if nobody.Can(p) {
			t.Errorf("the zero principal may %s", p)
		}
	}
	v := domain.UserPrincipal(mustUser(t, "vic", domain.RoleViewer))
	if v.Can(domain.PermFirmwareWrite) || !v.Can(domain.PermRead) || v.String() != "user:vic" {
		t.Errorf("viewer %v", v)
	}
}

// TestUsernameBounds pins the edges of ParseUsername: 64 characters is the
// longest name, and 'z' and '9' are letters and digits like any other.
func TestUsernameBounds(t *testing.T) {
	for _, ok := range []string{strings.Repeat("a", 64), "z", "zed", "9lives", "a.b_c-z"} {
		if got, err := domain.ParseUsername(ok); err != nil || got != ok {
			t.Errorf("ParseUsername(%q) = %q, %v", ok, got, err)
		}
	}
	for _, bad := range []string{strings.Repeat("a", 65), "{", "a{", "Z", ".z"} {
		if _, err := domain.ParseUsername(bad); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("ParseUsername(%q) = %v, want a validation error", bad, err)
		}
	}
}

// TestPasswordLengthBounds pins MinPasswordLen and the 1024-character cap
// at both ends, for hashing and for verifying.
func TestPasswordLengthBounds(t *testing.T) {
	for _, n := range []int{domain.MinPasswordLen, 1024} {
		pw := strings.Repeat("p", n)
		u, err := domain.NewUser("alice", "viewer", pw, at0)
		if err != nil {
			t.Errorf("%d-character password: %v", n, err)
			continue
		}
		if !u.PasswordMatches(pw) {
			t.Errorf("%d-character password does not match its own hash", n)
		}
	}
	for _, n := range []int{domain.MinPasswordLen - 1, 1025} {
		if _, err := domain.HashPassword(strings.Repeat("p", n)); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%d-character password: %v, want a validation error", n, err)
		}
	}
}

// TestAPITokenEdges pins the longest token name (64) and the longest
// lifetime (MaxTokenLifetime exactly), each accepted at the edge and refused
// one past it.
func TestAPITokenEdges(t *testing.T) {
	owner := domain.UserPrincipal(mustUser(t, "alice", domain.RoleViewer))
	id := domain.UUIDOf([16]byte{3})
	read := domain.PermissionsOf(domain.PermRead)
	for _, tc := range []struct {
		name string
		exp  time.Time
		ok   bool
	}{
		{strings.Repeat("n", 64), at0.Add(time.Hour), true},
		{strings.Repeat("n", 65), at0.Add(time.Hour), false},
		{"x", at0.Add(domain.MaxTokenLifetime), true},
		{"x", at0.Add(domain.MaxTokenLifetime + time.Microsecond), false},
	} {
		_, _, err := domain.NewAPIToken(id, owner, tc.name, read, tc.exp, at0)
		if tc.ok && err != nil {
			t.Errorf("name of %d, expiry %v: %v", len(tc.name), tc.exp, err)
		}
		if !tc.ok && !errors.Is(err, domain.ErrValidation) {
			t.Errorf("name of %d, expiry %v: %v, want a validation error", len(tc.name), tc.exp, err)
		}
	}
}

// An account is its name and its creation (domain.AccountRef): one created
// later under a freed name, even a microsecond later, is another account.
// A token of the first neither acts for it nor is owned by its principal.
func TestAccountRefTellsAccountsOfOneNameApart(t *testing.T) {
	first := mustUser(t, "rel", domain.RoleReleaser)
	later, err := domain.NewUser("rel", string(domain.RoleReleaser), "another long password", at0.Add(time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	if !first.Is(first.Ref()) || first.Is(later.Ref()) || later.Is(first.Ref()) || first.Ref().Equal(later.Ref()) {
		t.Fatalf("%+v and %+v are not told apart", first.Ref(), later.Ref())
	}
	if ref := domain.NewAccountRef("rel", first.CreatedAt().In(time.FixedZone("CET", 3600))); !first.Is(ref) {
		t.Errorf("the account's name and creation time in another zone do not name it: %+v", ref)
	}
	if a, ok := domain.UserPrincipal(first).Account(); !ok || !a.Equal(first.Ref()) {
		t.Errorf("a user principal's account: %+v %v", a, ok)
	}
	if _, ok := domain.RootPrincipal().Account(); ok {
		t.Error("root has an account")
	}
	tok, _, err := domain.NewAPIToken(domain.UUIDOf([16]byte{3}), domain.UserPrincipal(first), "ci",
		domain.PermissionsOf(domain.PermFirmwareWrite), at0.Add(time.Hour), at0)
	if err != nil {
		t.Fatal(err)
	}
	if !tok.OwnerAccount().Equal(first.Ref()) || !tok.OwnedBy(domain.UserPrincipal(first)) {
		t.Errorf("the token's owner %+v, want %+v", tok.OwnerAccount(), first.Ref())
	}
	if tok.OwnedBy(domain.UserPrincipal(later)) || tok.OwnedBy(domain.RootPrincipal()) {
		t.Error("a token is owned by another account of its owner's name, or by root")
	}
	if p := domain.TokenPrincipal(tok, later); p.Can(domain.PermFirmwareWrite) {
		t.Errorf("a token acts for a later account of its owner's name: %v", p)
	}
	if p := domain.TokenPrincipal(tok, first); !p.Can(domain.PermFirmwareWrite) || !tok.OwnedBy(p) {
		t.Errorf("a token does not act for its owner: %v", p)
	}
}
