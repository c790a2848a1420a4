package domain

import (
	"encoding/hex"
	"strings"
	"time"
	"unicode/utf8"
)

// Field length limits from the product contract. Every string the service
// accepts is bounded so one request cannot bloat a row or a log line.
const (
	MaxIDLen      = 64
	MaxVersionLen = 64
	MaxURLLen     = 2048
	MaxMessageLen = 1024
	MaxNotesLen   = 16384
)

// ValidateIdentifier checks a device id or model name: 1–64 characters of
// [A-Za-z0-9._:-]. The narrow alphabet keeps ids safe inside lock names,
// log lines and URLs without escaping.
func ValidateIdentifier(field, s string) error {
	if s == "" {
		return invalid(field, "is required")
	}
	if len(s) > MaxIDLen {
		return invalid(field, "must be at most %d characters", MaxIDLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			return invalid(field, "may contain only letters, digits and . _ : -")
		}
	}
	return nil
}

// ValidateText checks a free-form string: valid UTF-8, no NUL, at most max
// bytes. Postgres refuses NUL in text and invalid UTF-8 in JSON, so both are
// caught here instead of surfacing as a 500.
func ValidateText(field, s string, max int) error {
	if len(s) > max {
		return invalid(field, "must be at most %d bytes", max)
	}
	if !utf8.ValidString(s) {
		return invalid(field, "must be valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return invalid(field, "must not contain NUL characters")
	}
	return nil
}

// ParseInstant reads an operator's RFC 3339 time (a query parameter, a
// form field) as an instant a store can keep: ValidateInstant's range.
func ParseInstant(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, invalid(field, "must be an RFC 3339 time such as 2026-01-02T03:04:05Z")
	}
	return t.UTC(), ValidateInstant(field, t)
}

// ValidateInstant checks a time an operator gives: in UTC, within years
// 1–9999, the range RFC 3339 and Postgres's JSON and timestamp encodings
// share — "9999-12-31T23:59:59-23:59" parses, yet is year 10000 in UTC,
// which no store can write (it would surface as a 500).
func ValidateInstant(field string, t time.Time) error {
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return invalid(field, "must be within years 1 to 9999 in UTC")
	}
	return nil
}

// stamp normalises a timestamp to UTC at microsecond precision, the
// precision stores keep, so a value reads back exactly as it was made.
// Every constructor, state change and Rehydrate applies it: no domain
// value holds a finer time, and no store has to truncate one.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// UUID is an identifier of a stored row (firmware, rollout, task, …) that
// has been checked once, at the edge, and is held in the canonical
// lowercase hyphenated form the stores use. Code holding a UUID need not
// re-validate it: the only ways to get a non-zero one are ParseUUID and the
// stores that read it back. The zero UUID is "no id".
type UUID struct{ s string }

// ParseUUID checks that s is a UUID in the hyphenated 36-character form,
// either case, and returns it in canonical lowercase form. Anything else is
// a ValidationError naming field; an edge that reads the id from a URL path
// answers not-found instead, since such a resource cannot exist.
func ParseUUID(field, s string) (UUID, error) {
	if len(s) != 36 {
		return UUID{}, invalid(field, "must be a UUID")
	}
	b := []byte(s)
	for i, c := range b {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return UUID{}, invalid(field, "must be a UUID")
			}
		case c >= '0' && c <= '9' || c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'F':
			b[i] = c - 'A' + 'a'
		default:
			return UUID{}, invalid(field, "must be a UUID")
		}
	}
	return UUID{s: string(b)}, nil
}

// UUIDOf formats 16 bytes as a UUID in canonical form. It is how an id
// generator (ports.IDGenerator) makes a new row's id: a value that cannot be
// malformed, so no store checks it again.
func UUIDOf(b [16]byte) UUID {
	var buf [36]byte
	hex.Encode(buf[0:8], b[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], b[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], b[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], b[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], b[10:])
	return UUID{s: string(buf[:])}
}

// String is the canonical lowercase form ("" for the zero UUID).
func (u UUID) String() string { return u.s }

// IsZero reports whether u is the zero UUID (no id).
func (u UUID) IsZero() bool { return u.s == "" }

// MarshalText renders the canonical form, so an id that reaches an
// encoder (JSON, a log attribute) reads as the string it stands for.
func (u UUID) MarshalText() ([]byte, error) { return []byte(u.s), nil }

// DeviceID is a device identifier checked once, at the edge, against the
// identifier rule (ValidateIdentifier). The zero DeviceID is "no device".
type DeviceID struct{ s string }

// ParseDeviceID checks s against the device id rule and returns it typed;
// a bad id is a ValidationError on field "device_id".
func ParseDeviceID(s string) (DeviceID, error) {
	if err := ValidateIdentifier("device_id", s); err != nil {
		return DeviceID{}, err
	}
	return DeviceID{s: s}, nil
}

// String is the id as the device presented it ("" for the zero DeviceID).
func (d DeviceID) String() string { return d.s }

// IsZero reports whether d is the zero DeviceID.
func (d DeviceID) IsZero() bool { return d.s == "" }

// MarshalText renders the id as the device presented it, so an id that
// reaches an encoder (JSON, a log attribute) reads as that string.
func (d DeviceID) MarshalText() ([]byte, error) { return []byte(d.s), nil }
