package domain

import (
	"fmt"
	"sync"
	"time"
)

// TimezoneAttribute is the device attribute naming the IANA time zone a
// device lives in ("Europe/Berlin"); a rollout's maintenance window is
// read in it when the device reports one that exists.
const TimezoneAttribute = "timezone"

// Window is a daily maintenance window such as "02:00-04:00" (schedule
// rule S2): devices are offered the rollout only between its start
// (inclusive) and end (exclusive), read in the device's time zone when it
// reports one, else in the window's own. A window may cross midnight
// ("22:00-02:00").
type Window struct {
	start, end int // minutes after midnight
	zone       string
}

// ParseWindow reads a daily window "HH:MM-HH:MM" and its default time zone
// (an IANA name; "" is UTC).
func ParseWindow(daily, zone string) (Window, error) {
	bad := invalid("window.daily", "must be HH:MM-HH:MM, such as 02:00-04:00")
	if len(daily) != len("00:00-00:00") || daily[2] != ':' || daily[5] != '-' || daily[8] != ':' {
		return Window{}, bad
	}
	num := func(i int) (int, bool) {
		a, b := daily[i], daily[i+1]
		if a < '0' || a > '9' || b < '0' || b > '9' {
			return 0, false
		}
		return int(a-'0')*10 + int(b-'0'), true
	}
	h1, ok1 := num(0)
	m1, ok2 := num(3)
	h2, ok3 := num(6)
	m2, ok4 := num(9)
	if !ok1 || !ok2 || !ok3 || !ok4 || h1 > 23 || h2 > 24 || m1 > 59 || m2 > 59 || h2 == 24 && m2 != 0 {
		return Window{}, bad
	}
	w := Window{start: h1*60 + m1, end: (h2*60 + m2) % (24 * 60), zone: zone}
	if w.start == w.end {
		return Window{}, invalid("window.daily", "must not start where it ends")
	}
	if zone == "" {
		w.zone = "UTC"
	}
	if _, ok := location(w.zone); !ok {
		return Window{}, invalid("window.time_zone", "is not a known IANA time zone such as Europe/Berlin")
	}
	return w, nil
}

// Daily is the window's "HH:MM-HH:MM" form.
func (w Window) Daily() string {
	end := w.end
	if end == 0 {
		end = 24 * 60
	}
	return fmt.Sprintf("%02d:%02d-%02d:%02d", w.start/60, w.start%60, end/60, end%60)
}

// Zone is the window's own time zone.
func (w Window) Zone() string { return w.zone }

// locations caches loaded time zones: a check must not read tzdata files.
var locations sync.Map

func location(name string) (*time.Location, bool) {
	if l, ok := locations.Load(name); ok {
		loc, _ := l.(*time.Location)
		return loc, loc != nil
	}
	if len(name) > MaxIDLen || name == "" || name == "Local" {
		return nil, false
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		loc = nil
	}
	locations.Store(name, loc)
	return loc, loc != nil
}

// locationFor picks where the window is read for a device: its timezone
// attribute when it names a known zone, else the window's own.
func (w Window) locationFor(f DeviceFacts) *time.Location {
	if tz, ok := f.Attributes[TimezoneAttribute]; ok {
		if loc, ok := location(tz); ok {
			return loc
		}
	}
	loc, _ := location(w.zone)
	if loc == nil {
		return time.UTC
	}
	return loc
}

// Open reports whether the window is open at now for a device with these
// facts, and, when it is not, when it next opens.
func (w Window) Open(now time.Time, f DeviceFacts) (bool, time.Time) {
	loc := w.locationFor(f)
	t := now.In(loc)
	mins := t.Hour()*60 + t.Minute()
	var open bool
	if w.start < w.end {
		open = mins >= w.start && mins < w.end
	} else {
		open = mins >= w.start || mins < w.end
	}
	if open {
		return true, time.Time{}
	}
	next := time.Date(t.Year(), t.Month(), t.Day(), w.start/60, w.start%60, 0, 0, loc)
	if !next.After(now) {
		next = time.Date(t.Year(), t.Month(), t.Day()+1, w.start/60, w.start%60, 0, 0, loc)
	}
	return false, next.UTC()
}
