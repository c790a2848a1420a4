package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// TestWebhookSignature signs as a delivery does and verifies as a
// receiver must: the body and timestamp as sent verify with either secret
// of a rotation; a tampered body, a moved timestamp, an unknown secret or
// a stale delivery do not.
func TestWebhookSignature(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"id":"e1","type":"task.succeeded"}`)
	const newSecret, oldSecret = "whsec_new_secret_of_24_chars", "whsec_old_secret_of_24_chars"
	header := domain.WebhookSignature([]string{newSecret, oldSecret}, now, body)
	if !strings.HasPrefix(header, "t=1796385600,v1=") || strings.Count(header, ",v1=") != 2 {
		t.Fatalf("header %q: want t=<unix>,v1=<hex>,v1=<hex>", header)
	}
	for _, secrets := range [][]string{{newSecret}, {oldSecret}, {"another one entirely......", newSecret}} {
		if err := domain.VerifyWebhook(header, secrets, body, now.Add(time.Minute), domain.WebhookReplayWindow); err != nil {
			t.Fatalf("verifying with %v: %v", secrets, err)
		}
	}
	tampered := []byte(strings.Replace(string(body), "succeeded", "failed", 1))
	moved := strings.Replace(header, "t=1796385600", "t=1796385601", 1)
	for name, tc := range map[string]struct {
		header  string
		secrets []string
		body    []byte
		now     time.Time
	}{
		"tampered body":   {header, []string{newSecret}, tampered, now},
		"moved timestamp": {moved, []string{newSecret}, body, now},
		"unknown secret":  {header, []string{"whsec_someone_else_entirely"}, body, now},
		"replayed late":   {header, []string{newSecret}, body, now.Add(domain.WebhookReplayWindow + time.Second)},
		"from the future": {header, []string{newSecret}, body, now.Add(-domain.WebhookReplayWindow - time.Second)},
		"no signature":    {"t=1796385600", []string{newSecret}, body, now},
		"no timestamp":    {header[strings.Index(header, ",")+1:], []string{newSecret}, body, now},
	} {
		if err := domain.VerifyWebhook(tc.header, tc.secrets, tc.body, tc.now, domain.WebhookReplayWindow); !errors.Is(err, domain.ErrWebhookSignature) {
			t.Errorf("%s: %v, want ErrWebhookSignature", name, err)
		}
	}
	// The hex is HMAC-SHA256(secret, "<t>." + body), as the README's shell
	// check computes it with openssl.
	if got := domain.SignWebhook("key", time.Unix(1, 0), []byte("x")); got != "fc4913c41a7bf793267e2a384f3261c9436ec2cd097bd745e7b0d99113f510ec" {
		t.Fatalf("signature %q", got)
	}
}

// W6: a receiver accepts a delivery whose timestamp is up to five minutes
// from its clock, either way, the bounds included, and refuses one a
// second further.
func TestWebhookReplayWindowBounds(t *testing.T) {
	sent := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"id":"e2"}`)
	const secret = "whsec_window_secret_24ch"
	header := domain.WebhookSignature([]string{secret}, sent, body)
	for _, skew := range []time.Duration{5 * time.Minute, -5 * time.Minute, 0} {
		if err := domain.VerifyWebhook(header, []string{secret}, body, sent.Add(skew), domain.WebhookReplayWindow); err != nil {
			t.Errorf("a receiver %v off the sender: %v", skew, err)
		}
	}
	for _, skew := range []time.Duration{5*time.Minute + time.Second, -5*time.Minute - time.Second} {
		if err := domain.VerifyWebhook(header, []string{secret}, body, sent.Add(skew), domain.WebhookReplayWindow); !errors.Is(err, domain.ErrWebhookSignature) {
			t.Errorf("a receiver %v off the sender: %v, want ErrWebhookSignature", skew, err)
		}
	}
}
