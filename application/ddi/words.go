package ddi

import (
	"context"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Progress is hawkBit's progress of an action: cnt steps done of of.
type Progress struct {
	Cnt int
	Of  int
}

// Feedback is a device's report on an action in hawkBit's vocabulary,
// as received: execution (closed, proceeding, canceled, scheduled,
// rejected, resumed, downloaded), result.finished (success, failure, none),
// result.progress and the free-text details.
type Feedback struct {
	Execution string
	Finished  string
	Progress  *Progress
	Details   []string
}

// Poll answers a hawkBit device's poll. Cancel, when set, takes priority
// over Deployment: the device must confirm the cancel first.
type Poll struct {
	// Cancel is the device's cancelled task whose cancel it has not confirmed.
	Cancel *domain.Task
	// Deployment is the device's active task, if any.
	Deployment *ports.TaskView
	// WantConfigData asks the device for its attributes: the service does
	// not know them yet (or does not know the device's running version).
	WantConfigData bool
	// PollAfter is how long the device should sleep before the next poll.
	PollAfter time.Duration
}

// Window is the state of a deployment's maintenance window, as
// hawkBit's deploymentBase reports it (deployment.maintenanceWindow).
type Window int

// Maintenance window states.
const (
	// NoWindow: the task's rollout has no maintenance window; the field
	// is left out.
	NoWindow Window = iota
	// WindowAvailable: the window is open for the device now.
	WindowAvailable
	// WindowUnavailable: the window is closed for the device now; it may
	// download but must not install ("update": "skip").
	WindowUnavailable
)

// Deployment is a device's action as hawkBit's deploymentBase shows it:
// the task with its firmware, and its rollout's maintenance window as it
// stands for the device now.
type Deployment struct {
	ports.TaskView
	Window Window
}

// Service is what a device speaking hawkBit's Direct Device Integration
// API can do. It adds nothing to the check and event rules: it translates
// the protocol's actions onto ports.DeviceService.
type Service interface {
	// AuthenticateTarget admits a hawkBit target token of the device
	// deviceID and returns the device with its task state, read in the
	// same round trip: domain.ErrUnauthorized for an unknown token,
	// domain.ErrForbidden for another device's.
	AuthenticateTarget(ctx context.Context, token string, deviceID domain.DeviceID) (ports.AuthenticatedDevice, error)
	// KnownDevice returns the registered device with its task state, or
	// domain.ErrNotFound (a gateway token is valid for every registered
	// device).
	KnownDevice(ctx context.Context, deviceID domain.DeviceID) (ports.AuthenticatedDevice, error)
	// Poll runs the check for the device, as authentication read it, with
	// its last-known version and says what the device should do next.
	Poll(ctx context.Context, dev ports.AuthenticatedDevice) (Poll, error)
	// Deployment returns the device's task numbered actionID, with its
	// firmware; domain.ErrNotDeliverable when the firmware lacks the sha1
	// hawkBit agents verify. Its Window is judged by the rule the check
	// admits devices by (schedule rule S2), in the device's time zone.
	Deployment(ctx context.Context, dev ports.AuthenticatedDevice, actionID int64) (Deployment, error)
	// InstalledBase returns the device's succeeded task numbered actionID.
	InstalledBase(ctx context.Context, deviceID domain.DeviceID, actionID int64) (ports.TaskView, error)
	// DeploymentFeedback applies a device's feedback on an action as a task
	// event; resending the same feedback changes nothing.
	DeploymentFeedback(ctx context.Context, deviceID domain.DeviceID, actionID int64, fb Feedback) (ports.TaskView, error)
	// CancelAction returns the notice of the device's cancelled task
	// numbered actionID.
	CancelAction(ctx context.Context, deviceID domain.DeviceID, actionID int64) (domain.CancelNotice, error)
	// CancelFeedback records the device's answer to a cancel: a closed,
	// canceled or rejected execution confirms it.
	CancelFeedback(ctx context.Context, deviceID domain.DeviceID, actionID int64, fb Feedback) (domain.CancelNotice, error)
	// ConfigData stores the device's attributes (mode merge, replace or
	// remove) and takes its running version from the version attribute.
	ConfigData(ctx context.Context, deviceID domain.DeviceID, mode string, data map[string]string) (domain.DeviceAttributes, error)
}
