package application

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// WebhookStore is what the subscription use cases read and write. Every
// write takes the operator's record of it and stores it in the same
// transaction. Not-found is domain.ErrNotFound.
type WebhookStore interface {
	// InsertWebhook stores a new subscription.
	InsertWebhook(ctx context.Context, s domain.WebhookSubscription, rec domain.AuditRecord) error
	// UpdateWebhook loads the subscription locked, lets fn change it, and
	// stores it with the record audit makes of the change.
	UpdateWebhook(ctx context.Context, id domain.UUID, fn func(*domain.WebhookSubscription) error,
		audit ports.Audit[domain.WebhookSubscription]) (domain.WebhookSubscription, error)
	// DeleteWebhook removes the subscription and its delivery log, with
	// the record audit makes of it (after: the zero subscription).
	DeleteWebhook(ctx context.Context, id domain.UUID, audit ports.Audit[domain.WebhookSubscription]) error
	// Webhooks lists every subscription, oldest first.
	Webhooks(ctx context.Context) ([]domain.WebhookSubscription, error)
	// Webhook reads one subscription.
	Webhook(ctx context.Context, id domain.UUID) (domain.WebhookSubscription, error)
	// WebhookDeliveries is up to limit of a subscription's deliveries
	// whose id is below before (0: from the newest), newest first.
	WebhookDeliveries(ctx context.Context, id domain.UUID, limit int, before int64) ([]ports.WebhookDelivery, error)
	// AnnounceTo writes event a to the outbox with the id eventID and
	// one pending delivery of it, to subscription id only, with rec.
	AnnounceTo(ctx context.Context, id, eventID domain.UUID, a domain.Announcement, rec domain.AuditRecord) error
}

// Webhooks are the operators' subscriptions to the service's events.
type Webhooks struct {
	store WebhookStore
	clock ports.Clock
	ids   ports.IDGenerator
}

var _ ports.WebhookService = (*Webhooks)(nil)

// NewWebhooks builds the subscription use cases.
func NewWebhooks(store WebhookStore, clock ports.Clock, ids ports.IDGenerator) (*Webhooks, error) {
	if err := required(store, clock, ids); err != nil {
		return nil, err
	}
	return &Webhooks{store: store, clock: clock, ids: ids}, nil
}

// webhookFacts is what an audit record shows of a subscription: never its
// secrets, only whether a rotation's previous one still signs.
func webhookFacts(s domain.WebhookSubscription) map[string]any {
	if s.ID().IsZero() {
		return nil
	}
	_, until := s.PreviousSecret()
	facts := map[string]any{"url": s.URL(), "event_types": s.EventTypes(), "enabled": s.Enabled()}
	if r := s.DisabledReason(); r != "" {
		facts["disabled_reason"] = r
	}
	if !until.IsZero() {
		facts["previous_secret_until"] = until
	}
	return facts
}

// CreateWebhook subscribes an endpoint; its secret is in the answer, once.
func (w *Webhooks) CreateWebhook(ctx context.Context, actor domain.Actor, req ports.NewWebhook) (ports.WebhookCredentials, error) {
	if err := authorize(actor.Principal(), domain.PermWebhooksWrite); err != nil {
		return ports.WebhookCredentials{}, err
	}
	now := w.clock.Now()
	s, err := domain.NewWebhookSubscription(w.ids.NewID(), req.URL, req.EventTypes, req.Secret, now)
	if err != nil {
		return ports.WebhookCredentials{}, err
	}
	rec, err := actor.Record(now, domain.AuditWebhookCreate, s.ID().String(), nil, webhookFacts(s))
	if err != nil {
		return ports.WebhookCredentials{}, err
	}
	if err := w.store.InsertWebhook(ctx, s, rec); err != nil {
		return ports.WebhookCredentials{}, fmt.Errorf("creating webhook: %w", err)
	}
	return ports.WebhookCredentials{Subscription: s, Secret: s.Secret()}, nil
}

// ListWebhooks lists every subscription.
func (w *Webhooks) ListWebhooks(ctx context.Context) ([]domain.WebhookSubscription, error) {
	return w.store.Webhooks(ctx)
}

// GetWebhook reads one subscription.
func (w *Webhooks) GetWebhook(ctx context.Context, id domain.UUID) (domain.WebhookSubscription, error) {
	if id.IsZero() {
		return domain.WebhookSubscription{}, domain.ErrNotFound
	}
	return w.store.Webhook(ctx, id)
}

