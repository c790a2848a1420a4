// Package local holds the in-process services that are not stores: the
// system clock and id generator, the named-mutex Locker and the per-key
// RateLimiter. Every wiring may use them, the Postgres one included.
package local

import (
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/google/uuid"
)

// Clock is the system clock, for every wiring (tests, dev mode,
// production); tests that need a fixed time substitute their own
// ports.Clock.
type Clock struct{}

var _ ports.Clock = Clock{}

// NewClock returns the system clock, for wire.
func NewClock() Clock { return Clock{} }

// Now returns the current time; it keeps the monotonic reading so that
// durations measured with it are immune to wall-clock steps.
func (Clock) Now() time.Time { return time.Now() }

// UUIDs makes random (version 4) UUIDs in canonical lowercase form, the form
// Postgres returns and the rollout bucket hashes. Random rather than
// time-ordered so that a task id reveals nothing about its neighbours.
type UUIDs struct{}

var _ ports.IDGenerator = UUIDs{}

// NewUUIDs returns the UUID generator, for wire.
func NewUUIDs() UUIDs { return UUIDs{} }

// NewID returns a fresh UUID. It panics only if the system's random source
// fails, in which case no id could be trusted anyway.
func (UUIDs) NewID() domain.UUID { return domain.UUIDOf(uuid.New()) }
