package httpedge

import (
	"net/http"

	"github.com/ai-device/ota/ports"
)

// maxBudgetName bounds the username a budget is kept under: a longer name
// is no account's (usernames are at most 64), and a key must not grow with
// what a guesser sends.
const maxBudgetName = 64

// SpendSignIn spends one sign-in attempt (docs/DOMAIN.md S5) of r's client
// address budget and, when a username is given, of that username's: a
// guesser is slowed whether they try many passwords on one account or one
// password on many. Over either budget it answers a
// *ports.RateLimitedError, before any password is checked. Every route
// that checks a password or starts a sign-in spends the one limiter
// under these keys — the console's form and single sign-on, the API's
// token route — so that no route bounds guessing on its own.
func SpendSignIn(l ports.RateLimiter, r *http.Request, username string) error {
	keys := []string{"sign-in addr:" + SourceAddress(r)}
	if username != "" {
		keys = append(keys, "sign-in user:"+username[:min(len(username), maxBudgetName)])
	}
	for _, k := range keys {
		if ok, wait := l.Allow(k); !ok {
			return &ports.RateLimitedError{Wait: wait}
		}
	}
	return nil
}
