package application

import (
	"github.com/ai-device/ota/ports"
)

// Devices implements ports.DeviceService: what a device can ask. It is the
// sum of three use cases: Auth (who is asking), Checks (the poll) and
// Events (a task's progress).
type Devices struct {
	*Auth
	*Checks
	*Events
}

var _ ports.DeviceService = (*Devices)(nil)

// NewDevices builds every device use case from deps (tests and tools; the
// service is wired use case by use case, see ComposeDevices).
func NewDevices(deps Deps, poll PollInterval) (*Devices, error) {
	if err := deps.validate(); err != nil {
		return nil, err
	}
	auth, err := NewAuth(deps.Tasks, deps.Clock)
	if err != nil {
		return nil, err
	}
	checks, err := NewChecks(deps.Devices, deps.Firmwares, deps.Rollouts, deps.Tasks, deps.Locker,
		deps.Clock, deps.IDs, deps.Metrics, deps.Limiter, deps.Attributes, poll)
	if err != nil {
		return nil, err
	}
	events, err := NewEvents(deps.Tasks, deps.Firmwares, deps.Rollouts, deps.Devices, deps.Clock, deps.Metrics, deps.Limiter)
	if err != nil {
		return nil, err
	}
	return ComposeDevices(auth, checks, events), nil
}

// ComposeDevices puts the device use cases together behind
// ports.DeviceService.
func ComposeDevices(auth *Auth, checks *Checks, events *Events) *Devices {
	return &Devices{Auth: auth, Checks: checks, Events: events}
}
