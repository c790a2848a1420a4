package memory

import (
	"github.com/google/uuid"

	"github.com/ai-device/ota/domain"
)

// storedEvent is an event in the outbox, with the id the store gave it.
type storedEvent struct {
	id  domain.UUID
	seq int64
	domain.Announcement
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

// announce appends a to the outbox.
func (s *Store) announce(a domain.Announcement) {
	s.outbox = append(s.outbox, storedEvent{id: domain.UUIDOf(uuid.New()), seq: int64(len(s.outbox)) + 1, Announcement: a})
}
