package local

import (
	"testing"
	"time"
)

// TestForgottenBucketGrantsNoBurstBeforeItRefilled: a bucket idle for the
// limiter's idle time (10 minutes in production) is forgotten, and the key's
// next request starts a full bucket. That is harmless only while a bucket
// refills within the idle time (burst / rate <= idle). The documented ranges
// allow slower budgets: OTA_CONSOLE_SIGNIN_RATE_LIMIT=0.01 with the default
// burst of 10 refills in 1,000 s, so a password guesser who spends the burst
// and waits 10 minutes is handed another 10 attempts at once — 60 an hour
// where the budget is 36 (docs/DOMAIN.md S5, docs/CONFIGURATION.md). Here
// the idle time is shortened to 50 ms (it stands for the 10 minutes) and the
// rate is one attempt per 100 s: after a sleep of a fraction of a second, no
// token has come back, so nothing may be allowed.
func TestForgottenBucketGrantsNoBurstBeforeItRefilled(t *testing.T) {
	l := NewRateLimiter(0.01, 10)  // one a 100 s, 10 at once: full again only after 1,000 s
	l.idle = 50 * time.Millisecond // the production 10 minutes, scaled down
	for i := range 10 {
		if ok, _ := l.Allow("sign-in user:admin"); !ok {
			t.Fatalf("attempt %d of the burst refused", i+1)
		}
	}
	if ok, _ := l.Allow("sign-in user:admin"); ok {
		t.Fatal("an 11th attempt at once was allowed")
	}
	time.Sleep(150 * time.Millisecond) // idle longer than the idle time, far shorter than one token's 100 s
	allowed := 0
	for range 10 {
		if ok, _ := l.Allow("sign-in user:admin"); ok {
			allowed++
		}
	}
	if allowed > 0 {
		t.Errorf("%d attempts allowed 150 ms after the burst was spent, at a rate of one per 100 s: "+
			"the idle bucket was forgotten and a full one started in its place", allowed)
	}
}
