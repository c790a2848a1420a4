package domain

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// WebhookSignatureHeader is the header a delivery's signature travels in:
// "t=<unix seconds>,v1=<hex>[,v1=<hex>]", one v1 per signing secret (two
// during a rotation, so a receiver holding either secret verifies).
const WebhookSignatureHeader = "X-OTA-Signature"

// WebhookReplayWindow is how far a delivery's timestamp may be from the
// receiver's clock: a captured delivery replayed later than this is
// refused, and the timestamp cannot be moved without breaking the MAC.
const WebhookReplayWindow = 5 * time.Minute

// ErrWebhookSignature is a delivery whose signature does not verify: no
// v1 made with a known secret over its timestamp and body, or a timestamp
// outside the replay window.
var ErrWebhookSignature = errors.New("webhook signature does not verify")

// SignWebhook is the lowercase hex HMAC-SHA256, keyed by secret, of
// "<t in unix seconds>." followed by body: the timestamp is signed with
// the body so that neither can be changed alone.
func SignWebhook(secret string, t time.Time, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(t.Unix(), 10) + "."))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// WebhookSignature is the signature header's value for body sent at t,
// signed by each of secrets.
func WebhookSignature(secrets []string, t time.Time, body []byte) string {
	var b strings.Builder
	b.WriteString("t=" + strconv.FormatInt(t.Unix(), 10))
	for _, s := range secrets {
		b.WriteString(",v1=" + SignWebhook(s, t, body))
	}
	return b.String()
}

// VerifyWebhook checks a delivery as a receiver must: the header's
// timestamp within window of now, and one of its v1 signatures made by
// one of secrets over that timestamp and body, compared in constant time.
func VerifyWebhook(header string, secrets []string, body []byte, now time.Time, window time.Duration) error {
	var (
		t    int64
		seen bool
		sigs [][]byte
	)
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || seen {
				return fmt.Errorf("%w: a malformed timestamp", ErrWebhookSignature)
			}
			t, seen = n, true
		case "v1":
			if sig, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	if !seen || len(sigs) == 0 {
		return fmt.Errorf("%w: no timestamp or no v1 signature", ErrWebhookSignature)
	}
	at := time.Unix(t, 0)
	if d := now.Sub(at); d > window || d < -window {
		return fmt.Errorf("%w: timestamp %s is outside the %s window", ErrWebhookSignature, at.UTC().Format(time.RFC3339), window)
	}
	for _, secret := range secrets {
		want, _ := hex.DecodeString(SignWebhook(secret, at, body))
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: no signature made with a known secret", ErrWebhookSignature)
}
