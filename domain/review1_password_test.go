package domain_test

import (
	"errors"
	"testing"

	"github.com/ai-device/ota/domain"
)

// docs/ERRORS.md: a field that "is not valid UTF-8 or contains NUL" is
// VALIDATION_FAILED — the rule domain.ValidateText holds every other
// operator text to (a token's name, a webhook secret). A new account's
// password is taken with a NUL (POST /admin/users answers 201) or invalid
// UTF-8 (`otad users create` reads it from stdin as is): only its length
// is judged.
func TestPasswordWithNULOrInvalidUTF8IsAValidationError(t *testing.T) {
	for _, pw := range []string{"correct horse\x00battery", "correct horse \xff\xfe battery"} {
		if _, err := domain.NewUser("bob", string(domain.RoleViewer), pw, at0); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("NewUser with password %q: %v, want a validation error", pw, err)
		}
	}
}
