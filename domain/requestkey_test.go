package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

func TestParseRequestKey(t *testing.T) {
	for _, ok := range []string{"", "a", "0b7f-UUID_like.key:~!", strings.Repeat("k", domain.MaxRequestKeyLen)} {
		k, err := domain.ParseRequestKey(ok)
		if err != nil || k.Key() != ok || k.IsZero() != (ok == "") {
			t.Errorf("ParseRequestKey(%q) = %+v, %v; want the key", ok, k, err)
		}
	}
	for _, bad := range []string{strings.Repeat("k", domain.MaxRequestKeyLen+1), "a b", "tab\tkey", "nul\x00", "é", "\x7f"} {
		var ve *domain.ValidationError
		if _, err := domain.ParseRequestKey(bad); !errors.As(err, &ve) || ve.Field != "Idempotency-Key" {
			t.Errorf("ParseRequestKey(%q): %v, want a ValidationError of Idempotency-Key", bad, err)
		}
	}
}

// TestRequestKeyRepeats: a start is a retry of another when the firmware
// and every field it gives are equal (a time in another zone is the same
// instant); anything else under the key is a conflict.
func TestRequestKeyRepeats(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	other := mustFirmware(t, "fw-3", "cam-x1", "3.0.0", "")
	key, err := domain.ParseRequestKey("start-1")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)
	inParis := at.In(time.FixedZone("CET", 3600))
	base := domain.RolloutSpec{Percentage: 10, RequestKey: key, StartsAt: &at,
		Selector: domain.SelectorSpec{TagsAll: []string{"lab"}, Attributes: map[string]string{"region": "eu", "hw": "b"}}}
	first, err := domain.NewRollout(idOf("ro-1"), fw, base, at)
	if err != nil {
		t.Fatal(err)
	}
	if first.RequestKey().Key() != "start-1" || len(first.RequestKey().Fingerprint()) != 64 {
		t.Fatalf("the rollout's key %+v, want start-1 with a SHA-256 fingerprint", first.RequestKey())
	}
	same := base
	same.StartsAt = &inParis
	same.Selector.Attributes = map[string]string{"hw": "b", "region": "eu"}
	different := func(change func(*domain.RolloutSpec)) domain.RolloutSpec {
		s := base
		s.Selector.TagsAll = []string{"lab"}
		change(&s)
		return s
	}
	for _, c := range []struct {
		name     string
		firmware domain.Firmware
		spec     domain.RolloutSpec
		repeats  bool
	}{
		{"the same request", fw, base, true},
		{"the same instant in another zone, the same map in another order", fw, same, true},
		{"another firmware", other, base, false},
		{"another percentage", fw, different(func(s *domain.RolloutSpec) { s.Percentage = 20 }), false},
		{"another selector", fw, different(func(s *domain.RolloutSpec) { s.Selector.TagsAll = []string{"field"} }), false},
		{"a threshold added", fw, different(func(s *domain.RolloutSpec) { s.FailureThresholdPercent = new(5) }), false},
		{"no start time", fw, different(func(s *domain.RolloutSpec) { s.StartsAt = nil }), false},
	} {
		k, err := c.spec.KeyFor(c.firmware.ID())
		if err != nil {
			t.Fatal(err)
		}
		err = k.Repeats(first.RequestKey())
		if c.repeats != (err == nil) {
			t.Errorf("%s: Repeats = %v, want repeats=%v", c.name, err, c.repeats)
		}
		if err != nil && (!errors.Is(err, domain.ErrRequestKeyConflict) || !errors.Is(err, domain.ErrIdempotencyConflict)) {
			t.Errorf("%s: %v, want ErrRequestKeyConflict (an ErrIdempotencyConflict)", c.name, err)
		}
	}
	// Another key never repeats, whatever the request; no key is no key.
	k2, _ := domain.ParseRequestKey("start-2")
	spec2 := base
	spec2.RequestKey = k2
	if k, _ := spec2.KeyFor(fw.ID()); k.Repeats(first.RequestKey()) == nil {
		t.Error("another key repeats the first")
	}
	keyless := base
	keyless.RequestKey = domain.RequestKey{}
	if k, err := keyless.KeyFor(fw.ID()); err != nil || !k.IsZero() || k.Fingerprint() != "" {
		t.Errorf("no key: %+v, %v; want the zero key", k, err)
	}
	if r, err := domain.NewRollout(idOf("ro-2"), fw, keyless, at); err != nil || !r.RequestKey().IsZero() {
		t.Errorf("a rollout started without a key has %+v (%v)", r.RequestKey(), err)
	}
}
