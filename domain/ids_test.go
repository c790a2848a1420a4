package domain_test

import (
	"encoding/json"
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

func TestParseUUID(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" means refused
	}{
		{"canonical lowercase", "0b6f3c1e-8d2a-4c4e-9f1a-2b3c4d5e6f70", "0b6f3c1e-8d2a-4c4e-9f1a-2b3c4d5e6f70"},
		{"uppercase folds to lowercase", "0B6F3C1E-8D2A-4C4E-9F1A-2B3C4D5E6F70", "0b6f3c1e-8d2a-4c4e-9f1a-2b3c4d5e6f70"},
		{"mixed case", "0b6F3c1E-8d2A-4c4e-9F1a-2b3c4d5e6f70", "0b6f3c1e-8d2a-4c4e-9f1a-2b3c4d5e6f70"},
		{"nil uuid", "00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000"},
		{"empty", "", ""},
		{"no hyphens", "0b6f3c1e8d2a4c4e9f1a2b3c4d5e6f70", ""},
		{"braced", "{0b6f3c1e-8d2a-4c4e-9f1a-2b3c4d5e6f70}", ""},
		{"urn form", "urn:uuid:0b6f3c1e-8d2a-4c4e-9f1a-2b3c4d5e6f70", ""},
		{"hyphen misplaced", "0b6f3c1e8-d2a-4c4e-9f1a-2b3c4d5e6f70", ""},
		{"non-hex letter", "0b6f3c1e-8d2a-4c4e-9f1a-2b3c4d5e6f7g", ""},
		{"one short", "0b6f3c1e-8d2a-4c4e-9f1a-2b3c4d5e6f7", ""},
		{"one long", "0b6f3c1e-8d2a-4c4e-9f1a-2b3c4d5e6f700", ""},
		{"NUL inside", "0b6f3c1e-8d2a-4c4e-9f1a-2b3c4d5e6f7\x00", ""},
		{"space inside", "0b6f3c1e-8d2a-4c4e-9f1a 2b3c4d5e6f70", ""},
		{"not a uuid", "not-a-uuid", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := domain.ParseUUID("id", tt.in)
			if tt.want == "" {
				var ve *domain.ValidationError
				if !errors.As(err, &ve) || ve.Field != "id" || !errors.Is(err, domain.ErrValidation) {
					t.Fatalf("ParseUUID(%q) = %v, %v; want a validation error on field id", tt.in, got, err)
				}
				if !got.IsZero() {
					t.Fatalf("refused input returned non-zero UUID %q", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseUUID(%q): %v", tt.in, err)
			}
			if got.String() != tt.want || got.IsZero() {
				t.Fatalf("ParseUUID(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseDeviceID(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"cam-0001", true},
		{"aa:bb:cc:dd:ee:ff", true},
		{strings.Repeat("x", 64), true},
		{"", false},
		{strings.Repeat("x", 65), false},
		{"cam/01", false},
		{"cam\x00", false},
		{"camé", false},
	}
	for _, tt := range tests {
		got, err := domain.ParseDeviceID(tt.in)
		if !tt.ok {
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field != "device_id" || !got.IsZero() {
				t.Errorf("ParseDeviceID(%q) = %q, %v; want a validation error on device_id", tt.in, got, err)
			}
			continue
		}
		if err != nil || got.String() != tt.in || got.IsZero() {
			t.Errorf("ParseDeviceID(%q) = %q, %v; want it unchanged", tt.in, got, err)
		}
	}
}

// Typed ids encode as the strings they stand for, so one that reaches a
// JSON body or a log attribute reads as the id, never as "{}".
func TestIDsMarshalAsTheirString(t *testing.T) {
	u, err := domain.ParseUUID("id", "3F2504E0-4F89-41D3-9A0C-0305E82C3301")
	if err != nil {
		t.Fatal(err)
	}
	d, err := domain.ParseDeviceID("cam-0001")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"task": u, "device": d, "none": domain.DeviceID{}})
	if err != nil || string(b) != `{"device":"cam-0001","none":"","task":"3f2504e0-4f89-41d3-9a0c-0305e82c3301"}` {
		t.Fatalf("json: %s %v", b, err)
	}
}

func TestUUIDOfIsWhatParseUUIDReadsBack(t *testing.T) {
	b := [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}
	got := domain.UUIDOf(b)
	if got.String() != "01234567-89ab-cdef-fedc-ba9876543210" {
		t.Fatalf("UUIDOf = %q", got)
	}
	back, err := domain.ParseUUID("id", got.String())
	if err != nil || back != got {
		t.Fatalf("ParseUUID(%q) = %v, %v", got, back, err)
	}
}
