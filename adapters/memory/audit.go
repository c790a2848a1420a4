package memory

import (
	"context"

	"github.com/google/uuid"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// storedEvent is an event in the outbox, with the id the store gave it,
// its seq (its index + 1) and its deliveries: a rolled back change
// truncates the outbox, and its events' deliveries go with them.
type storedEvent struct {
	id  domain.UUID
	seq int64
	domain.Announcement
	deliveries []*delivery
}

// envelope is ev as the sinks and the webhooks send it.
func (ev storedEvent) envelope() ports.WebhookEnvelope {
	return ports.WebhookEnvelope{ID: ev.id, Type: ev.Type(), Time: ev.At(), Version: domain.EventSchemaVersion, Data: ev.Payload()}
}

// record appends rec to the audit log, and the events it announces to
// the outbox, under the lock of the change it records (the caller's); the
// zero record writes nothing.
func (s *Store) record(rec domain.AuditRecord) {
	if rec.Action() != "" {
		s.audit = append(s.audit, rec)
	}
	for _, a := range rec.Announcements() {
		s.announce(a)
	}
}

// announce appends a to the outbox, with a pending delivery to every
// enabled subscription that wants its type.
func (s *Store) announce(a domain.Announcement) {
	s.announceTo(domain.UUIDOf(uuid.New()), a, func(w domain.WebhookSubscription) bool { return w.Enabled() && w.Wants(a.Type()) })
}

// ListAudit is ports.AuditLog over the records in write order (seq is the
// index + 1), filtered and paged as the Postgres adapter does.
func (s *Store) ListAudit(ctx context.Context, f ports.AuditFilter) ([]ports.AuditEntry, error) {
	f.Since, f.Until = us(f.Since), us(f.Until)
	if f.After != nil {
		f.After = &ports.AuditCursor{At: us(f.After.At), Seq: f.After.Seq}
	}
	selects, err := f.Selects()
	if err != nil {
		return nil, err
	}
	return locked(ctx, s, func() ([]ports.AuditEntry, error) {
		out := []ports.AuditEntry{}
		for i, r := range s.audit {
			if e := (ports.AuditEntry{Seq: int64(i + 1), Record: r}); selects(e) {
				out = append(out, e)
			}
		}
		return page(out, f.Limit, ports.DefaultListLimit, func(a, b ports.AuditEntry) bool { return ports.AuditCursor{At: a.Record.At(), Seq: a.Seq}.Precedes(b) }), nil
	})
}