// ChangeWebhook changes a subscription's URL, types, whether it is
// enabled, and rotates its secret; the new secret is in the answer, once.
func (w *Webhooks) ChangeWebhook(ctx context.Context, actor domain.Actor, id domain.UUID, change ports.WebhookChange) (ports.WebhookCredentials, error) {
	if err := authorize(actor.Principal(), domain.PermWebhooksWrite); err != nil {
		return ports.WebhookCredentials{}, err
	}
	if id.IsZero() {
		return ports.WebhookCredentials{}, domain.ErrNotFound
	}
	now := w.clock.Now()
	s, err := w.store.UpdateWebhook(ctx, id, func(s *domain.WebhookSubscription) error {
		if err := s.Change(change.URL, change.EventTypes, change.Enabled, now); err != nil {
			return err
		}
		if change.RotateSecret {
			return s.RotateSecret(change.NewSecret, now)
		}
		return nil
	}, w.audit(actor, now, domain.AuditWebhookChange))
	if err != nil {
		return ports.WebhookCredentials{}, fmt.Errorf("changing webhook %s: %w", id, err)
	}
	out := ports.WebhookCredentials{Subscription: s}
	if change.RotateSecret {
		out.Secret = s.Secret()
	}
	return out, nil
}

// DeleteWebhook removes a subscription and its delivery log.
func (w *Webhooks) DeleteWebhook(ctx context.Context, actor domain.Actor, id domain.UUID) error {
	if err := authorize(actor.Principal(), domain.PermWebhooksWrite); err != nil {
		return err
	}
	if id.IsZero() {
		return domain.ErrNotFound
	}
	if err := w.store.DeleteWebhook(ctx, id, w.audit(actor, w.clock.Now(), domain.AuditWebhookDelete)); err != nil {
		return fmt.Errorf("deleting webhook %s: %w", id, err)
	}
	return nil
}

// audit is the record of action on a subscription, from before to after.
func (w *Webhooks) audit(actor domain.Actor, now time.Time, action domain.AuditAction) ports.Audit[domain.WebhookSubscription] {
	return func(before, after domain.WebhookSubscription) (domain.AuditRecord, error) {
		return actor.Record(now, action, before.ID().String(), webhookFacts(before), webhookFacts(after))
	}
}

// The delivery log's page sizes.
const (
	defaultDeliveryPage = 50
	maxDeliveryPage     = 200
)

var errBadDeliveryCursor = &domain.ValidationError{Field: "after", Reason: "is not a cursor this service issued"}

// Deliveries pages through a subscription's delivery log, newest first;
// the cursor is opaque to the caller (the last delivery's id, encoded).
func (w *Webhooks) Deliveries(ctx context.Context, id domain.UUID, limit, after string) (ports.DeliveryPage, error) {
	n, err := parseLimit(limit, defaultDeliveryPage, maxDeliveryPage)
	if err != nil {
		return ports.DeliveryPage{}, err
	}
	var before int64
	if after != "" {
		raw, err := base64.RawURLEncoding.DecodeString(after)
		if err != nil {
			return ports.DeliveryPage{}, errBadDeliveryCursor
		}
		s, ok := strings.CutPrefix(string(raw), "d|")
		if before, err = strconv.ParseInt(s, 10, 64); !ok || err != nil || before < 1 {
			return ports.DeliveryPage{}, errBadDeliveryCursor
		}
	}
	if _, err := w.GetWebhook(ctx, id); err != nil {
		return ports.DeliveryPage{}, err
	}
	items, err := w.store.WebhookDeliveries(ctx, id, n+1, before)
	if err != nil {
		return ports.DeliveryPage{}, fmt.Errorf("listing deliveries of webhook %s: %w", id, err)
	}
	page := ports.DeliveryPage{Items: items}
	if len(items) > n {
		page.Items = items[:n]
		page.Next = base64.RawURLEncoding.EncodeToString([]byte("d|" + strconv.FormatInt(items[n-1].ID, 10)))
	}
	return page, nil
}

// SendTestEvent queues a webhook.test event for this subscription only,
// in one transaction with its audit record; it is delivered like any
// other event, so an operator sees in the log what a real one would meet.
func (w *Webhooks) SendTestEvent(ctx context.Context, actor domain.Actor, id domain.UUID) (domain.UUID, error) {
	if err := authorize(actor.Principal(), domain.PermWebhooksWrite); err != nil {
		return domain.UUID{}, err
	}
	if id.IsZero() {
		return domain.UUID{}, domain.ErrNotFound
	}
	now, eventID := w.clock.Now(), w.ids.NewID()
	a, err := domain.NewAnnouncement(domain.EventTest, now, map[string]any{"subscription_id": id.String(), "message": "a test event, sent on request"})
	if err != nil {
		return domain.UUID{}, err
	}
	rec, err := actor.Record(now, domain.AuditWebhookTest, id.String(), nil, map[string]any{"event_id": eventID.String()})
	if err != nil {
		return domain.UUID{}, err
	}
	if err := w.store.AnnounceTo(ctx, id, eventID, a, rec); err != nil {
		return domain.UUID{}, fmt.Errorf("sending a test event to webhook %s: %w", id, err)
	}
	return eventID, nil
}
