package httpedge

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// refuseAll is a sign-in budget already spent.
type refuseAll struct{}

func (refuseAll) Allow(string) (bool, time.Duration) { return false, 3 * time.Second }

// docs/ERRORS.md's RATE_LIMITED row says when an answer is 429: the API's
// password route (POST /api/v1/admin/tokens with HTTP Basic) spends the
// sign-in budget through SpendSignIn and, over it, answers a JSON 429
// RATE_LIMITED (docs/CONFIGURATION.md, OTA_CONSOLE_SIGNIN_RATE_LIMIT; the
// OpenAPI document's 429 on that route). A client switching on the code
// must find that trigger in the row.
func TestRateLimitedRowNamesThePasswordRoute(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/api/v1/admin/tokens", nil)
	got := classify(SpendSignIn(refuseAll{}, r, "ada"))
	if got.status != http.StatusTooManyRequests || got.code != CodeRateLimited {
		t.Fatalf("an API sign-in over budget answers %d %s, want 429 %s", got.status, got.code, CodeRateLimited)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ERRORS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "| `"+CodeRateLimited+"` |") {
			if !strings.Contains(l, "/admin/tokens") {
				t.Errorf("docs/ERRORS.md:%d: the RATE_LIMITED row names the devices, Mender authentication and the console's sign-in form, "+
					"not the API's password route (POST /api/v1/admin/tokens with HTTP Basic), which answers 429 RATE_LIMITED over the sign-in budget", i+1)
			}
			return
		}
	}
	t.Fatal("docs/ERRORS.md has no RATE_LIMITED row")
}
