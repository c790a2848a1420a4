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
//
// The window of a local day runs from the first instant the device's clock
// reads its start to the first instant it then reads its end (see span): on
// the day the clock springs forward, a start in the skipped hour opens the
// window when the clock jumps (and a window wholly inside that hour does not
// open that day); on the day it falls back, a start in the repeated hour
// opens it at the first reading, and it stays open through the repeat.
func (w Window) Open(now time.Time, f DeviceFacts) (bool, time.Time) {
	loc := w.locationFor(f)
	y, m, d := now.In(loc).Date()
	// The spans of consecutive days follow each other; yesterday's may
	// still run past midnight, and a day's may be empty (spring forward),
	// so look a few days on.
	for k := -1; k <= 3; k++ {
		s, e := w.span(y, m, d+k, loc)
		switch {
		case !s.Before(e):
			continue
		case now.Before(s):
			return false, s.UTC()
		case now.Before(e):
			return true, time.Time{}
		}
	}
	// Not reached with real zones (a day has at most one change).
	return false, time.Date(y, m, d+4, w.start/60, w.start%60, 0, 0, loc).UTC()
}

// span is the window of local day (y, m, d): from the first instant whose
// wall clock in loc reads the start on that day, to the first that reads
// its end on that day or the next (when it crosses midnight). It is empty
// when both fall in the same skipped hour.
func (w Window) span(y int, m time.Month, d int, loc *time.Location) (start, end time.Time) {
	start = firstReading(y, m, d, w.start, loc)
	if w.start < w.end {
		return start, firstReading(y, m, d, w.end, loc)
	}
	return start, firstReading(y, m, d+1, w.end, loc)
}

// firstReading is the first instant at which a clock in loc reads mins
// minutes after midnight of day (y, m, d), or later that day: the reading
// itself; its first occurrence when the clock falls back over it (the
// hour repeats); the instant the clock jumps over it when it springs
// forward. time.Date does not say which one it picks in either case.
func firstReading(y int, m time.Month, d, mins int, loc *time.Location) time.Time {
	wall := time.Date(y, m, d, mins/60, mins%60, 0, 0, time.UTC) // the reading, as if loc were UTC
	y, m, d = wall.Date()
	var first time.Time
	// The offsets in force a day before and a day after: a zone changes
	// at most once in between, so the reading is wall less one of them.
	for _, probe := range []time.Time{wall.Add(-26 * time.Hour), wall.Add(26 * time.Hour)} {
		_, off := probe.In(loc).Zone()
		t := wall.Add(-time.Duration(off) * time.Second)
		lt := t.In(loc)
		ly, lm, ld := lt.Date()
		if ly == y && lm == m && ld == d && lt.Hour() == wall.Hour() && lt.Minute() == wall.Minute() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if !first.IsZero() {
		return first
	}
	// Skipped: read with the earlier offset, the reading lands after the
	// jump, in the period the jump began.
	_, off := wall.Add(-26 * time.Hour).In(loc).Zone()
	jumped, _ := wall.Add(-time.Duration(off) * time.Second).In(loc).ZoneBounds()
	return jumped
}

// openBetween is how long the window was open for a device with these
// facts between from and to (from before to), summed over the days' spans
// (see Open); it stops summing once the sum passes limit, so that a long
// gap costs no more days than the limit needs.
func (w Window) openBetween(from, to time.Time, f DeviceFacts, limit time.Duration) time.Duration {
	loc := w.locationFor(f)
	y, m, d := from.In(loc).Date()
	var sum time.Duration
	// Yesterday's span may still run past midnight into from.
	for k := -1; sum <= limit; k++ {
		s, e := w.span(y, m, d+k, loc)
		if !s.Before(to) {
			break
		}
		if s.Before(from) {
			s = from
		}
		if e.After(to) {
			e = to
		}
		if s.Before(e) {
			sum += e.Sub(s)
		}
	}
	return sum
}
