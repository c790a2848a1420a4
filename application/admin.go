package application

import (
	"context"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Admin implements ports.AdminService: what operators can do, by
// aggregate.
type Admin struct {
	*DeviceAdmin
	*FirmwareAdmin
	*RolloutAdmin
	*TaskAdmin
	*TargetingAdmin
}

var _ ports.AdminService = (*Admin)(nil)

// NewAdmin builds every operator use case from deps (tests and tools; the
// service is wired use case by use case, see ComposeAdmin).
func NewAdmin(deps Deps) (*Admin, error) {
	if err := deps.validate(); err != nil {
		return nil, err
	}
	d, err := NewDeviceAdmin(deps.Devices, deps.Tasks, deps.Firmwares, deps.Clock)
	if err != nil {
		return nil, err
	}
	f, err := NewFirmwareAdmin(deps.Firmwares, deps.artifacts(), deps.Clock, deps.IDs)
	if err != nil {
		return nil, err
	}
	r, err := NewRolloutAdmin(deps.Firmwares, deps.Rollouts, deps.Tasks, deps.Clock, deps.IDs)
	if err != nil {
		return nil, err
	}
	t, err := NewTaskAdmin(deps.Tasks, deps.Firmwares)
	if err != nil {
		return nil, err
	}
	g, err := NewTargetingAdmin(deps.Directory, deps.Attributes, deps.Clock)
	if err != nil {
		return nil, err
	}
	return ComposeAdmin(d, f, r, t, g), nil
}

// ComposeAdmin puts the operator use cases together behind
// ports.AdminService.
func ComposeAdmin(d *DeviceAdmin, f *FirmwareAdmin, r *RolloutAdmin, t *TaskAdmin, g *TargetingAdmin) *Admin {
	return &Admin{DeviceAdmin: d, FirmwareAdmin: f, RolloutAdmin: r, TaskAdmin: t, TargetingAdmin: g}
}

// GetDevice shows a device, its active task, its tags and its attributes.
func (a *Admin) GetDevice(ctx context.Context, deviceID domain.DeviceID) (ports.DeviceView, error) {
	v, err := a.DeviceAdmin.GetDevice(ctx, deviceID)
	if err != nil {
		return v, err
	}
	return a.TargetingAdmin.describe(ctx, v)
}
