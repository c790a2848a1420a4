package webhooks

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// TestWebhookChangesAreAuditedWithoutSecrets: creating, changing
// (rotating the secret), testing and deleting a subscription each write an
// audit record in their transaction, and no record holds a secret.
func TestWebhookChangesAreAuditedWithoutSecrets(t *testing.T) {
	db, _ := testenv.PostgresDB(t)
	r := newRig(t, store{hooks: postgres.NewWebhookRepository(db), accounts: postgres.NewAccountRepository(db)})
	ctx := t.Context()
	const secret = "whsec_chosen_by_the_operator_0001"
	created, err := r.hooks.CreateWebhook(ctx, r.actor, ports.NewWebhook{URL: "https://hooks.example.com/a", Secret: secret})
	if err != nil || created.Secret != secret {
		t.Fatalf("creating: %+v, %v", created, err)
	}
	id := created.Subscription.ID()
	rotated, err := r.hooks.ChangeWebhook(ctx, r.actor, id, ports.WebhookChange{RotateSecret: true, EventTypes: []string{"task.failed"}})
	if err != nil {
		t.Fatal(err)
	}
	eventID, err := r.hooks.SendTestEvent(ctx, r.actor, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.hooks.DeleteWebhook(ctx, r.actor, id); err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Action string  `db:"action"`
		Target string  `db:"target"`
		Before *string `db:"before"`
		After  *string `db:"after"`
	}
	if err := db.SelectContext(ctx, &rows, `SELECT action, target, before::text, after::text FROM audit_log ORDER BY seq`); err != nil {
		t.Fatal(err)
	}
	want := []string{"webhook.create", "webhook.change", "webhook.test", "webhook.delete"}
	if len(rows) != len(want) {
		t.Fatalf("audit records %+v, want %v", rows, want)
	}
	for i, row := range rows {
		all := row.Target + deref(row.Before) + deref(row.After)
		if row.Action != want[i] || row.Target != id.String() {
			t.Errorf("record %d: %s on %s, want %s on %s", i, row.Action, row.Target, want[i], id)
		}
		if strings.Contains(all, secret) || strings.Contains(all, rotated.Secret) || strings.Contains(all, "whsec_") {
			t.Errorf("record %d holds a secret: %s", i, all)
		}
	}
	if !strings.Contains(deref(rows[2].After), eventID.String()) || !strings.Contains(deref(rows[1].After), "task.failed") {
		t.Errorf("the records do not say what changed: %+v", rows)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestWebhookUseCasesRefuse: without webhooks:write nothing changes; an
// unknown or zero id is not found; a forged cursor and a bad limit are
// validation errors; a URL with credentials is refused.
func TestWebhookUseCasesRefuse(t *testing.T) {
	r := newRig(t, memoryStore(t))
	ctx := t.Context()
	sub := r.subscribe(t, "https://hooks.example.com/a")
	reader, err := domain.NewUser("reader", "viewer", "correct horse battery", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	viewer, _ := domain.NewActor(domain.UserPrincipal(reader), "", "")
	if _, err := r.hooks.CreateWebhook(ctx, viewer, ports.NewWebhook{URL: "https://x.example.com"}); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("a viewer creating: %v", err)
	}
	if _, err := r.hooks.SendTestEvent(ctx, viewer, sub.Subscription.ID()); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("a viewer testing: %v", err)
	}
	if err := r.hooks.DeleteWebhook(ctx, viewer, sub.Subscription.ID()); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("a viewer deleting: %v", err)
	}
	if _, err := r.hooks.SendTestEvent(ctx, r.actor, domain.UUIDOf([16]byte{9})); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("testing an unknown webhook: %v", err)
	}
	if _, err := r.hooks.GetWebhook(ctx, domain.UUID{}); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("the zero id: %v", err)
	}
	for _, tc := range [][2]string{{"0", ""}, {"201", ""}, {"x", ""}, {"", "not-a-cursor"}, {"", "ZHwtMQ"}} {
		if _, err := r.hooks.Deliveries(ctx, sub.Subscription.ID(), tc[0], tc[1]); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("deliveries(limit %q, after %q): %v, want a validation error", tc[0], tc[1], err)
		}
	}
	if _, err := r.hooks.CreateWebhook(ctx, r.actor, ports.NewWebhook{URL: "https://user:pw@x.example.com"}); !errors.Is(err, domain.ErrValidation) {
		t.Errorf("credentials in the URL: %v", err)
	}
	var _ application.WebhookStore = r.store.hooks
}
