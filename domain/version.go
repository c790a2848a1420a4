package domain

import (
	"golang.org/x/mod/semver"
)

// isSemver reports whether s is a version of the Semantic Versioning 2.0.0
// grammar (semver.org, §2, §9, §10): MAJOR.MINOR.PATCH, numeric without
// leading zeros, then an optional pre-release (dot-separated identifiers of
// [0-9A-Za-z-], numeric ones without leading zeros) and optional build
// metadata (dot-separated identifiers of [0-9A-Za-z-]). x/mod/semver alone
// accepts shorthand such as "1.2", which SemVer does not. It is a scan
// rather than the regular expression semver.org publishes because every
// device check parses the version it reports: the scan allocates nothing
// and costs a fraction of the regexp; FuzzParseVersion holds it to an
// independent reading of the grammar.
func isSemver(s string) bool {
	i := 0
	for part := range 3 {
		if part > 0 {
			if i == len(s) || s[i] != '.' {
				return false
			}
			i++
		}
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start || (s[start] == '0' && i-start > 1) {
			return false
		}
	}
	if i < len(s) && s[i] == '-' {
		if i = semverIdentifiers(s, i+1, true); i < 0 {
			return false
		}
	}
	if i < len(s) && s[i] == '+' {
		if i = semverIdentifiers(s, i+1, false); i < 0 {
			return false
		}
	}
	return i == len(s)
}

// semverIdentifiers scans dot-separated identifiers of [0-9A-Za-z-] from
// s[i:] and returns where they end, or -1 when one is empty or, for a
// pre-release (numeric set), is numeric with a leading zero.
func semverIdentifiers(s string, i int, numeric bool) int {
	for {
		start, digits := i, true
		for i < len(s) && isIdentifierChar(s[i]) {
			digits = digits && isDigit(s[i])
			i++
		}
		if i == start || (numeric && digits && s[start] == '0' && i-start > 1) {
			return -1
		}
		if i == len(s) || s[i] != '.' {
			return i
		}
		i++
	}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isIdentifierChar(c byte) bool {
	return isDigit(c) || c == '-' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

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
	if !isSemver(s) {
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
