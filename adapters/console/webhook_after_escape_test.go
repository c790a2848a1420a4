package console_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// TestConsoleWebhookDeliveryCursorWithBadEscapeIsNotDropped: the API's
// GET /admin/webhooks/{id}/deliveries?after=%zz (or a raw ';') is 400
// VALIDATION_FAILED (queryParams, httpedge.QueryPairError; docs/ERRORS.md),
// as the console's device list and audit log now are. The webhook page
// reads r.URL.Query().Get("after") (adapters/console/webhooks.go,
// showWebhook), which drops the broken pair: the page answers 200 with the
// newest deliveries, as if no cursor were given.
func TestConsoleWebhookDeliveryCursorWithBadEscapeIsNotDropped(t *testing.T) {
	e, hooks := newWebhooksEnv(t, map[string]domain.Role{"ada": domain.RoleAdmin})
	e.mustSignInAs("ada")
	sub, err := hooks.CreateWebhook(context.Background(), testActor, ports.NewWebhook{URL: "https://hooks.example.com/x"})
	if err != nil {
		t.Fatal(err)
	}
	page := "/console/webhooks/" + sub.Subscription.ID().String()
	for _, q := range []string{"after=%zz", "after=ZHwxMA;x"} {
		if r := e.get(page + "?" + q); r.code != http.StatusBadRequest {
			t.Errorf("GET %s?%s: %d, want 400 as the API's deliveries listing answers (the cursor was dropped)", page, q, r.code)
		}
	}
}
