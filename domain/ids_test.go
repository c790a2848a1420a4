package domain_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ai-device/ota/domain"
)

func TestValidateIdentifier(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"single char", "a", true},
		{"single digit", "7", true},
		{"full alphabet", "AZaz09._:-", true},
		{"typical device id", "cam-0001", true},
		{"mac style", "aa:bb:cc:dd:ee:ff", true},
		{"dotted model", "AI.Box_v2", true},
		{"exactly 64", strings.Repeat("x", 64), true},
		{"empty", "", false},
		{"65 chars", strings.Repeat("x", 65), false},
		{"space", "cam 01", false},
		{"slash", "cam/01", false},
		{"percent", "cam%01", false},
		{"plus", "cam+01", false},
		{"at", "cam@01", false},
		{"star", "cam*", false},
		{"leading space", " cam", false},
		{"trailing newline", "cam\n", false},
		{"NUL", "cam\x00", false},
		{"non-ASCII letter", "camé", false},
		{"fullwidth digit", "cam１", false},
		{"braces (lock name injection)", "{cam}", false},
		{"invalid UTF-8", "cam\xff", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := domain.ValidateIdentifier("device_id", tt.in)
			if tt.ok {
				if err != nil {
					t.Fatalf("ValidateIdentifier(%q) = %v, want nil", tt.in, err)
				}
				return
			}
			wantValidation(t, err, "device_id")
		})
	}
}

func TestValidateIdentifierReportsGivenField(t *testing.T) {
	wantValidation(t, domain.ValidateIdentifier("model", ""), "model")
	wantValidation(t, domain.ValidateIdentifier("model", "a b"), "model")
	wantValidation(t, domain.ValidateIdentifier("model", strings.Repeat("m", 65)), "model")
}

func TestValidateText(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		ok   bool
	}{
		{"empty", "", 10, true},
		{"ascii", "hello", 10, true},
		{"exactly max", "0123456789", 10, true},
		{"one over max", "0123456789a", 10, false},
		{"multibyte within bytes", "héllo", 6, true},           // 6 bytes
		{"multibyte counted in bytes", "héllo", 5, false},      // 5 runes but 6 bytes
		{"emoji and CJK", "更新 ✓ 🚀", 64, true},                  // valid UTF-8
		{"tabs and newlines allowed", "a\tb\nc\r\n", 64, true}, // only NUL is refused
		{"NUL at start", "\x00abc", 64, false},
		{"NUL in middle", "ab\x00c", 64, false},
		{"NUL at end", "abc\x00", 64, false},
		{"invalid byte", "ab\xffc", 64, false},
		{"truncated multibyte", "caf\xc3", 64, false},
		{"overlong encoding", "\xc0\xaf", 64, false},
		{"UTF-16 surrogate half", "\xed\xa0\x80", 64, false},
		{"zero max refuses non-empty", "a", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := domain.ValidateText("notes", tt.in, tt.max)
			if tt.ok {
				if err != nil {
					t.Fatalf("ValidateText(%q, %d) = %v, want nil", tt.in, tt.max, err)
				}
				return
			}
			wantValidation(t, err, "notes")
		})
	}
}

func TestValidationErrorMessages(t *testing.T) {
	err := &domain.ValidationError{Field: "size_bytes", Reason: "must be greater than 0"}
	if got, want := err.Error(), "size_bytes: must be greater than 0"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	noField := &domain.ValidationError{Reason: "body is not JSON"}
	if got := noField.Error(); got != "body is not JSON" {
		t.Fatalf("Error() without field = %q", got)
	}
	if !errors.Is(err, domain.ErrValidation) {
		t.Fatal("ValidationError must unwrap to ErrValidation")
	}
	if errors.Is(err, domain.ErrInvalidTransition) {
		t.Fatal("ValidationError must not match an unrelated sentinel")
	}
}

func TestTransitionErrorUnwrapsToKind(t *testing.T) {
	for _, kind := range []error{domain.ErrInvalidTransition, domain.ErrTaskFinished} {
		err := &domain.TransitionError{Kind: kind, Detail: "because"}
		if !errors.Is(err, kind) {
			t.Fatalf("TransitionError{%v} does not match its kind", kind)
		}
		if err.Error() != "because" {
			t.Fatalf("Error() = %q", err.Error())
		}
	}
	err := &domain.TransitionError{Kind: domain.ErrTaskFinished, Detail: "x"}
	if errors.Is(err, domain.ErrInvalidTransition) {
		t.Fatal("ErrTaskFinished transition must not match ErrInvalidTransition")
	}
}
