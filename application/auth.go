package application

import (
	"context"
	"errors"
	"fmt"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// maxTokenLen bounds a presented token; real ones are far shorter.
const maxTokenLen = 256

// AuthStore is what authentication reads: a device with its task state,
// in one round trip.
type AuthStore interface {
	// CheckView reads the device whose token has hash h with its task
	// state, in one round trip (domain.ErrNotFound: no such device). It
	// takes no lock: a poll that changes nothing needs none.
	CheckView(ctx context.Context, h domain.TokenHash) (ports.CheckView, error)
	// CheckViewOf is CheckView for a device known by id (an edge that
	// authenticated the device without reading it).
	CheckViewOf(ctx context.Context, deviceID domain.DeviceID) (ports.CheckView, error)
}

// Auth tells which device a request comes from. It reads the device with
// its task state (ports.CheckView), so that the check that follows in the
// same request reads nothing more.
type Auth struct {
	tasks AuthStore
	clock ports.Clock
}

// NewAuth builds the device authentication use case; clock stamps each
// read (ports.AuthenticatedDevice.ReadAt).
func NewAuth(tasks AuthStore, clock ports.Clock) (*Auth, error) {
	if err := required(tasks, clock); err != nil {
		return nil, err
	}
	return &Auth{tasks: tasks, clock: clock}, nil
}

// AuthenticateDevice maps a bearer token to its device by the token's hash,
// reading the device's task state in the same round trip so that the check
// that follows reads nothing more. Unknown tokens and token-less calls are
// indistinguishable to the caller.
func (s *Auth) AuthenticateDevice(ctx context.Context, token string) (ports.AuthenticatedDevice, error) {
	if token == "" || len(token) > maxTokenLen {
		return ports.AuthenticatedDevice{}, domain.ErrUnauthorized
	}
	h := domain.HashToken(token)
	at := s.clock.Now()
	v, err := s.tasks.CheckView(ctx, h)
	if errors.Is(err, domain.ErrNotFound) {
		return ports.AuthenticatedDevice{}, domain.ErrUnauthorized
	}
	if err != nil {
		return ports.AuthenticatedDevice{}, fmt.Errorf("authenticating device: %w", err)
	}
	if !v.Device.TokenHash().Matches(h) {
		return ports.AuthenticatedDevice{}, domain.ErrUnauthorized
	}
	return ports.AuthenticatedDevice{Device: v.Device, Tasks: &v.Tasks, ReadAt: v.SawStoreAt(at)}, nil
}

// IdentifyDevice loads a device that an edge authenticated by its own means,
// with its task state in the same round trip. The edge parsed the id; the
// zero id (one it could not parse) names no device and is not looked up.
func (s *Auth) IdentifyDevice(ctx context.Context, deviceID domain.DeviceID) (ports.AuthenticatedDevice, error) {
	if deviceID.IsZero() {
		return ports.AuthenticatedDevice{}, fmt.Errorf("device: %w", domain.ErrNotFound)
	}
	at := s.clock.Now()
	v, err := s.tasks.CheckViewOf(ctx, deviceID)
	if err != nil {
		return ports.AuthenticatedDevice{}, fmt.Errorf("loading device: %w", err)
	}
	return ports.AuthenticatedDevice{Device: v.Device, Tasks: &v.Tasks, ReadAt: v.SawStoreAt(at)}, nil
}
