package ports

import (
	"context"
	"time"

	"github.com/ai-device/ota/domain"
)

// TaskView is a task with the firmware it installs, as devices and
// operators see it.
type TaskView struct {
	Task     domain.Task
	Firmware domain.Firmware
}

// AuthenticatedDevice is the device a request authenticated as, as the
// edge hands it to the use cases: no use case looks the caller up again.
type AuthenticatedDevice struct {
	Device domain.Device
	// Tasks is the device's task state, read with the device during
	// authentication (one round trip for both), or nil when the edge
	// authenticated without reading it. A check decides on it and reads
	// again, under the lock, only before it writes.
	Tasks *DeviceTasks
	// ReadAt is when the device was read: taken before the read, so a
	// success stored after it is one the read may not have seen (the zero
	// time: not known; the check takes its own start).
	ReadAt time.Time
}

// ID is the authenticated device's id.
func (a AuthenticatedDevice) ID() domain.DeviceID { return a.Device.ID() }

// CheckRequest is a device's poll: who it is (authenticated by the edge),
// what it says it is, what it runs.
type CheckRequest struct {
	Device         AuthenticatedDevice
	Model          string
	CurrentVersion string
	// Attributes the device reports in this poll (nil: none), merged over
	// its stored ones (domain.DeviceAttributes limits) and used at once.
	Attributes map[string]string
	// Delivery is what the protocol the device asks by can deliver: the
	// plan offers only such firmware (zero: the REST API's, anything).
	Delivery domain.Delivery
}

// Check outcomes, as counted in metrics.
const (
	CheckNoUpdate   = "no_update"
	CheckReused     = "reused"
	CheckCreated    = "created"
	CheckSuperseded = "superseded"
	CheckBusy       = "busy"
	CheckError      = "error"
	// CheckRateLimited counts checks refused for the device's request budget.
	CheckRateLimited = "rate_limited"
	// CheckCancelled counts checks whose caller hung up before the answer.
	CheckCancelled = "cancelled"
)

// CheckResult answers a poll. Task is nil when there is no update.
type CheckResult struct {
	Task      *TaskView
	Outcome   string
	PollAfter time.Duration
}

// EventRequest is a device's progress report, as received.
type EventRequest struct {
	EventID      string
	Status       string
	Progress     *int
	ErrorCode    string
	ErrorMessage string
}

// DeviceService is what devices can do.
type DeviceService interface {
	// AuthenticateDevice returns the device a bearer token belongs to,
	// with its task state read in the same round trip, or
	// domain.ErrUnauthorized.
	AuthenticateDevice(ctx context.Context, token string) (AuthenticatedDevice, error)
	// IdentifyDevice returns a device an edge authenticated by its own
	// means (a signed token, a gateway) by id, with its task state, or
	// domain.ErrNotFound.
	IdentifyDevice(ctx context.Context, deviceID domain.DeviceID) (AuthenticatedDevice, error)
	// Check finds or creates the device's upgrade task (check rules 1–7).
	Check(ctx context.Context, req CheckRequest) (CheckResult, error)
	// GetTask returns one of the device's own tasks (domain.ErrNotFound for
	// anyone else's, and for the zero taskID — an id the edge could not
	// parse — without reading the store).
	GetTask(ctx context.Context, deviceID domain.DeviceID, taskID domain.UUID) (TaskView, error)
	// ReportEvent applies a progress event to one of the device's tasks
	// (event rules 1–5). The zero taskID is domain.ErrNotFound once the
	// event itself is judged valid, without reading the store.
	ReportEvent(ctx context.Context, deviceID domain.DeviceID, taskID domain.UUID, ev EventRequest) (TaskView, error)
}

// RegisterDevice is an operator's request to add a device, as received:
// the use case parses DeviceID (a bad one is VALIDATION_FAILED, as any
// other field of the body).
type RegisterDevice struct {
	DeviceID       string
	Model          string
	CurrentVersion string
	// PublicKey, when set, preauthorizes the device to authenticate with
	// this PEM public key (Mender's device API).
	PublicKey string
}

// DeviceCredentials is a device with its plain token, shown once.
type DeviceCredentials struct {
	Device domain.Device
	Token  string
}

// DeviceView is a device with its active task, if any.
type DeviceView struct {
	Device     domain.Device
	ActiveTask *TaskView
	Tags       []string
	Attributes domain.DeviceAttributes
}

// StartRollout is an operator's request to roll a firmware out, as the
// API's body and the console's form give it: the use case reads the
// firmware id (empty: VALIDATION_FAILED; one that names no firmware,
// malformed or unknown: NOT_FOUND) and the domain judges Spec.
type StartRollout struct {
	FirmwareID string
	Spec       domain.RolloutSpec
	// RequestKey is the request's Idempotency-Key as sent ("": none).
	RequestKey string
}

// RolloutChange is an operator's change to a running rollout; nil fields stay.
type RolloutChange struct {
	Percentage *int
	Status     *string
}

// RolloutView is a rollout with its task counts.
type RolloutView struct {
	Rollout domain.Rollout
	Stats   domain.TaskStats
	// StageStats counts the tasks of the current stage (staged rollouts).
	StageStats *domain.TaskStats
}

// TaskQuery is the admin task listing's filter, as received.
type TaskQuery struct {
	DeviceID  string
	RolloutID string
	Status    string
	Limit     string
	After     string
}

// TaskPage is one page of tasks and the cursor of the next ("" on the last).
type TaskPage struct {
	Items []TaskView
	Next  string
}

// AdminService is what operators can do.
type AdminService interface {
	RegisterDevice(ctx context.Context, actor domain.Actor, req RegisterDevice) (DeviceCredentials, error)
	RotateDeviceToken(ctx context.Context, actor domain.Actor, deviceID domain.DeviceID) (DeviceCredentials, error)
	GetDevice(ctx context.Context, deviceID domain.DeviceID) (DeviceView, error)
	PublishFirmware(ctx context.Context, actor domain.Actor, spec domain.FirmwareSpec) (domain.Firmware, error)
	ListFirmwares(ctx context.Context, model string) ([]domain.Firmware, error)
	RevokeFirmware(ctx context.Context, actor domain.Actor, id domain.UUID) (domain.Firmware, error)
	StartRollout(ctx context.Context, actor domain.Actor, req StartRollout) (domain.Rollout, error)
	UpdateRollout(ctx context.Context, actor domain.Actor, id domain.UUID, change RolloutChange) (domain.Rollout, error)
	GetRollout(ctx context.Context, id domain.UUID) (RolloutView, error)
	ListTasks(ctx context.Context, q TaskQuery) (TaskPage, error)
	// TaskEvents returns a task's stored events, oldest first, bounded
	// (domain.ErrNotFound for an unknown task).
	TaskEvents(ctx context.Context, taskID domain.UUID) ([]TaskEvent, error)
	DeviceTargeting
}

// Metrics receives what the core observes, for dashboards.
type Metrics interface {
	LockMetrics
	// CheckDone counts a check by outcome (CheckCreated, ...).
	CheckDone(outcome string)
	// TaskTransition counts tasks entering a status.
	TaskTransition(status string)
}

// NopMetrics discards observations.
type NopMetrics struct{ NopLockMetrics }

// CheckDone discards the observation.
func (NopMetrics) CheckDone(string) {}

// TaskTransition discards the observation.
func (NopMetrics) TaskTransition(string) {}

// HealthCheck is one dependency probe for /readyz.
type HealthCheck interface {
	// Name is the key in the readiness report ("postgres", "redis").
	Name() string
	// Check returns nil when the dependency answers.
	Check(ctx context.Context) error
}
