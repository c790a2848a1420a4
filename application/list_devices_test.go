package application_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// The device listing filters by version (build metadata aside) and by
// last seen (before an RFC 3339 instant, or never); a malformed version or
// instant is VALIDATION_FAILED naming its parameter.
func TestListDevicesByVersionAndLastSeen(t *testing.T) {
	e, clock := newPolicyEnv(t, policyStart)
	old, fresh, never := e.device("1.0.0"), e.device("1.0.0"), e.device("1.0.0")
	e.check(old, "2.0.0+b1")
	clock.Set(policyStart.Add(time.Hour))
	e.check(fresh, "1.0.0")
	ids := func(q ports.DeviceQuery) []string {
		t.Helper()
		page, err := e.admin.ListDevices(e.ctx, q)
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		var out []string
		for _, l := range page.Items {
			out = append(out, l.Device.ID().String())
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s ...string) []string { slices.Sort(s); return s }
	if got := ids(ports.DeviceQuery{Version: "2.0.0"}); !slices.Equal(got, []string{old}) {
		t.Errorf("version 2.0.0: %v, want %v", got, old)
	}
	if got := ids(ports.DeviceQuery{Version: "1.0.0"}); !slices.Equal(got, sorted(fresh, never)) {
		t.Errorf("version 1.0.0: %v", got)
	}
	half := policyStart.Add(30 * time.Minute).Format(time.RFC3339)
	if got := ids(ports.DeviceQuery{SeenBefore: half}); !slices.Equal(got, sorted(old, never)) {
		t.Errorf("seen before %s: %v, want %v and %v", half, got, old, never)
	}
	for _, q := range []ports.DeviceQuery{{Version: "1.0"}, {SeenBefore: "yesterday"}, {SeenBefore: "2026-06-10 12:00"}} {
		_, err := e.admin.ListDevices(e.ctx, q)
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || (q.Version != "" && ve.Field != "version") || (q.SeenBefore != "" && ve.Field != "seen_before") {
			t.Errorf("query %+v: %v", q, err)
		}
	}
}
