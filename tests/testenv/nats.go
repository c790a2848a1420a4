package testenv

import (
	"net"
	"net/url"
	"os"
	"testing"
	"time"
)

// NATSURLEnv names the NATS server (with JetStream) the event sink's tests
// publish to; unset, nats://127.0.0.1:4222 when something listens there.
const NATSURLEnv = "OTA_TEST_NATS_URL"

// NATSURL is the NATS server to test against, or skips t (Skip) when none
// answers.
func NATSURL(t testing.TB) string {
	t.Helper()
	raw := os.Getenv(NATSURLEnv)
	if raw == "" {
		raw = "nats://127.0.0.1:4222"
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("testenv: %s: %v", NATSURLEnv, err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		Skip(t, NATSURLEnv, "no NATS server at "+u.Host+": "+err.Error())
	}
	_ = c.Close()
	return raw
}
