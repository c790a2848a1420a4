package ports

import (
	"context"

	"github.com/ai-device/ota/domain"
)

// DeviceAttributes stores what devices report about themselves (hawkBit's
// configData), one bounded map per device.
type DeviceAttributes interface {
	// Get returns the device's attributes; a device that never reported
	// any (or does not exist) has the zero value, whose Known is false.
	Get(ctx context.Context, deviceID domain.DeviceID) (domain.DeviceAttributes, error)
	// Update loads the device's attributes locked against concurrent
	// changes (the zero value if it has none), lets fn change them, and
	// stores them if fn returns nil. domain.ErrNotFound if the device is
	// not registered.
	Update(ctx context.Context, deviceID domain.DeviceID, fn func(*domain.DeviceAttributes) error) (domain.DeviceAttributes, error)
}

// TaskActions finds tasks by the numeric action id device protocols use,
// and keeps the cancel notices of cancelled tasks (domain.CancelNotice).
// Not-found — including another device's task — is domain.ErrNotFound.
type TaskActions interface {
	// ByAction returns the device's task numbered actionID.
	ByAction(ctx context.Context, deviceID domain.DeviceID, actionID int64) (domain.Task, error)
	// Cancel returns the notice of the device's task numbered actionID.
	Cancel(ctx context.Context, deviceID domain.DeviceID, actionID int64) (domain.CancelNotice, error)
	// PendingCancel returns the device's most recently cancelled task whose
	// cancel the device has not confirmed, or nil.
	PendingCancel(ctx context.Context, deviceID domain.DeviceID) (*domain.CancelNotice, error)
	// UpdateCancel loads the notice of the device's task numbered actionID
	// locked, lets fn change it, and stores it if fn returns nil.
	UpdateCancel(ctx context.Context, deviceID domain.DeviceID, actionID int64, fn func(*domain.CancelNotice) error) (domain.CancelNotice, error)
}
