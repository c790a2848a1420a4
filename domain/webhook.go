package domain

import (
	"crypto/rand"
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
	"time"
)

// WebhookSubscription is an operator's endpoint that is sent the events
// of the types it names (all types when it names none), each delivery
// signed with its secret.
type WebhookSubscription struct {
	id                  UUID
	url                 string
	eventTypes          []EventType
	secret              string
	previousSecret      string
	previousSecretUntil time.Time
	enabled             bool
	disabledReason      string
	failingSince        time.Time
	createdAt           time.Time
	updatedAt           time.Time
}

// minWebhookSecret is the shortest secret an operator may choose: a
// signature is only as strong as its key.
const minWebhookSecret = 24

// SecretRotationOverlap is how long the previous secret still signs after
// a rotation, so that a receiver can switch to the new one meanwhile.
const SecretRotationOverlap = 24 * time.Hour

// NewWebhookSubscription is an enabled subscription of rawURL (http or
// https, no credentials in it) to types (none: every type), signing with
// secret (empty: a random one, which the caller shows once). Whether the
// URL's host may be a private or loopback address is the delivery's
// rule, judged where it connects.
func NewWebhookSubscription(id UUID, rawURL string, types []string, secret string, now time.Time) (WebhookSubscription, error) {
	s := WebhookSubscription{id: id, enabled: true, createdAt: stamp(now), updatedAt: stamp(now)}
	if err := s.setURL(rawURL); err != nil {
		return WebhookSubscription{}, err
	}
	if err := s.setTypes(types); err != nil {
		return WebhookSubscription{}, err
	}
	if secret == "" {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return WebhookSubscription{}, err
		}
		secret = "whsec_" + base64.RawURLEncoding.EncodeToString(b[:])
	}
	if len(secret) < minWebhookSecret || len(secret) > 256 {
		return WebhookSubscription{}, invalid("secret", "must be %d to 256 characters", minWebhookSecret)
	}
	if err := ValidateText("secret", secret, 256); err != nil {
		return WebhookSubscription{}, err
	}
	s.secret = secret
	return s, nil
}

func (s *WebhookSubscription) setURL(raw string) error {
	// Text first: a query keeps its bytes as given, and a URL no store
	// keeps as given (invalid UTF-8, NUL) is refused on every store alike.
	if err := ValidateText("url", raw, 2048); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("url", "must be an http or https URL")
	}
	if u.User != nil {
		return invalid("url", "must not carry credentials: the secret signs each delivery")
	}
	s.url = u.String()
	return nil
}

func (s *WebhookSubscription) setTypes(types []string) error {
	out := make([]EventType, 0, len(types))
	for _, t := range types {
		et, err := ParseEventType(strings.TrimSpace(t))
		if err != nil {
			return err
		}
		if et == EventTest {
			return invalid("event_types", "webhook.test is sent on request only")
		}
		if !slices.Contains(out, et) {
			out = append(out, et)
		}
	}
	slices.Sort(out)
	s.eventTypes = out
	return nil
}

// RehydrateWebhookSubscription rebuilds a stored subscription.
func RehydrateWebhookSubscription(id UUID, rawURL string, types []EventType, secret, previousSecret string, previousUntil time.Time,
	enabled bool, disabledReason string, failingSince, createdAt, updatedAt time.Time) WebhookSubscription {
	return WebhookSubscription{id: id, url: rawURL, eventTypes: slices.Clone(types), secret: secret, previousSecret: previousSecret,
		previousSecretUntil: stamp(previousUntil), enabled: enabled, disabledReason: disabledReason, failingSince: stamp(failingSince),
		createdAt: stamp(createdAt), updatedAt: stamp(updatedAt)}
}

// ID names the subscription.
func (s WebhookSubscription) ID() UUID { return s.id }

// URL is where deliveries are posted.
func (s WebhookSubscription) URL() string { return s.url }

// EventTypes are the types it wants (none: every type).
func (s WebhookSubscription) EventTypes() []EventType { return slices.Clone(s.eventTypes) }

