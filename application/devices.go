package application

import (
	"errors"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/ai-device/ota/ports"
)

// Devices implements ports.DeviceService: what a device can ask. Its use
// cases live in auth.go (who is asking), check.go (the poll) and events.go
// (a task's progress).
type Devices struct {
	deps      Deps
	pollAfter time.Duration
	// flights coalesces concurrent creations for the same device, firmware
	// and reported version within this process: a burst of duplicate polls
	// takes the lock once per replica instead of queueing every request
	// behind it.
	flights singleflight.Group
}

var _ ports.DeviceService = (*Devices)(nil)

// NewDevices builds the device use cases.
func NewDevices(deps Deps, poll PollInterval) (*Devices, error) {
	if err := deps.validate(); err != nil {
		return nil, err
	}
	if poll <= 0 {
		return nil, errors.New("application: poll interval must be positive")
	}
	return &Devices{deps: deps, pollAfter: time.Duration(poll)}, nil
}
