package domain_test

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/ai-device/ota/domain"
)

func TestNewDeviceToken(t *testing.T) {
	const n = 1000
	seen := make(map[string]bool, n)
	seenHash := make(map[domain.TokenHash]bool, n)
	var ones [256]int // per-bit counts over the random part
	minBits := 1 << 30
	for i := 0; i < n; i++ {
		tok, h, err := domain.NewDeviceToken()
		if err != nil {
			t.Fatalf("NewDeviceToken: %v", err)
		}
		if seen[tok] || seenHash[h] {
			t.Fatalf("token repeated after %d draws", i)
		}
		seen[tok], seenHash[h] = true, true
		if h != domain.HashToken(tok) || h != domain.TokenHash(sha256.Sum256([]byte(tok))) {
			t.Fatal("returned hash is not SHA-256 of the token")
		}
		// URL-safe: the token may travel in headers and URLs unescaped.
		if strings.ContainsAny(tok, "+/= \t\n") {
			t.Fatalf("token %q is not URL-safe", tok)
		}
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, "dev_"))
		if err != nil {
			t.Fatalf("token %q is not unpadded URL-safe base64 after its prefix: %v", tok, err)
		}
		if bits := len(raw) * 8; bits < minBits {
			minBits = bits
		}
		for b := 0; b < len(raw)*8 && b < len(ones); b++ {
			if raw[b/8]&(1<<(b%8)) != 0 {
				ones[b]++
			}
		}
	}
	if minBits < 128 {
		t.Fatalf("token carries %d random bits, want at least 128", minBits)
	}
	// Every bit should be set in about half the tokens (σ ≈ 16 for n=1000);
	// a stuck bit or a constant byte lands far outside 350..650.
	for b := 0; b < minBits && b < len(ones); b++ {
		if ones[b] < 350 || ones[b] > 650 {
			t.Fatalf("bit %d set in %d of %d tokens: not random", b, ones[b], n)
		}
	}
}

func TestHashToken(t *testing.T) {
	tests := []string{"", "dev_abc", "a much longer token with spaces", "ü"}
	for _, tok := range tests {
		want := sha256.Sum256([]byte(tok))
		if got := domain.HashToken(tok); got != domain.TokenHash(want) {
			t.Errorf("HashToken(%q) = %x, want %x", tok, got, want)
		}
	}
	if domain.HashToken("a") == domain.HashToken("A") {
		t.Error("hash is case-insensitive")
	}
}

func TestTokenHashMatches(t *testing.T) {
	a, b := domain.HashToken("dev_one"), domain.HashToken("dev_two")
	flip := a
	flip[31] ^= 1
	var zero domain.TokenHash
	tests := []struct {
		name string
		x, y domain.TokenHash
		want bool
	}{
		{"same", a, domain.HashToken("dev_one"), true},
		{"different", a, b, false},
		{"last bit differs", a, flip, false},
		{"zero vs real", zero, a, false},
		{"zero vs zero", zero, zero, true},
	}
	for _, tt := range tests {
		if got := tt.x.Matches(tt.y); got != tt.want {
			t.Errorf("%s: Matches = %v, want %v", tt.name, got, tt.want)
		}
		if got := tt.y.Matches(tt.x); got != tt.want {
			t.Errorf("%s: Matches not symmetric", tt.name)
		}
	}
}

func TestSecretEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"s3cret-admin-token", "s3cret-admin-token", true},
		{"", "", true},
		{"s3cret-admin-token", "s3cret-admin-tokeN", false},
		{"s3cret-admin-token", "s3cret-admin-toke", false},
		{"s3cret-admin-token", "s3cret-admin-token ", false},
		{"s3cret", "", false},
		{"", "s3cret", false},
		{"abc", "abc\x00", false},
	}
	for _, tt := range tests {
		if got := domain.SecretEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("SecretEqual(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
