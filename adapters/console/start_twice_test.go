package console_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var keyField = regexp.MustCompile(`name="idempotency_key" value="([^"]*)"`)

// TestStartFormSubmittedTwiceStartsOneRollout: the start form carries an
// Idempotency-Key of its own (docs/DOMAIN.md, Rollout), so the same form
// sent twice — a double click, a resend after an answer that never came —
// starts one rollout; each form shown has another key, and a form shown
// again after a refusal keeps its key.
func TestStartFormSubmittedTwiceStartsOneRollout(t *testing.T) {
	e := newEnv(t)
	fw := e.publish("cam", "2.0.0")
	e.mustSignIn()
	page := e.get("/console/rollouts")
	m := keyField.FindStringSubmatch(page.body)
	if m == nil || m[1] == "" {
		t.Fatalf("the start form has no idempotency_key: %s", page.body)
	}
	key := html.UnescapeString(m[1])
	if again := keyField.FindStringSubmatch(e.get("/console/rollouts").body); again == nil || again[1] == m[1] {
		t.Errorf("two forms shown share the key %q: two intended starts would be one", m[1])
	}
	form := url.Values{"csrf": {e.csrf("/console/rollouts")}, "firmware_id": {fw.ID().String()}, "percentage": {"10"},
		"idempotency_key": {key}}
	var ids []string
	for range 2 {
		res := e.post("/console/rollouts", form)
		wantStatus(t, "start", res, http.StatusSeeOther)
		ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(res.header.Get("Location"), "/console/rollouts/"), "?done=started"))
	}
	if ids[0] == "" || ids[0] != ids[1] {
		t.Fatalf("the same form sent twice started %q and %q, want one rollout", ids[0], ids[1])
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/admin/rollouts", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var list struct{ Items []map[string]any }
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil || len(list.Items) != 1 {
		t.Fatalf("%d rollouts listed (%v), want 1", len(list.Items), err)
	}

	// Refused (no percentage), the form comes back with its key.
	bad := url.Values{"csrf": form["csrf"], "firmware_id": form["firmware_id"], "idempotency_key": {"kept-key"}}
	refused := e.post("/console/rollouts", bad)
	if m := keyField.FindStringSubmatch(refused.body); refused.code != http.StatusBadRequest || m == nil || m[1] != "kept-key" {
		t.Errorf("the refused form: %d, key %v; want 400 with the key it was sent with", refused.code, m)
	}
}
