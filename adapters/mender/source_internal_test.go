package mender

import (
	"net/http/httptest"
	"testing"
)

// TestSourceIsTheConnectingAddress: the auth budget's key is the
// connecting address, never a header the sender writes, and an IPv6
// sender's whole /64 shares one budget.
func TestSourceIsTheConnectingAddress(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.7:4242":                  "192.0.2.7",
		"[::ffff:192.0.2.7]:4242":         "192.0.2.7",
		"[2001:db8:1:2:aaaa::1]:4242":     "2001:db8:1:2::/64",
		"[2001:db8:1:2:bbbb:cccc::9]:443": "2001:db8:1:2::/64",
	} {
		r := httptest.NewRequest("POST", AuthPath, nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		r.Header.Set("X-Real-IP", "203.0.113.9")
		if got := sourceOf(r); got != want {
			t.Errorf("%s: %q, want %q", remote, got, want)
		}
	}
}
