package console

import (
	"strings"
	"testing"
	"time"
)

// A sign-in's flow cookie is read back only as it was signed, under the
// users' key of a replica sharing it, and within its ten minutes; a
// tampered, foreign or stale one is no flow.
func TestFlowCookie(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	key := "shared session key 0123456789abcdef"
	a := newSessions("admin-token-a-0123456789", key, false, time.Hour, fixedClock{at})
	f := oidcFlow{expires: at.Add(oidcFlowTTL), state: "st", nonce: "no", verifier: "ve", next: "/console/rollouts"}
	v := a.encodeFlow(f)

	b := newSessions("admin-token-b-0123456789", key, false, time.Hour, fixedClock{at.Add(oidcFlowTTL - time.Second)})
	if got, ok := b.decodeFlow(v); !ok || got.state != "st" || got.nonce != "no" || got.verifier != "ve" || got.next != "/console/rollouts" {
		t.Fatalf("a replica sharing the key reads %+v, %v", got, ok)
	}
	other := newSessions("admin-token-a-0123456789", "another session key 0123456789abcdef", false, time.Hour, fixedClock{at})
	if _, ok := other.decodeFlow(v); ok {
		t.Error("a flow signed under another key was accepted")
	}
	payload, sig, _ := strings.Cut(v, ".")
	forged := b64.EncodeToString([]byte(strings.Replace(string(mustB64(t, payload)), "state=st", "state=xx", 1))) + "." + sig
	if _, ok := a.decodeFlow(forged); ok {
		t.Error("a flow whose state was changed was accepted")
	}
	late := newSessions("admin-token-a-0123456789", key, false, time.Hour, fixedClock{at.Add(oidcFlowTTL)})
	if _, ok := late.decodeFlow(v); ok {
		t.Error("a flow past its ten minutes was accepted")
	}
}

func mustB64(t *testing.T, s string) []byte {
	b, err := b64.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
