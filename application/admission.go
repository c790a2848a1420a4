package application

import (
	"context"
	"fmt"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// registerWithKey registers a device preauthorized to authenticate with
// its public key (Mender's device API): the device and its admission are
// stored together, or neither is.
func (s *Admin) registerWithKey(ctx context.Context, dev domain.Device, token, publicKey string) (ports.DeviceCredentials, error) {
	if s.deps.Admissions == nil {
		return ports.DeviceCredentials{}, &domain.ValidationError{Field: "public_key", Reason: "is not supported by this service's store"}
	}
	key, err := domain.ParseDeviceKey("public_key", publicKey)
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	adm, err := domain.NewDeviceAdmission(dev.ID(), key, dev.CreatedAt())
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	if err := s.deps.Admissions.CreateDevice(ctx, dev, adm); err != nil {
		return ports.DeviceCredentials{}, fmt.Errorf("registering device: %w", err)
	}
	return ports.DeviceCredentials{Device: dev, Token: token}, nil
}
