package main

import (
	"testing"
	"time"
)

// A fleet started at once must not poll in step: the devices' first rests
// spread their next checks evenly over the poll interval, and every rest
// after that is the whole interval.
func TestFirstRestsSpreadTheFleet(t *testing.T) {
	const poll = 100 * time.Second
	f := newFleet("spread", "1.0.0", 4)
	for i, want := range []time.Duration{25 * time.Second, 50 * time.Second, 75 * time.Second, poll} {
		if got := f.devices[i].rest(poll); got != want {
			t.Errorf("device %d of 4: first rest %s, want %s", i, got, want)
		}
	}
	for i, d := range f.devices {
		if got := d.rest(poll); got != poll {
			t.Errorf("device %d of 4: second rest %s, want the whole interval %s", i, got, poll)
		}
	}
}
