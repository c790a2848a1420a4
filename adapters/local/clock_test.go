package local

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestClockAndUUIDs(t *testing.T) {
	before := time.Now()
	now := NewClock().Now()
	if now.Before(before) || now.After(time.Now()) {
		t.Errorf("clock says %v, not now", now)
	}
	ids := NewUUIDs()
	seen := map[string]bool{}
	for range 1000 {
		id := ids.NewID()
		u, err := uuid.Parse(id.String())
		if err != nil || u.String() != id.String() || u.Version() != 4 {
			t.Fatalf("id %q is not a canonical v4 UUID (%v)", id, err)
		}
		if seen[id.String()] {
			t.Fatalf("id %q repeated", id)
		}
		seen[id.String()] = true
	}
}
