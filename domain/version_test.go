package domain_test

import (
	"strings"
	"testing"

	"github.com/ai-device/ota/domain"
)

func TestParseVersionValid(t *testing.T) {
	// 64 characters exactly: the longest accepted.
	max64 := "1.0.0-" + strings.Repeat("a", 58)
	if len(max64) != domain.MaxVersionLen {
		t.Fatalf("fixture length %d", len(max64))
	}
	tests := []string{
		"0.0.0",
		"1.2.3",
		"10.20.30",
		"1.0.0-alpha",
		"1.0.0-alpha.1",
		"1.0.0-0.3.7",
		"1.0.0-x.7.z.92",
		"1.0.0-x-y-z.--",
		"1.0.0-0a",
		"1.0.0-alpha+001",
		"1.0.0+20130313144700",
		"1.0.0-beta+exp.sha.5114f85",
		"1.0.0+21AF26D3----117B344092BD",
		"1.4.0-rc.1+build.7",
		"99999999999999999999.0.0",
		max64,
	}
	for _, in := range tests {
		t.Run(in, func(t *testing.T) {
			v, err := domain.ParseVersion("version", in)
			if err != nil {
				t.Fatalf("ParseVersion(%q) = %v", in, err)
			}
			if v.IsZero() {
				t.Fatal("parsed version reports IsZero")
			}
			if v.String() != in {
				t.Fatalf("String() = %q, want the input %q", v.String(), in)
			}
		})
	}
}

func TestParseVersionInvalid(t *testing.T) {
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"major only", "1"},
		{"two parts", "1.2"},
		{"four parts", "1.2.3.4"},
		{"v prefix", "v1.2.3"},
		{"V prefix", "V1.2.3"},
		{"leading zero major", "01.2.3"},
		{"leading zero minor", "1.02.3"},
		{"leading zero patch", "1.2.03"},
		{"empty prerelease", "1.2.3-"},
		{"empty build", "1.2.3+"},
		{"leading zero numeric prerelease", "1.2.3-01"},
		{"empty prerelease identifier", "1.2.3-alpha..1"},
		{"empty build identifier", "1.2.3+a..b"},
		{"trailing dot prerelease", "1.2.3-alpha."},
		{"negative", "-1.2.3"},
		{"letters", "a.b.c"},
		{"leading space", " 1.2.3"},
		{"trailing space", "1.2.3 "},
		{"trailing newline", "1.2.3\n"},
		{"non-ASCII prerelease", "1.2.3-α"},
		{"underscore prerelease", "1.2.3-a_b"},
		{"non-ASCII digit", "1.2.٣"},
		{"overlong but well-formed", "1.0.0-" + strings.Repeat("a", 59)},
		{"far overlong", strings.Repeat("9", 1000) + ".0.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := domain.ParseVersion("current_version", tt.in)
			wantValidation(t, err, "current_version")
			if !v.IsZero() {
				t.Fatalf("failed parse returned non-zero version %q", v)
			}
		})
	}
}

func TestMustParseVersion(t *testing.T) {
	if got := domain.MustParseVersion("2.0.0-rc.1").String(); got != "2.0.0-rc.1" {
		t.Fatalf("MustParseVersion = %q", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("MustParseVersion(\"1.2\") did not panic")
		}
	}()
	domain.MustParseVersion("1.2")
}

