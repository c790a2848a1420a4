package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// ActiveTasks finds a device's active task, to show it with the device.
type ActiveTasks interface {
	// Active returns the device's active task, or domain.ErrNotFound.
	Active(ctx context.Context, deviceID domain.DeviceID) (domain.Task, error)
}

// DeviceAdmin registers devices, rotates their tokens and shows them.
type DeviceAdmin struct {
	devices   ports.DeviceRepository
	tasks     ActiveTasks
	firmwares ports.FirmwareRepository
	clock     ports.Clock
}

// NewDeviceAdmin builds the operators' device use cases (tasks and
// firmwares show a device's active task).
func NewDeviceAdmin(devices ports.DeviceRepository, tasks ActiveTasks, firmwares ports.FirmwareRepository, clock ports.Clock) (*DeviceAdmin, error) {
	if err := required(devices, tasks, firmwares, clock); err != nil {
		return nil, err
	}
	return &DeviceAdmin{devices: devices, tasks: tasks, firmwares: firmwares, clock: clock}, nil
}

// RegisterDevice adds a device and returns its token, which is not stored
// and cannot be shown again. The id comes in the request body, so it is
// parsed here, with the other fields: a bad one is VALIDATION_FAILED.
func (s *DeviceAdmin) RegisterDevice(ctx context.Context, actor domain.Actor, req ports.RegisterDevice) (ports.DeviceCredentials, error) {
	creds, err := registration(req, s.clock.Now())
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	d := creds.Device
	rec, err := announced(actor.Record(d.CreatedAt(), domain.AuditDeviceRegister, d.ID().String(), nil, deviceFacts(d)))(
		domain.EventDeviceRegistered, d.CreatedAt(), DeviceEvent(d))
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	if err := s.devices.Create(ctx, d, rec); err != nil {
		return ports.DeviceCredentials{}, fmt.Errorf("registering device: %w", err)
	}
	return creds, nil
}

// registration reads an operator's registration request: the id by the
// device id rule (a bad one is VALIDATION_FAILED, with the other fields),
// then NewDeviceCredentials. The admin API, the console and Mender's
// preauthorize all register through it.
func registration(req ports.RegisterDevice, now time.Time) (ports.DeviceCredentials, error) {
	id, err := domain.ParseDeviceID(req.DeviceID)
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	return NewDeviceCredentials(id, req.Model, req.CurrentVersion, now)
}

// NewDeviceCredentials is the one way a device comes to be:
// domain.NewDevice judges it, with a fresh token whose hash alone is kept
// (the token is shown once, to whoever registered it). Every registration
// — an operator's, or an accepted Mender request's (application/mender) —
// makes its device here.
func NewDeviceCredentials(id domain.DeviceID, model, version string, now time.Time) (ports.DeviceCredentials, error) {
	token, hash, err := domain.NewDeviceToken()
	if err != nil {
		return ports.DeviceCredentials{}, fmt.Errorf("making device token: %w", err)
	}
	dev, err := domain.NewDevice(id, model, version, hash, now)
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	return ports.DeviceCredentials{Device: dev, Token: token}, nil
}

// RotateDeviceToken issues a new token; the old one stops working as soon
// as the change commits.
func (s *DeviceAdmin) RotateDeviceToken(ctx context.Context, actor domain.Actor, deviceID domain.DeviceID) (ports.DeviceCredentials, error) {
	r, err := newTokenRotation(actor, deviceID, s.clock.Now())
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	dev, err := s.devices.Update(ctx, deviceID, r.apply, r.rec)
	if err != nil {
		return ports.DeviceCredentials{}, fmt.Errorf("rotating token: %w", err)
	}
	return ports.DeviceCredentials{Device: dev, Token: r.token}, nil
}

// tokenRotation is a device's new token, what stores it, and the change's
// audit record.
type tokenRotation struct {
	token string
	hash  domain.TokenHash
	rec   domain.AuditRecord
}

func newTokenRotation(actor domain.Actor, deviceID domain.DeviceID, now time.Time) (tokenRotation, error) {
	if deviceID.IsZero() { // an id the edge could not parse names no device
		return tokenRotation{}, fmt.Errorf("device: %w", domain.ErrNotFound)
	}
	token, hash, err := domain.NewDeviceToken()
	if err != nil {
		return tokenRotation{}, fmt.Errorf("making device token: %w", err)
	}
	// Neither token is shown: the record says that it changed.
	rec, err := actor.Record(now, domain.AuditDeviceTokenRotate, deviceID.String(), nil, nil)
	return tokenRotation{token: token, hash: hash, rec: rec}, err
}

func (r tokenRotation) apply(d *domain.Device) error {
	d.RotateToken(r.hash)
	return nil
}

// GetDevice shows a device and its active task.
func (s *DeviceAdmin) GetDevice(ctx context.Context, deviceID domain.DeviceID) (ports.DeviceView, error) {
	dev, err := s.devices.Get(ctx, deviceID)
	if err != nil {
		return ports.DeviceView{}, fmt.Errorf("loading device: %w", err)
	}
	active, err := s.tasks.Active(ctx, deviceID)
	if errors.Is(err, domain.ErrNotFound) {
		return ports.DeviceView{Device: dev}, nil
	}
	if err != nil {
		return ports.DeviceView{}, fmt.Errorf("loading active task: %w", err)
	}
	v, err := taskView(ctx, s.firmwares, nil, active)
	if err != nil {
		return ports.DeviceView{}, err
	}
	return ports.DeviceView{Device: dev, ActiveTask: &v}, nil
}
