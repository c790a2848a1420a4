package contract_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

// TestPostgresAuditLog holds the audit_log table (migration 00130) and its
// reader to the audit log contract.
func TestPostgresAuditLog(t *testing.T) {
	contract.RunAuditLogs(t, func(t *testing.T) (ports.AuditLog, contract.AuditWriter) {
		db, _ := testenv.PostgresDB(t)
		return postgres.NewAuditLog(db), func(t *testing.T, rec domain.AuditRecord) {
			a := rec.ActorRecord()
			var user, token any
			if a.User != "" {
				user = a.User
			}
			if !a.Token.IsZero() {
				token = a.Token.String()
			}
			json := func(b []byte) any {
				if b == nil {
					return nil
				}
				return string(b)
			}
			if _, err := db.ExecContext(t.Context(), `INSERT INTO audit_log (at, actor_kind, actor_user, actor_token, action, target, before, after, request_id, source)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, rec.At(), a.Kind, user, token, string(rec.Action()), rec.Target(),
				json(rec.Before()), json(rec.After()), rec.RequestID(), rec.Source()); err != nil {
				t.Fatal(err)
			}
		}
	})
}
