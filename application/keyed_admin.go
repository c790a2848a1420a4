package application

import (
	"context"
	"errors"
	"fmt"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// KeyedAdmissions is what registering a device with a public key stores:
// its admission (domain.DeviceAdmission), with the device or for one
// already registered. Not-found is domain.ErrNotFound.
type KeyedAdmissions interface {
	// CreateDevice registers a device together with its admission,
	// atomically: domain.ErrDeviceExists if the id is taken, and nothing is
	// stored then.
	CreateDevice(ctx context.Context, d domain.Device, a domain.DeviceAdmission, rec domain.AuditRecord) error
	// Admit stores a registered device's admission, replacing any key it
	// had (create==true when it had none); domain.ErrNotFound if the
	// device is not registered.
	Admit(ctx context.Context, deviceID domain.DeviceID, fn func(current *domain.DeviceAdmission) (domain.DeviceAdmission, error),
		rec domain.AuditRecord) (domain.DeviceAdmission, error)
	// UpdateDevice changes a registered device (fn) and, if it has an
	// admission, the admission too (admit), in one transaction with rec;
	// domain.ErrNotFound if the device is not registered.
	UpdateDevice(ctx context.Context, deviceID domain.DeviceID, fn func(*domain.Device) error, admit func(*domain.DeviceAdmission),
		rec domain.AuditRecord) (domain.Device, error)
}

// KeyedAdmin is the operators' use cases with a device registration that
// may carry a public key (Mender's device API): such a device is
// preauthorized to authenticate with its key pair. Every other call is the
// wrapped AdminService's.
type KeyedAdmin struct {
	ports.AdminService
	admissions KeyedAdmissions
	clock      ports.Clock
}

// NewKeyedAdmin wraps the operators' use cases.
func NewKeyedAdmin(inner *Admin, admissions KeyedAdmissions, clock ports.Clock) (*KeyedAdmin, error) {
	if inner == nil || admissions == nil || clock == nil {
		return nil, errors.New("application: KeyedAdmin needs the admin use cases, the admissions and a clock")
	}
	return &KeyedAdmin{AdminService: inner, admissions: admissions, clock: clock}, nil
}

// RegisterDevice registers a device; with a public key, the device and its
// admission are stored together, or neither is.
func (s *KeyedAdmin) RegisterDevice(ctx context.Context, actor domain.Actor, req ports.RegisterDevice) (ports.DeviceCredentials, error) {
	if req.PublicKey == "" {
		return s.AdminService.RegisterDevice(ctx, actor, req)
	}
	creds, err := registration(req, s.clock.Now())
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	dev := creds.Device
	key, err := domain.ParseDeviceKey("public_key", req.PublicKey)
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	adm, err := domain.NewDeviceAdmission(dev.ID(), key, dev.CreatedAt())
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	facts := deviceFacts(dev)
	facts["public_key_fingerprint"] = adm.Key().Fingerprint()
	rec, err := announced(actor.Record(dev.CreatedAt(), domain.AuditDeviceRegister, dev.ID().String(), nil, facts))(
		domain.EventDeviceRegistered, dev.CreatedAt(), DeviceEvent(dev))
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	if err := s.admissions.CreateDevice(ctx, dev, adm, rec); err != nil {
		return ports.DeviceCredentials{}, fmt.Errorf("registering device: %w", err)
	}
	return creds, nil
}

// RotateDeviceToken issues the device a new token and ends its Mender
// sessions (domain.DeviceAdmission.RevokeSessions): replacing a device's
// credentials must lock out whoever holds the old ones, whichever protocol
// they speak. Both commit together, with the rotation's record, or
// neither does; a device without a key has no sessions to end.
func (s *KeyedAdmin) RotateDeviceToken(ctx context.Context, actor domain.Actor, deviceID domain.DeviceID) (ports.DeviceCredentials, error) {
	now := s.clock.Now()
	r, err := newTokenRotation(actor, deviceID, now)
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	dev, err := s.admissions.UpdateDevice(ctx, deviceID, r.apply, func(a *domain.DeviceAdmission) { a.RevokeSessions(now) }, r.rec)
	if err != nil {
		return ports.DeviceCredentials{}, fmt.Errorf("rotating token: %w", err)
	}
	return ports.DeviceCredentials{Device: dev, Token: r.token}, nil
}
