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

// An operator's time is kept only within years 1–9999 in UTC: a time that
// parses but lies outside (a zone offset past the year's end) is refused
// by the domain, not by a store at write (a 500 on Postgres).
func TestOperatorTimesOutsideTheStoresRangeAreRefused(t *testing.T) {
	fw := mustFirmware(t, "fw", "cam-x1", "1.2.0", "")
	for _, c := range []struct {
		s  string
		ok bool
	}{
		{"9999-12-31T23:59:59Z", true},
		{"9999-12-31T23:59:59-23:59", false}, // 10000-01-02 UTC
		{"0001-01-01T00:00:00Z", true},
		{"0001-01-01T00:00:00+01:00", false}, // year 0 in UTC
	} {
		at, err := domain.ParseInstant("since", c.s)
		if (err == nil) != c.ok {
			t.Errorf("ParseInstant(%q) = %v, %v; want ok %v", c.s, at, err, c.ok)
		}
		if err != nil && !errors.Is(err, domain.ErrValidation) {
			t.Errorf("ParseInstant(%q): %v, want a validation error", c.s, err)
		}
		parsed, perr := time.Parse(time.RFC3339, c.s)
		if perr != nil {
			t.Fatal(perr)
		}
		_, err = domain.NewRollout(idOf(rolloutA), fw, domain.RolloutSpec{Percentage: 5, StartsAt: &parsed}, t0)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, domain.ErrValidation)) {
			t.Errorf("a rollout starting at %s: %v, want ok %v", c.s, err, c.ok)
		}
	}
}

// A merge's size counts a stored name once: the bound (64) is judged on
// what the merge would leave, not on the two reports added up.
func TestMergedLenCountsStoredNamesOnce(t *testing.T) {
	var a domain.DeviceAttributes
	if err := a.Apply(domain.AttributesReplace, map[string]string{"a": "1", "b": "2"}, t0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		data map[string]string
		want int
	}{
		{map[string]string{}, 2},
		{map[string]string{"a": "9"}, 2},
		{map[string]string{"a": "9", "c": "3"}, 3},
		{map[string]string{"c": "3", "d": "4"}, 4},
	} {
		if got := a.MergedLen(c.data); got != c.want {
			t.Errorf("MergedLen(%v) = %d, want %d", c.data, got, c.want)
		}
	}
}
