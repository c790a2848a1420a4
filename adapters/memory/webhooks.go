package memory

import (
	"context"
	"slices"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// delivery is one event's delivery to one subscription, kept with its event.
type delivery struct {
	sub string
	ports.WebhookDelivery
}

// announceTo appends a to the outbox as id, with a pending delivery to
// every subscription to accepts.
func (s *Store) announceTo(id domain.UUID, a domain.Announcement, to func(domain.WebhookSubscription) bool) {
	ev := storedEvent{id: id, seq: int64(len(s.outbox)) + 1, Announcement: a}
	for sid, w := range s.webhooks {
		if to(w) {
			s.deliveries++
			ev.deliveries = append(ev.deliveries, &delivery{sub: sid, WebhookDelivery: ports.WebhookDelivery{ID: s.deliveries,
				EventID: id, EventType: a.Type(), Status: ports.DeliveryPending, NextAttemptAt: a.At(), CreatedAt: a.At()}})
		}
	}
	s.outbox = append(s.outbox, ev)
}

// Webhooks are the webhook subscriptions and the delivery queue over a
// Store (application.WebhookStore, application.DeliveryQueue).
type Webhooks struct{ s *Store }

// NewWebhooks returns the webhook tables of s.
func NewWebhooks(s *Store) *Webhooks { return &Webhooks{s: s} }

func (r *Webhooks) InsertWebhook(ctx context.Context, w domain.WebhookSubscription, rec domain.AuditRecord) error {
	return write(ctx, r.s, rec, func() error {
		if has(r.s.webhooks, w.ID().String()) {
			return errDuplicateID("webhook", w.ID().String())
		}
		r.s.webhooks[w.ID().String()] = w
		return nil
	})
}

func (r *Webhooks) UpdateWebhook(ctx context.Context, id domain.UUID, fn func(*domain.WebhookSubscription) error,
	audit ports.Audit[domain.WebhookSubscription]) (domain.WebhookSubscription, error) {
	return update(ctx, r.s, r.s.webhooks, id.String(), fn, nil, audit)
}

func (r *Webhooks) DeleteWebhook(ctx context.Context, id domain.UUID, audit ports.Audit[domain.WebhookSubscription]) error {
	return do(ctx, r.s, func() error {
		w, err := found(r.s.webhooks, id.String())
		rec := domain.AuditRecord{}
		if err == nil && audit != nil {
			rec, err = audit(w, domain.WebhookSubscription{})
		}
		if err != nil {
			return err
		}
		delete(r.s.webhooks, id.String())
		for i := range r.s.outbox {
			r.s.outbox[i].deliveries = slices.DeleteFunc(slices.Clone(r.s.outbox[i].deliveries), func(d *delivery) bool { return d.sub == id.String() })
		}
		r.s.record(rec)
		return nil
	})
}

func (r *Webhooks) Webhooks(ctx context.Context) ([]domain.WebhookSubscription, error) {
	return locked(ctx, r.s, func() ([]domain.WebhookSubscription, error) {
		out := where(r.s.webhooks, func(domain.WebhookSubscription) bool { return true })
		slices.SortFunc(out, func(a, b domain.WebhookSubscription) int { return a.CreatedAt().Compare(b.CreatedAt()) })
		return out, nil
	})
}

func (r *Webhooks) Webhook(ctx context.Context, id domain.UUID) (domain.WebhookSubscription, error) {
	return locked(ctx, r.s, func() (domain.WebhookSubscription, error) { return found(r.s.webhooks, id.String()) })
}

func (r *Webhooks) WebhookDeliveries(ctx context.Context, id domain.UUID, limit int, before int64) ([]ports.WebhookDelivery, error) {
	return locked(ctx, r.s, func() ([]ports.WebhookDelivery, error) {
		out := []ports.WebhookDelivery{}
		r.s.each(func(_ storedEvent, d *delivery) {
			if d.sub == id.String() && (before == 0 || d.ID < before) {
				out = append(out, d.WebhookDelivery)
			}
		})
		slices.SortFunc(out, func(a, b ports.WebhookDelivery) int { return int(b.ID - a.ID) })
		return out[:min(len(out), max(limit, 0))], nil
	})
}

func (r *Webhooks) AnnounceTo(ctx context.Context, id, eventID domain.UUID, a domain.Announcement, rec domain.AuditRecord) error {
	return write(ctx, r.s, rec, func() error {
		_, err := found(r.s.webhooks, id.String())
		if err == nil {
			r.s.announceTo(eventID, a, func(w domain.WebhookSubscription) bool { return w.ID() == id })
		}
		return err
	})
}

// each calls f on every delivery, in the order the events were written.
func (s *Store) each(f func(storedEvent, *delivery)) {
	for _, ev := range s.outbox {
		for _, d := range ev.deliveries {
			f(ev, d)
		}
	}
}

func (r *Webhooks) ClaimDeliveries(ctx context.Context, now time.Time, limit int, leaseUntil time.Time) ([]ports.ClaimedDelivery, error) {
	return locked(ctx, r.s, func() ([]ports.ClaimedDelivery, error) {
		var out []ports.ClaimedDelivery
		r.s.each(func(ev storedEvent, d *delivery) {
			if w := r.s.webhooks[d.sub]; len(out) < limit && w.Enabled() && d.Status == ports.DeliveryPending && !d.NextAttemptAt.After(now) {
				d.Attempts, d.NextAttemptAt = d.Attempts+1, us(leaseUntil)
				out = append(out, ports.ClaimedDelivery{ID: d.ID, Attempts: d.Attempts, Subscription: w, Envelope: ev.envelope()})
			}
		})
		return out, nil
	})
}

func (r *Webhooks) FinishDelivery(ctx context.Context, o ports.DeliveryOutcome, settle func(*domain.WebhookSubscription)) error {
	return do(ctx, r.s, func() error { r.s.finish(o, settle); return nil })
}

// FinishDeliveries stores os; a delivered one ends its subscription's
// failing period (domain.WebhookSubscription.Succeeded).
func (r *Webhooks) FinishDeliveries(ctx context.Context, os []ports.DeliveryOutcome) error {
	return do(ctx, r.s, func() error {
		for _, o := range os {
			var settle func(*domain.WebhookSubscription)
			if o.Status == ports.DeliveryDelivered {
				settle = func(w *domain.WebhookSubscription) {
					if !w.FailingSince().IsZero() {
						w.Succeeded(o.At)
					}
				}
			}
			r.s.finish(o, settle)
		}
		return nil
	})
}

// finish stores o unless its delivery is gone or was claimed again since
// (the newer claim's outcome counts), then settles the subscription.
func (s *Store) finish(o ports.DeliveryOutcome, settle func(*domain.WebhookSubscription)) {
	var d *delivery
	s.each(func(_ storedEvent, x *delivery) {
		if x.ID == o.ID && x.Attempts == o.Attempts && x.Status == ports.DeliveryPending {
			d = x
		}
	})
	if d == nil {
		return
	}
	d.Status, d.NextAttemptAt, d.LastAttemptAt, d.LastStatusCode, d.LastError = o.Status, us(o.NextAttemptAt), us(o.At), o.StatusCode, o.Error
	if w, ok := s.webhooks[d.sub]; ok && settle != nil {
		settle(&w)
		s.webhooks[d.sub] = w
	}
}
