package ports

import (
	"context"
	"time"

	"github.com/ai-device/ota/domain"
)

// DeviceAdmissions stores the public keys devices authenticate with
// (domain.DeviceAdmission). Not-found is domain.ErrNotFound.
type DeviceAdmissions interface {
	// Get returns the device's admission.
	Get(ctx context.Context, deviceID domain.DeviceID) (domain.DeviceAdmission, error)
	// Generation returns the device's current session token generation
	// (domain.DeviceAdmission.Generation) without its key: what every call
	// a session token admits checks, so it must be cheap.
	Generation(ctx context.Context, deviceID domain.DeviceID) (int64, error)
	// CreateDevice registers a device together with its admission,
	// atomically: domain.ErrDeviceExists if the id is taken, and nothing is
	// stored then.
	CreateDevice(ctx context.Context, d domain.Device, a domain.DeviceAdmission) error
	// Admit stores a registered device's admission, replacing any key it
	// had (create==true when it had none); domain.ErrNotFound if the
	// device is not registered.
	Admit(ctx context.Context, deviceID domain.DeviceID, fn func(current *domain.DeviceAdmission) (domain.DeviceAdmission, error)) (domain.DeviceAdmission, error)
	// Registered returns those of the devices that are registered, with
	// their admissions, in one read (the pending list flags requests for
	// registered devices).
	Registered(ctx context.Context, deviceIDs []domain.DeviceID) (map[domain.DeviceID]RegisteredDevice, error)
}

// AuthRequests stores the requests of devices waiting to be admitted, one
// per device and key. Not-found is domain.ErrNotFound, also for the zero
// request id (one the edge could not parse).
type AuthRequests interface {
	// Ask serialises every Ask (so that the bound on pending requests
	// holds under concurrent requests), loads the request of the device
	// with key (nil if none) and, when there is none, the number of
	// pending requests (0 otherwise), and stores what fn returns; fn
	// returning nil stores nothing.
	Ask(ctx context.Context, deviceID domain.DeviceID, key domain.DeviceKey,
		fn func(current *domain.AuthRequest, pending int) (*domain.AuthRequest, error)) error
	// Get returns a request by id.
	Get(ctx context.Context, id domain.UUID) (domain.AuthRequest, error)
	// List returns the requests with the given status, oldest first, at
	// most limit.
	List(ctx context.Context, status domain.AuthRequestStatus, limit int) ([]domain.AuthRequest, error)
	// Update loads a request locked, lets fn change it, and stores it.
	Update(ctx context.Context, id domain.UUID, fn func(*domain.AuthRequest) error) (domain.AuthRequest, error)
	// Accept registers the request's device when it is not registered
	// (dev), stores the admission admit makes of the device's current one
	// (nil if none) and deletes the request, atomically; domain.ErrNotFound
	// if the request is gone or no longer pending.
	Accept(ctx context.Context, id domain.UUID, dev *domain.Device,
		admit func(current *domain.DeviceAdmission) (domain.DeviceAdmission, error)) error
	// Delete deletes a request, pending or rejected.
	Delete(ctx context.Context, id domain.UUID) error
	// DeleteExpired deletes every request last changed before cutoff
	// (domain.AuthRequest.ExpiredBy) and returns how many.
	DeleteExpired(ctx context.Context, cutoff time.Time) (int, error)
}

// RegisteredDevice is a registered device as an auth request for its id
// is judged (domain.AuthRequest.ConflictWith): its model and its
// admission, if it has one.
type RegisteredDevice struct {
	Model     string
	Admission *domain.DeviceAdmission
}

// AuthQueueObserver hears of an auth request not recorded because the
// pending queue is full (domain.PendingRoom): a real device may be among
// them, so operators must know.
type AuthQueueObserver interface {
	AuthQueueFull(deviceID domain.DeviceID, pending int)
}

// ArtifactCatalog finds firmware by the artifact name Mender devices
// report.
type ArtifactCatalog interface {
	// ByArtifactName returns the firmware of model published under name,
	// or domain.ErrNotFound.
	ByArtifactName(ctx context.Context, model, name string) (domain.Firmware, error)
}

