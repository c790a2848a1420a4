package memory

import (
	"cmp"
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
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

// ListAudit is ports.AuditLog over the records in write order (seq is the
// index + 1), filtered and paged as the Postgres adapter does.
func (s *Store) ListAudit(ctx context.Context, f ports.AuditFilter) ([]ports.AuditEntry, error) {
	var want domain.AuditActorRecord
	if f.Actor != "" {
		a, err := domain.ParseAuditActor(f.Actor)
		if err != nil {
			return nil, err
		}
		want = a
	}
	// older reports whether e comes after (at, seq) newest first.
	older := func(e ports.AuditEntry, at time.Time, seq int64) bool {
		return cmp.Or(e.Record.At().Compare(at), cmp.Compare(e.Seq, seq)) < 0
	}
	return locked(ctx, s, func() ([]ports.AuditEntry, error) {
		out := []ports.AuditEntry{}
		for i, r := range s.audit {
			e, a := ports.AuditEntry{Seq: int64(i + 1), Record: r}, r.ActorRecord()
			if (f.Actor == "" || want.Kind == "root" && a.Kind == "root" || !want.Token.IsZero() && a.Token == want.Token ||
				want.User != "" && a.User == want.User) && (f.Target == "" || r.Target() == f.Target) &&
				(f.Action == "" || r.Action() == f.Action) && (f.Since.IsZero() || !r.At().Before(us(f.Since))) &&
				(f.Until.IsZero() || r.At().Before(us(f.Until))) && (f.After == nil || older(e, us(f.After.At), f.After.Seq)) {
				out = append(out, e)
			}
		}
		return page(out, f.Limit, DefaultListLimit, func(a, b ports.AuditEntry) bool { return older(b, a.Record.At(), a.Seq) }), nil
	})
}
