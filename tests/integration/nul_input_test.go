package integration

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// An operator's string containing NUL is VALIDATION_FAILED (ERRORS.md: a
// field "not valid UTF-8 or contains NUL"; a bad query parameter, "the
// audit log's ... target"), and nothing is written. On Postgres a NUL
// reaches a text column (an API token's name) or a query parameter (the
// audit log's target), which Postgres refuses (22021): the caller gets
// 500 INTERNAL. The memory store takes both, so the stores disagree too.
func TestNULInOperatorInputIsAValidationError(t *testing.T) {
	s := newStack(t)
	name := "nul-" + uuid.NewString()[:8]
	const password = "correct horse battery"
	s.ok(call{method: "POST", path: "/api/v1/admin/users", token: adminToken,
		body: js(map[string]any{"username": name, "role": "releaser", "password": password})}, 201)

	t.Run("API token name", func(t *testing.T) {
		before := s.digest()
		req, _ := http.NewRequest("POST", s.srv.URL+"/api/v1/admin/tokens", strings.NewReader(string(js(map[string]any{
			"name": "c\x00i", "scopes": []string{"firmware:write"}, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}))))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(name+":"+password)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		_ = jsonDecode(resp, &out)
		resp.Body.Close()
		if resp.StatusCode != 400 || out["error"].(map[string]any)["code"] != "VALIDATION_FAILED" {
			t.Errorf("a token named with a NUL: %d %v, want 400 VALIDATION_FAILED", resp.StatusCode, out)
		}
		if after := s.digest(); after != before {
			t.Errorf("the refused token wrote something")
		}
	})
	t.Run("audit target", func(t *testing.T) {
		code, body, _ := s.do(call{method: "GET", path: "/api/v1/admin/audit?target=fw%00", token: adminToken})
		if code != 400 || body["error"].(map[string]any)["code"] != "VALIDATION_FAILED" {
			t.Errorf("GET /admin/audit?target=fw%%00: %d %v, want 400 VALIDATION_FAILED", code, body)
		}
	})
	// A webhook's secret is chosen by the operator too.
	t.Run("webhook secret", func(t *testing.T) {
		db, _ := testenv.PostgresDB(t)
		w, err := application.NewWebhooks(postgres.NewWebhookRepository(db), local.NewClock(), local.NewUUIDs())
		if err != nil {
			t.Fatal(err)
		}
		actor, err := domain.NewActor(domain.RootPrincipal(), "req-1", "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = w.CreateWebhook(t.Context(), actor, ports.NewWebhook{URL: "https://hooks.example/ota",
			Secret: "a long enough secret, but\x00with a NUL"})
		if !errors.Is(err, domain.ErrValidation) {
			t.Errorf("a webhook secret with a NUL: %v, want a validation error", err)
		}
	})
}
