package domain

import (
	"regexp"

	"golang.org/x/mod/semver"
)

// semverPattern is the regular expression published with Semantic Versioning
// 2.0.0. x/mod/semver alone accepts shorthand such as "1.2", which SemVer does
// not, so input is checked against the full grammar first.
var semverPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// Version is a Semantic Versioning 2.0 version. Build metadata is kept for
// display but ignored for ordering and identity, so 1.2.0+a equals 1.2.0+b.
// The zero Version is "no version" (a device that has not reported one).
type Version struct {
	raw string
}

// ParseVersion parses a SemVer 2.0 string such as "1.4.0-rc.1+build.7".
func ParseVersion(field, s string) (Version, error) {
	if s == "" {
		return Version{}, invalid(field, "is required")
	}
	if len(s) > MaxVersionLen {
		return Version{}, invalid(field, "must be at most %d characters", MaxVersionLen)
	}
	if !semverPattern.MatchString(s) {
		return Version{}, invalid(field, "must be a semantic version such as 1.2.3")
	}
	return Version{raw: s}, nil
}

// MustParseVersion is ParseVersion for literals in tests and fixtures.
func MustParseVersion(s string) Version {
	v, err := ParseVersion("version", s)
	if err != nil {
		panic(err)
	}
	return v
}

// IsZero reports whether no version is set.
func (v Version) IsZero() bool { return v.raw == "" }

// String returns the version as it was given, build metadata included.
func (v Version) String() string { return v.raw }

// Key is the version without build metadata: the identity used for
// uniqueness of (model, version).
func (v Version) Key() string {
	for i := 0; i < len(v.raw); i++ {
		if v.raw[i] == '+' {
			return v.raw[:i]
		}
	}
	return v.raw
}

// Compare orders versions by SemVer precedence: -1, 0 or +1. The zero
// Version sorts below every real version.
func (v Version) Compare(o Version) int {
	switch {
	case v.IsZero() && o.IsZero():
		return 0
	case v.IsZero():
		return -1
	case o.IsZero():
		return 1
	}
	return semver.Compare("v"+v.raw, "v"+o.raw)
}

// Equal reports equal precedence (build metadata ignored).
func (v Version) Equal(o Version) bool { return v.Compare(o) == 0 }

// Less reports lower precedence.
func (v Version) Less(o Version) bool { return v.Compare(o) < 0 }