func TestVersionPrecedenceChain(t *testing.T) {
	// Each entry has strictly higher precedence than the one before it
	// (the example chain of SemVer 2.0 §11, plus numeric and zero cases).
	chain := []string{
		"0.0.0",
		"0.0.1",
		"0.9.0",
		"1.0.0-0",
		"1.0.0-9",
		"1.0.0-10", // numeric identifiers compare numerically
		"1.0.0-A",  // alphanumeric above numeric; ASCII order: upper before lower
		"1.0.0-alpha",
		"1.0.0-alpha.1",
		"1.0.0-alpha.beta",
		"1.0.0-beta",
		"1.0.0-beta.2",
		"1.0.0-beta.11",
		"1.0.0-rc.1",
		"1.0.0",
		"1.0.1",
		"1.9.0",
		"1.10.0",
		"1.11.0",
		"2.0.0",
		"10.0.0",
		"9999999999999999999.0.0",
		"99999999999999999999.0.0",
	}
	vs := make([]domain.Version, len(chain))
	for i, s := range chain {
		vs[i] = domain.MustParseVersion(s)
	}
	for i := range vs {
		for j := range vs {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := vs[i].Compare(vs[j]); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", vs[i], vs[j], got, want)
			}
			if got := vs[i].Less(vs[j]); got != (want < 0) {
				t.Errorf("Less(%s, %s) = %v", vs[i], vs[j], got)
			}
			if got := vs[i].Equal(vs[j]); got != (want == 0) {
				t.Errorf("Equal(%s, %s) = %v", vs[i], vs[j], got)
			}
		}
	}
}

func TestVersionBuildMetadataIgnored(t *testing.T) {
	tests := []struct {
		a, b    string
		cmp     int
		key     string // Key of a
		sameKey bool
	}{
		{"1.2.0+a", "1.2.0+b", 0, "1.2.0", true},
		{"1.2.0+a", "1.2.0", 0, "1.2.0", true},
		{"1.2.0", "1.2.0+exp.sha.5114f85", 0, "1.2.0", true},
		{"1.0.0-rc.1+x", "1.0.0-rc.1+y", 0, "1.0.0-rc.1", true},
		{"1.0.0-rc.1+zzz", "1.0.0+aaa", -1, "1.0.0-rc.1", false},
		{"1.2.1+a", "1.2.0+z", 1, "1.2.1", false},
		{"1.2.0+9", "1.2.0+10", 0, "1.2.0", true},
		{"1.2.0-a+b-c", "1.2.0-a", 0, "1.2.0-a", true}, // hyphen after + is build
	}
	for _, tt := range tests {
		t.Run(tt.a+"_vs_"+tt.b, func(t *testing.T) {
			a, b := domain.MustParseVersion(tt.a), domain.MustParseVersion(tt.b)
			if got := a.Compare(b); got != tt.cmp {
				t.Errorf("Compare = %d, want %d", got, tt.cmp)
			}
			if got := b.Compare(a); got != -tt.cmp {
				t.Errorf("reverse Compare = %d, want %d", got, -tt.cmp)
			}
			if got := a.Equal(b); got != (tt.cmp == 0) {
				t.Errorf("Equal = %v", got)
			}
			if got := a.Key(); got != tt.key {
				t.Errorf("Key = %q, want %q", got, tt.key)
			}
			if got := a.Key() == b.Key(); got != tt.sameKey {
				t.Errorf("Key(%s)=%q Key(%s)=%q, same=%v want %v", a, a.Key(), b, b.Key(), got, tt.sameKey)
			}
			if a.String() != tt.a {
				t.Errorf("String dropped build metadata: %q", a.String())
			}
		})
	}
}

func TestZeroVersion(t *testing.T) {
	var zero domain.Version
	if !zero.IsZero() || zero.String() != "" || zero.Key() != "" {
		t.Fatalf("zero version: IsZero=%v String=%q Key=%q", zero.IsZero(), zero.String(), zero.Key())
	}
	if zero.Compare(domain.Version{}) != 0 || !zero.Equal(domain.Version{}) {
		t.Fatal("two zero versions must be equal")
	}
	for _, s := range []string{"0.0.0", "0.0.0-0", "1.0.0"} {
		v := domain.MustParseVersion(s)
		if zero.Compare(v) != -1 || v.Compare(zero) != 1 || !zero.Less(v) || v.Less(zero) || zero.Equal(v) {
			t.Errorf("zero version must sort below %s", s)
		}
	}
}
