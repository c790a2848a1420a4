package domain

import (
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

// stamp normalises a timestamp to UTC at microsecond precision, the
// precision stores keep, so a value reads back exactly as it was made.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
