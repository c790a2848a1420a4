package memory

import "github.com/ai-device/ota/domain"

// record appends rec to the audit log, under the lock of the change it
// records (the caller's); the zero record writes nothing.
func (s *Store) record(rec domain.AuditRecord) {
	if !rec.IsZero() {
		s.audit = append(s.audit, rec)
	}
}
