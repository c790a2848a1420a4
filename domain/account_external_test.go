package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// A readable subject names its user "oidc-<sub>"; any other subject a
// digest, stable and a valid username; the two forms never meet.
func TestExternalUsername(t *testing.T) {
	for sub, want := range map[string]string{
		"alice":      "oidc-alice",
		"248289761x": "oidc-248289761x",
	} {
		if got, err := domain.ExternalUsername(sub); err != nil || got != want {
			t.Errorf("ExternalUsername(%q) = %q, %v; want %q", sub, got, err, want)
		}
	}
	for _, sub := range []string{"Alice", "a@b.example", strings.Repeat("a", 60), "00000000-0000-0000-0000-00000000000X"} {
		got, err := domain.ExternalUsername(sub)
		if err != nil || !strings.HasPrefix(got, "oidc.") || len(got) != 45 {
			t.Errorf("ExternalUsername(%q) = %q, %v; want oidc. and 40 hex digits", sub, got, err)
		}
		if again, _ := domain.ExternalUsername(sub); again != got {
			t.Errorf("ExternalUsername(%q) is not stable: %q then %q", sub, got, again)
		}
		if _, err := domain.ParseUsername(got); err != nil {
			t.Errorf("ExternalUsername(%q) = %q is no username: %v", sub, got, err)
		}
	}
	if a, _ := domain.ExternalUsername("Alice"); a == "oidc-alice" {
		t.Error("subjects differing in case share a user")
	}
	if _, err := domain.ExternalUsername(""); err == nil {
		t.Error("an empty subject names a user")
	}
}

// Nobody creates a password account under a single sign-on user's name;
// a single sign-on user has no password at all.
func TestExternalNamesAreReserved(t *testing.T) {
	for _, name := range []string{"oidc-alice", "oidc.0123"} {
		_, err := domain.NewUser(name, "admin", "correct horse battery", time.Now())
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != "username" {
			t.Errorf("NewUser(%q): %v, want a username validation error", name, err)
		}
	}
	if _, err := domain.NewExternalUser("alice", domain.RoleViewer, time.Now()); err == nil {
		t.Error("an external user without the reserved prefix")
	}
	u, err := domain.NewExternalUser("oidc-alice", domain.RoleReleaser, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !u.External() || u.PasswordMatches("") || u.PasswordMatches("anything at all") {
		t.Errorf("external user %+v has a usable password", u)
	}
}

// The claim maps to the most trusted role it names; unknown values are
// ignored; none is no role.
func TestRoleFromClaim(t *testing.T) {
	cases := []struct {
		values []string
		want   domain.Role
		ok     bool
	}{
		{[]string{"rollout_manager"}, domain.RoleRolloutManager, true},
		{[]string{"admin", "viewer"}, domain.RoleAdmin, true},
		{[]string{"viewer", "wizard", "releaser"}, domain.RoleReleaser, true},
		{[]string{"Admin", "root"}, "", false},
		{nil, "", false},
	}
	for _, c := range cases {
		if got, ok := domain.RoleFromClaim(c.values); got != c.want || ok != c.ok {
			t.Errorf("RoleFromClaim(%q) = %q, %v; want %q, %v", c.values, got, ok, c.want, c.ok)
		}
	}
}

// An external user has the role it was made with, under its name; a role
// that is none of Roles is refused.
func TestNewExternalUserRole(t *testing.T) {
	u, err := domain.NewExternalUser("oidc-role-check", domain.RoleDeviceAdmin, t0)
	if err != nil {
		t.Fatal(err)
	}
	if u.Name() != "oidc-role-check" || u.Role() != domain.RoleDeviceAdmin || !u.CreatedAt().Equal(t0) {
		t.Errorf("external user %s, %s, created %v; want oidc-role-check, device_admin, %v", u.Name(), u.Role(), u.CreatedAt(), t0)
	}
	if _, err := domain.NewExternalUser("oidc-role-check", domain.Role("wizard"), t0); err == nil {
		t.Error("an external user with a role that does not exist")
	}
	if _, err := domain.NewExternalUser("oidc-Not Valid", domain.RoleViewer, t0); err == nil {
		t.Error("an external user whose name is no username")
	}
}
