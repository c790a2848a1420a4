package domain_test

import (
	"errors"
	"testing"

	"github.com/ai-device/ota/domain"
)

// docs/ERRORS.md: a field that "is not valid UTF-8 or contains NUL" is
// VALIDATION_FAILED — the rule domain.ValidateText holds every other
// operator text to (a token's name, a webhook secret), and a password too:
// one with a NUL (POST /admin/users) or invalid UTF-8 (`otad users
// create` reads it from stdin as is) is refused before it is hashed, not
// judged by its length alone.
func TestPasswordWithNULOrInvalidUTF8IsAValidationError(t *testing.T) {
	for _, pw := range []string{"correct horse\x00battery", "correct horse \xff\xfe battery"} {
		if _, err := domain.NewUser("bob", string(domain.RoleViewer), pw, at0); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("NewUser with password %q: %v, want a validation error", pw, err)
		}
		if _, err := domain.HashPassword(pw); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("HashPassword(%q): %v, want a validation error", pw, err)
		}
	}
}
