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
