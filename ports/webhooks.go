package ports

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ai-device/ota/domain"
)

// NewWebhook is an operator's request to subscribe an endpoint, as
// received. An empty Secret asks for a random one; EventTypes empty means
// every type.
type NewWebhook struct {
	URL        string
	EventTypes []string
	Secret     string
}

// WebhookChange is an operator's change of a subscription; nil fields are
// unchanged. RotateSecret makes a new secret (NewSecret, or a random one
// when empty) while the old one keeps signing for a while.
type WebhookChange struct {
	URL          *string
	EventTypes   []string
	Enabled      *bool
	RotateSecret bool
	NewSecret    string
}

// WebhookCredentials is a subscription with its secret, shown once (at
// creation and at a rotation).
type WebhookCredentials struct {
	Subscription domain.WebhookSubscription
	Secret       string
}

// DeliveryStatus is where a delivery stands: pending (to be tried, or
// tried and to be retried), delivered, or failed (given up, kept).
type DeliveryStatus string

// The delivery statuses.
const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliveryDelivered DeliveryStatus = "delivered"
	DeliveryFailed    DeliveryStatus = "failed"
)

// WebhookDelivery is one event's delivery to one subscription, as its
// log shows it.
type WebhookDelivery struct {
	ID             int64
	EventID        domain.UUID
	EventType      domain.EventType
	Status         DeliveryStatus
	Attempts       int
	NextAttemptAt  time.Time
	LastAttemptAt  time.Time // zero: never tried
	LastStatusCode int       // 0: no HTTP answer
	LastError      string
	CreatedAt      time.Time
}

// DeliveryPage is one page of a subscription's delivery log, newest
// first, and the cursor of the next ("" on the last).
type DeliveryPage struct {
	Items []WebhookDelivery
	Next  string
}

// WebhookEnvelope is what a delivery posts: the event's stable id, its
// type, when it happened, the payload's schema version and its data.
type WebhookEnvelope struct {
	ID      domain.UUID
	Type    domain.EventType
	Time    time.Time
	Version int
	Data    json.RawMessage
}

// MarshalJSON is the envelope on the wire, for every sink alike (a
// webhook's body, a NATS message's data):
// {"id","type","time" (RFC 3339 in UTC),"version","data"}.
func (e WebhookEnvelope) MarshalJSON() ([]byte, error) {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return json.Marshal(struct {
		ID      string          `json:"id"`
		Type    string          `json:"type"`
		Time    string          `json:"time"`
		Version int             `json:"version"`
		Data    json.RawMessage `json:"data"`
	}{e.ID.String(), string(e.Type), e.Time.UTC().Format(time.RFC3339Nano), e.Version, data})
}

// WebhookService is what the edges (the admin API, the console) ask of
// webhook subscriptions. Every call carries who acts; changes are
// audited (docs/DOMAIN.md A1).
type WebhookService interface {
	CreateWebhook(ctx context.Context, actor domain.Actor, req NewWebhook) (WebhookCredentials, error)
	ListWebhooks(ctx context.Context) ([]domain.WebhookSubscription, error)
	GetWebhook(ctx context.Context, id domain.UUID) (domain.WebhookSubscription, error)
	// ChangeWebhook changes a subscription; the secret in the answer is
	// set only when the change rotated it.
	ChangeWebhook(ctx context.Context, actor domain.Actor, id domain.UUID, change WebhookChange) (WebhookCredentials, error)
	DeleteWebhook(ctx context.Context, actor domain.Actor, id domain.UUID) error
	// Deliveries pages through a subscription's delivery log (limit and
	// after as received: the edge does not parse them).
	Deliveries(ctx context.Context, id domain.UUID, limit, after string) (DeliveryPage, error)
	// SendTestEvent queues a webhook.test event for this subscription
	// only, delivered like any other; it returns the event's id.
	SendTestEvent(ctx context.Context, actor domain.Actor, id domain.UUID) (domain.UUID, error)
}

// ClaimedDelivery is a delivery a worker leased to attempt: its
// attempts already count this one, and its subscription and envelope are
// as they were read in the claim.
type ClaimedDelivery struct {
	ID           int64
	Attempts     int
	Subscription domain.WebhookSubscription
	Envelope     WebhookEnvelope
}

// DeliveryOutcome is what one attempt of a claimed delivery came to: the
// delivery's new status (pending: to be retried at NextAttemptAt), the
// answer's status code (0: none) and the error in words without secrets.
type DeliveryOutcome struct {
	ID            int64
	Attempts      int // the claim's count: a delivery claimed again since (its lease ran out) is not overwritten
	Status        DeliveryStatus
	At            time.Time
	NextAttemptAt time.Time
	StatusCode    int
	Error         string
}
