package console_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// The sign-in budget (docs/DOMAIN.md S5: per client address and per
// username, spent before any password is checked; over it, 429 "the
// right password too") bounds password guessing. The same passwords are
// checked on the API's one password route, POST /api/v1/admin/tokens with
// HTTP Basic (A2), which spends no budget: once the console refuses
// alice's sign-ins, the API keeps checking guesses at her password, and
// her right password mints a token there — so the budget bounds nothing.
func TestAPIPasswordRouteSpendsTheSignInBudget(t *testing.T) {
	e := newAccountsEnv(t, map[string]domain.Role{"alice": domain.RoleAdmin})
	for range signInBurst {
		e.signInAs("alice", "not the password at all")
	}
	wantStatus(t, "alice over her budget on the console", e.signInAs("alice", userPassword), http.StatusTooManyRequests)

	mint := func(password string) int {
		body := `{"name":"ci","scopes":["read"],"expires_at":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}`
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/v1/admin/tokens", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("alice:"+password)))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	var codes []int
	for range 3 * signInBurst {
		codes = append(codes, mint("another guess at it"))
	}
	codes = append(codes, mint(userPassword))
	if last := codes[len(codes)-1]; last != http.StatusTooManyRequests {
		t.Fatalf("after the console refused alice for her budget, %d more guesses over the API answered %v, "+
			"and her right password %d: the API's password route spends no sign-in budget (want 429)",
			len(codes)-1, codes[:len(codes)-1], last)
	}
}
