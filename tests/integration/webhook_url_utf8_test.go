package integration

import (
	"errors"
	"testing"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/tests/testenv"

	"github.com/ai-device/ota/ports"
)

// TestWebhookURLWithInvalidUTF8IsAValidationError: a subscription's URL is
// operator text, yet domain.NewWebhookSubscription keeps u.String(), which
// keeps a query's raw bytes (url.Parse escapes the path and fragment, not
// the query). The console's form (PostFormValue percent-decodes url=
// "https://hooks.example/ota?x=%FF" to a raw 0xFF byte) hands such a URL to
// CreateWebhook: the memory store keeps it, Postgres refuses it in the text
// column (22021) and the operator gets a 500 — the NUL fix's
// domain.ValidateText was applied to the secret, not the URL.
func TestWebhookURLWithInvalidUTF8IsAValidationError(t *testing.T) {
	actor, err := domain.NewActor(domain.RootPrincipal(), "req-1", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	const raw = "https://hooks.example/ota?x=\xff"
	db, _ := testenv.PostgresDB(t)
	stores := map[string]application.WebhookStore{
		"postgres": postgres.NewWebhookRepository(db),
		"memory":   memory.NewWebhooks(memory.NewStore()),
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			w, err := application.NewWebhooks(store, local.NewClock(), local.NewUUIDs())
			if err != nil {
				t.Fatal(err)
			}
			_, err = w.CreateWebhook(t.Context(), actor, ports.NewWebhook{URL: raw})
			if !errors.Is(err, domain.ErrValidation) {
				t.Errorf("a webhook URL with invalid UTF-8 in its query: %v, want a validation error (VALIDATION_FAILED), not a store error (500) or a stored subscription", err)
			}
		})
	}
}
