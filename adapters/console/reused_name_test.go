package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// A removed user's session ends at the next request (docs/DOMAIN.md S3)
// and stays ended: an account created later under the same name — a new
// hire given a freed name, or the same person re-created with another
// role — is another account, and the removed account's cookie, still
// within its 8 h, must not sign its holder in as it.
func TestRemovedUsersSessionDoesNotComeBackWithANewAccountOfTheName(t *testing.T) {
	e := newAccountsEnv(t, map[string]domain.Role{"alice": domain.RoleAdmin})
	e.mustSignInAs("alice")
	wantStatus(t, "signed in", e.get("/console/rollouts"), http.StatusOK)
	if err := e.accounts.RemoveUser(context.Background(), testActor, "alice"); err != nil {
		t.Fatal(err)
	}
	if res := e.get("/console/rollouts"); res.code != http.StatusSeeOther {
		t.Fatalf("removed user's session: %d, want a redirect to sign in", res.code)
	}
	// An hour later, a new account is given the name.
	e.clock.advance(time.Hour)
	if _, err := e.accounts.CreateUser(context.Background(), testActor,
		ports.NewUser{Username: "alice", Role: string(domain.RoleViewer), Password: "a new person's password"}); err != nil {
		t.Fatal(err)
	}
	res := e.get("/console/rollouts")
	if res.code != http.StatusSeeOther || !strings.HasPrefix(res.header.Get("Location"), "/console/sign-in") {
		t.Fatalf("the removed account's cookie signs in as the new account of its name: %d %s, want a redirect to sign in",
			res.code, res.header.Get("Location"))
	}
}