// TaskLogs keeps the logs devices upload about their tasks.
type TaskLogs interface {
	// Put stores a task's log, replacing the previous one.
	Put(ctx context.Context, l domain.TaskLog) error
	// Get returns a task's log, or domain.ErrNotFound if none was uploaded.
	Get(ctx context.Context, taskID domain.UUID) (domain.TaskLog, error)
}

// MenderAuth is a Mender authentication request as received: the exact
// body bytes (the signature covers them) and the X-MEN-Signature header.
type MenderAuth struct {
	Body      []byte
	Signature string
	// Source is the address the request came from, the key of the
	// unauthenticated request budget.
	Source string
}

// MenderProvides is what a Mender device says it runs when it asks for
// its next deployment.
type MenderProvides struct {
	ArtifactName string
	DeviceType   string
}

// MenderService is what a device speaking Mender's device API can do. It
// adds nothing to the check and event rules: it translates the protocol
// onto DeviceService.
type MenderService interface {
	// Authenticate answers an authentication request with a fresh session
	// token, or domain.ErrUnauthorized while the device is not admitted
	// (recording it as pending when operators accept pending devices).
	Authenticate(ctx context.Context, req MenderAuth) (string, error)
	// Session returns the device a session token was issued to:
	// domain.ErrUnauthorized if it is invalid or expired (judged without
	// the store), or if the device's admission has moved to another token
	// generation since (its key was rotated: one read of the generation).
	Session(ctx context.Context, token string) (domain.DeviceID, error)
	// Next runs the check for the device: its deployment, or nil.
	Next(ctx context.Context, deviceID domain.DeviceID, p MenderProvides) (*TaskView, error)
	// Status applies a deployment status report to the device's task;
	// domain.ErrTaskFinished when the task was cancelled or is over.
	Status(ctx context.Context, deviceID domain.DeviceID, taskID domain.UUID, status string) error
	// Log keeps the log the device uploaded about its task.
	Log(ctx context.Context, deviceID domain.DeviceID, taskID domain.UUID, lines []domain.LogLine) error
	// Inventory stores the device's inventory as its attributes; replace
	// makes the report the whole set, else it is merged.
	Inventory(ctx context.Context, deviceID domain.DeviceID, items []domain.InventoryItem, replace bool) error
}

// PendingRequest is a pending request as operators see it: Conflict is
// set when the device it names is registered already
// (domain.AuthRequest.ConflictWith).
type PendingRequest struct {
	Request  domain.AuthRequest
	Conflict *domain.KeyConflict
}

// AcceptRequest is an operator's accept: the model of a device not yet
// registered ("" for its device type), and ReplaceKey to replace the key
// of a registered one.
type AcceptRequest struct {
	Model      string
	ReplaceKey bool
}

// AdmissionService is what operators do about device admission.
type AdmissionService interface {
	// Pending lists the devices waiting to be admitted, each flagged when
	// its device is registered already.
	Pending(ctx context.Context) ([]PendingRequest, error)
	// Accept admits a pending device with exactly the key its request
	// names, registering it with the model (or the device type it sent)
	// when it is not registered yet; a registered device's key is replaced
	// only with ReplaceKey. It returns the admitted device.
	Accept(ctx context.Context, requestID domain.UUID, a AcceptRequest) (domain.Device, error)
	// Reject refuses a pending device.
	Reject(ctx context.Context, requestID domain.UUID) (domain.AuthRequest, error)
	// Delete deletes a request, pending or rejected (the device may ask
	// again).
	Delete(ctx context.Context, requestID domain.UUID) error
	// TaskLog returns the log a device uploaded about a task.
	TaskLog(ctx context.Context, taskID domain.UUID) (domain.TaskLog, error)
	// SetKey admits a registered device with a public key, replacing the
	// key it had (its session tokens' generation moves on).
	SetKey(ctx context.Context, deviceID domain.DeviceID, publicKey string) (domain.DeviceAdmission, error)
}
