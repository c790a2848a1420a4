package mender

import (
	"context"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// AuthQueueObserver hears of an auth request not recorded because the
// pending queue is full (domain.PendingRoom): a real device may be among
// them, so operators must know.
type AuthQueueObserver interface {
	AuthQueueFull(deviceID domain.DeviceID, pending int)
}

// Auth is a Mender authentication request as received: the exact
// body bytes (the signature covers them) and the X-MEN-Signature header.
type Auth struct {
	Body      []byte
	Signature string
	// Source is the address the request came from, the key of the
	// unauthenticated request budget.
	Source string
}

// Provides is what a Mender device says it runs when it asks for
// its next deployment.
type Provides struct {
	ArtifactName string
	DeviceType   string
}

// Service is what a device speaking Mender's device API can do. It
// adds nothing to the check and event rules: it translates the protocol
// onto ports.DeviceService.
type Service interface {
	// Authenticate answers an authentication request with a fresh session
	// token, or domain.ErrUnauthorized while the device is not admitted
	// (recording it as pending when operators accept pending devices).
	Authenticate(ctx context.Context, req Auth) (string, error)
	// Session returns the device a session token was issued to:
	// domain.ErrUnauthorized if it is invalid or expired (judged without
	// the store), or if the device's admission has moved to another token
	// generation since (its key was rotated: one read of the generation).
	Session(ctx context.Context, token string) (domain.DeviceID, error)
	// Next runs the check for the device: its deployment, or nil.
	Next(ctx context.Context, deviceID domain.DeviceID, p Provides) (*ports.TaskView, error)
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
	Accept(ctx context.Context, actor domain.Actor, requestID domain.UUID, a AcceptRequest) (domain.Device, error)
	// Reject refuses a pending device.
	Reject(ctx context.Context, actor domain.Actor, requestID domain.UUID) (domain.AuthRequest, error)
	// Delete deletes a request, pending or rejected (the device may ask
	// again).
	Delete(ctx context.Context, actor domain.Actor, requestID domain.UUID) error
	// TaskLog returns the log a device uploaded about a task.
	TaskLog(ctx context.Context, taskID domain.UUID) (domain.TaskLog, error)
	// SetKey admits a registered device with a public key, replacing the
	// key it had (its session tokens' generation moves on).
	SetKey(ctx context.Context, actor domain.Actor, deviceID domain.DeviceID, publicKey string) (domain.DeviceAdmission, error)
}
