package domain_test

import (
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// Schedule rules S2–S3 around every clock change of 2026 in zones with
// hour, half-hour and southern-hemisphere changes: whenever the window is
// closed, the next opening it names is the first instant it is open (open
// there, closed a second before), so a device sent back then is served.
func TestWindowNextOpeningIsTheFirstOpenInstant(t *testing.T) {
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago"}
	windows := []string{"02:00-03:00", "02:30-04:00", "01:30-02:30", "23:00-02:30", "22:00-24:00", "03:00-01:00"}
	for _, zone := range zones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		// The instants the zone's offset changes in 2026, found by the hour.
		var changes []time.Time
		for at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); at.Year() == 2026; at = at.Add(time.Hour) {
			_, a := at.In(loc).Zone()
			_, b := at.Add(time.Hour).In(loc).Zone()
			if a != b {
				changes = append(changes, at)
			}
		}
		if len(changes) != 2 {
			t.Fatalf("%s: %d changes in 2026", zone, len(changes))
		}
		for _, daily := range windows {
			w, err := domain.ParseWindow(daily, zone)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range changes {
				for now := c.Add(-36 * time.Hour); now.Before(c.Add(36 * time.Hour)); now = now.Add(10 * time.Minute) {
					open, next := w.Open(now, domain.DeviceFacts{})
					if open {
						continue
					}
					if !next.After(now) || next.Sub(now) > 49*time.Hour {
						t.Fatalf("%s %s at %s: next opening %s", zone, daily, now, next)
					}
					if o, _ := w.Open(next, domain.DeviceFacts{}); !o {
						t.Fatalf("%s %s at %s: closed at its next opening %s", zone, daily, now, next)
					}
					if o, _ := w.Open(next.Add(-time.Second), domain.DeviceFacts{}); o && next.Add(-time.Second).After(now) {
						t.Fatalf("%s %s at %s: already open a second before its next opening %s", zone, daily, now, next)
					}
				}
			}
		}
	}
}
