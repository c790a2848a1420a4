package memory

import (
	"github.com/google/uuid"

	"github.com/ai-device/ota/domain"
)

// storedEvent is an event in the outbox, with the id the store gave it
// and its deliveries: a rolled back change truncates the outbox, and its
// events' deliveries go with them.
type storedEvent struct {
	id  domain.UUID
	seq int64
	domain.Announcement
	deliveries []*delivery
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
