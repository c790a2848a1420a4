package application_test

import (
	"context"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// viewAsOf is an AuthStore whose one device's view is as of asOf.
type viewAsOf struct {
	dev  domain.Device
	asOf time.Time
}

func (s viewAsOf) CheckView(context.Context, domain.TokenHash) (ports.CheckView, error) {
	return ports.CheckView{Device: s.dev, AsOf: s.asOf}, nil
}

func (s viewAsOf) CheckViewOf(context.Context, domain.DeviceID) (ports.CheckView, error) {
	return ports.CheckView{Device: s.dev, AsOf: s.asOf}, nil
}

// TestAuthenticatedDeviceReadAtIsNoLaterThanItsView: a device read is
// stamped with the time the read began, or with its view's AsOf when that
// is earlier (a lagging replica's): a success the view may miss must never
// pass for one it saw (CheckInput.ReadAt).
func TestAuthenticatedDeviceReadAtIsNoLaterThanItsView(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	const token = "a-device-token"
	dev, err := domain.NewDevice(asDeviceID("cam-0001"), "cam-x1", "1.0.0", domain.HashToken(token), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		asOf, want time.Time
	}{
		{"the read itself", time.Time{}, now},
		{"a replica's, behind", now.Add(-300 * time.Millisecond), now.Add(-300 * time.Millisecond)},
		{"a replica's, ahead of this clock", now.Add(time.Second), now},
	} {
		auth, err := application.NewAuth(viewAsOf{dev: dev, asOf: tc.asOf}, &fixedClock{now: now})
		if err != nil {
			t.Fatal(err)
		}
		byToken, err := auth.AuthenticateDevice(t.Context(), token)
		if err != nil {
			t.Fatal(err)
		}
		byID, err := auth.IdentifyDevice(t.Context(), dev.ID())
		if err != nil {
			t.Fatal(err)
		}
		if !byToken.ReadAt.Equal(tc.want) || !byID.ReadAt.Equal(tc.want) {
			t.Errorf("%s: read at %v (token), %v (id); want %v", tc.name, byToken.ReadAt, byID.ReadAt, tc.want)
		}
	}
}
