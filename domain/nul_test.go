package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// An operator's string a store keeps as text is refused with a NUL in it
// (Postgres refuses NUL in text: it would surface as a 500), in both
// stores alike since the domain refuses it.
func TestOperatorStringsWithNULAreRefused(t *testing.T) {
	releaser := mustUser(t, "rel", domain.RoleReleaser)
	id := domain.UUIDOf([16]byte{1})
	if _, _, err := domain.NewAPIToken(id, domain.UserPrincipal(releaser), "c\x00i", domain.PermissionsOf(domain.PermArtifactsWrite),
		at0.Add(time.Hour), at0); !errors.Is(err, domain.ErrValidation) {
		t.Errorf("a token named with a NUL: %v, want a validation error", err)
	}
	secret := "a long enough secret, but\x00with a NUL"
	if _, err := domain.NewWebhookSubscription(idOf("nul"), "https://hooks.example.com/nul", nil, secret, t0); !errors.Is(err, domain.ErrValidation) {
		t.Errorf("a webhook secret with a NUL: %v, want a validation error", err)
	}
	w := mustWebhook(t, "rotated", nil)
	if err := w.RotateSecret(secret, t0); !errors.Is(err, domain.ErrValidation) {
		t.Errorf("a rotated webhook secret with a NUL: %v, want a validation error", err)
	}
}
