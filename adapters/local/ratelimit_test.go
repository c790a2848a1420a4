package local_test

import (
	"testing"

	"github.com/ai-device/ota/adapters/local"
)

func TestRateLimiterSpendsPerKeyBudgets(t *testing.T) {
	l := local.NewRateLimiter(0.001, 3) // refills far slower than the test runs
	for i := 0; i < 3; i++ {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("request %d within the burst refused", i)
		}
	}
	ok, wait := l.Allow("a")
	if ok || wait <= 0 {
		t.Fatalf("4th request: ok=%v wait=%v, want refused with a wait", ok, wait)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another key's budget was spent by a")
	}
}