// Wants reports whether an event of type t is sent to it.
func (s WebhookSubscription) Wants(t EventType) bool {
	return t == EventTest || len(s.eventTypes) == 0 || slices.Contains(s.eventTypes, t)
}

// Secret signs its deliveries; it is shown once, at creation or rotation.
func (s WebhookSubscription) Secret() string { return s.secret }

// SigningSecrets are the secrets that sign a delivery at now: the current
// one, and the previous one during a rotation's overlap.
func (s WebhookSubscription) SigningSecrets(now time.Time) []string {
	if s.previousSecret != "" && now.Before(s.previousSecretUntil) {
		return []string{s.secret, s.previousSecret}
	}
	return []string{s.secret}
}

// PreviousSecret is the secret a rotation replaced, and until when it
// still signs (zero: none).
func (s WebhookSubscription) PreviousSecret() (string, time.Time) {
	return s.previousSecret, s.previousSecretUntil
}

// Enabled reports whether events are delivered to it.
func (s WebhookSubscription) Enabled() bool { return s.enabled }

// DisabledReason says why it was disabled ("" when enabled, or when an
// operator disabled it).
func (s WebhookSubscription) DisabledReason() string { return s.disabledReason }

// FailingSince is when its deliveries started failing without a success
// since (zero: they are not failing).
func (s WebhookSubscription) FailingSince() time.Time { return s.failingSince }

// CreatedAt is when it was created.
func (s WebhookSubscription) CreatedAt() time.Time { return s.createdAt }

// UpdatedAt is when it last changed.
func (s WebhookSubscription) UpdatedAt() time.Time { return s.updatedAt }

// Change sets its URL and types (nil: unchanged) and whether it is
// enabled (nil: unchanged); enabling clears why it was disabled and its
// failures.
func (s *WebhookSubscription) Change(rawURL *string, types []string, enabled *bool, now time.Time) error {
	next := *s
	if rawURL != nil {
		if err := next.setURL(*rawURL); err != nil {
			return err
		}
	}
	if types != nil {
		if err := next.setTypes(types); err != nil {
			return err
		}
	}
	if enabled != nil {
		next.enabled = *enabled
		next.disabledReason = ""
		if *enabled {
			next.failingSince = time.Time{}
		}
	}
	next.updatedAt = stamp(now)
	*s = next
	return nil
}

// RotateSecret makes secret (empty: a random one) the signing secret; the
// current one keeps signing too for SecretRotationOverlap.
func (s *WebhookSubscription) RotateSecret(secret string, now time.Time) error {
	fresh, err := NewWebhookSubscription(s.id, s.url, nil, secret, now)
	if err != nil {
		return err
	}
	s.previousSecret, s.previousSecretUntil = s.secret, stamp(now.Add(SecretRotationOverlap))
	s.secret, s.updatedAt = fresh.secret, stamp(now)
	return nil
}

// Failed notes a failed delivery at now: the first failure since a
// success starts the failing period; a subscription failing for longer
// than giveUp is disabled, saying so.
func (s *WebhookSubscription) Failed(now time.Time, giveUp time.Duration) {
	if s.failingSince.IsZero() {
		s.failingSince = stamp(now)
	}
	if s.enabled && now.Sub(s.failingSince) >= giveUp {
		s.enabled = false
		s.disabledReason = "every delivery failed for " + giveUp.String() + " since " + s.failingSince.Format(time.RFC3339)
	}
	s.updatedAt = stamp(now)
}

// Succeeded notes an event delivered at now: the subscription is not
// failing — unless its failing period began after now (a failure another
// worker stored after this delivery), which stands. Stores that end
// failing periods in bulk (FinishDeliveries) apply the same rule.
func (s *WebhookSubscription) Succeeded(now time.Time) {
	if s.failingSince.After(now) {
		return
	}
	s.failingSince = time.Time{}
	if now.After(s.updatedAt) { // a delivery stored late does not move the row back in time
		s.updatedAt = stamp(now)
	}
}
