package ports

import (
	"context"

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
}

// AuthRequests stores the requests of devices waiting to be admitted, one
// per device. Not-found is domain.ErrNotFound, also for the zero request id
// (one the edge could not parse).
type AuthRequests interface {
	// Upsert loads the device's request locked (nil if none) and stores
	// what fn returns; fn returning nil stores nothing.
	Upsert(ctx context.Context, deviceID domain.DeviceID, fn func(current *domain.AuthRequest) (*domain.AuthRequest, error)) error
	// Get returns a request by id.
	Get(ctx context.Context, id domain.UUID) (domain.AuthRequest, error)
	// List returns the requests with the given status, oldest first, at
	// most limit.
	List(ctx context.Context, status domain.AuthRequestStatus, limit int) ([]domain.AuthRequest, error)
	// Count counts every stored request (to bound what unadmitted devices
	// can make the service store).
	Count(ctx context.Context) (int, error)
	// Update loads a request locked, lets fn change it, and stores it.
	Update(ctx context.Context, id domain.UUID, fn func(*domain.AuthRequest) error) (domain.AuthRequest, error)
	// Accept registers the request's device when it is not registered
	// (dev), stores its admission and deletes the request, atomically.
	Accept(ctx context.Context, id domain.UUID, dev *domain.Device, a domain.DeviceAdmission) error
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

// AdmissionService is what operators do about device admission.
type AdmissionService interface {
	// Pending lists the devices waiting to be admitted.
	Pending(ctx context.Context) ([]domain.AuthRequest, error)
	// Accept admits a pending device with the key it presented,
	// registering it with model (or the device type it sent) when it is
	// not registered yet. It returns the admitted device.
	Accept(ctx context.Context, requestID domain.UUID, model string) (domain.Device, error)
	// Reject refuses a pending device.
	Reject(ctx context.Context, requestID domain.UUID) (domain.AuthRequest, error)
	// TaskLog returns the log a device uploaded about a task.
	TaskLog(ctx context.Context, taskID domain.UUID) (domain.TaskLog, error)
	// SetKey admits a registered device with a public key, replacing the
	// key it had (its session tokens' generation moves on).
	SetKey(ctx context.Context, deviceID domain.DeviceID, publicKey string) (domain.DeviceAdmission, error)
}
