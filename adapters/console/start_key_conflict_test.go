package console_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestStartFormRefusedForItsKeyCanBeSentAgain: a start form whose key
// already started a rollout with other values (its first submission
// committed, its answer never came, and the operator corrected a field
// before sending it again) is refused IDEMPOTENCY_CONFLICT, whose message
// tells the sender to "send a new key with a new request". The console is
// the sender: the form it shows again must carry a key the corrected
// request can be started with. It keeps the conflicting key instead (a
// form shown after a refusal keeps its key), so the form can never be
// accepted again, however often the operator sends it, until they leave
// the page.
func TestStartFormRefusedForItsKeyCanBeSentAgain(t *testing.T) {
	e := newEnv(t)
	fw := e.publish("cam", "2.0.0")
	e.mustSignIn()
	m := keyField.FindStringSubmatch(e.get("/console/rollouts").body)
	if m == nil {
		t.Fatal("the start form has no idempotency_key")
	}
	key := html.UnescapeString(m[1])
	csrf := e.csrf("/console/rollouts")
	form := func(pct, key string) url.Values {
		return url.Values{"csrf": {csrf}, "firmware_id": {fw.ID().String()}, "percentage": {pct}, "idempotency_key": {key}}
	}
	wantStatus(t, "the first submission (its answer lost)", e.post("/console/rollouts", form("10", key)), http.StatusSeeOther)

	refused := e.post("/console/rollouts", form("5", key))
	wantStatus(t, "the corrected form under the same key", refused, http.StatusConflict)
	if !strings.Contains(refused.body, "already started a rollout") {
		t.Errorf("the refusal does not say the form already started a rollout: %s", refused.body)
	}
	shown := keyField.FindStringSubmatch(refused.body)
	if shown == nil {
		t.Fatalf("the refused form has no idempotency_key: %s", refused.body)
	}
	again := e.post("/console/rollouts", form("5", html.UnescapeString(shown[1])))
	if again.code != http.StatusSeeOther {
		t.Errorf("the form as shown after the conflict, sent again: %d, want 303 (a rollout started); it carries the key %q "+
			"that conflicted, so it is refused for ever", again.code, shown[1])
	}
}
