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
	// (dev), stores its admission and deletes the request, atomically;
	// domain.ErrNotFound if the request is gone or no longer pending.
	Accept(ctx context.Context, id domain.UUID, dev *domain.Device, a domain.DeviceAdmission) error
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
