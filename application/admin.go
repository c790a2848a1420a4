package application

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Admin implements ports.AdminService: what operators can do.
type Admin struct {
	deps Deps
}

var _ ports.AdminService = (*Admin)(nil)

// NewAdmin builds the operator use cases.
func NewAdmin(deps Deps) (*Admin, error) {
	if err := deps.validate(); err != nil {
		return nil, err
	}
	return &Admin{deps: deps}, nil
}

// Task listing bounds from the product contract.
const (
	defaultTaskLimit = 50
	maxTaskLimit     = 500
)

// RegisterDevice adds a device and returns its token, which is not stored
// and cannot be shown again.
func (s *Admin) RegisterDevice(ctx context.Context, req ports.RegisterDevice) (ports.DeviceCredentials, error) {
	token, hash, err := domain.NewDeviceToken()
	if err != nil {
		return ports.DeviceCredentials{}, fmt.Errorf("making device token: %w", err)
	}
	dev, err := domain.NewDevice(req.DeviceID, req.Model, req.CurrentVersion, hash, s.deps.Clock.Now())
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	if err := s.deps.Devices.Create(ctx, dev); err != nil {
		return ports.DeviceCredentials{}, fmt.Errorf("registering device: %w", err)
	}
	return ports.DeviceCredentials{Device: dev, Token: token}, nil
}

// RotateDeviceToken issues a new token; the old one stops working as soon
// as the change commits.
func (s *Admin) RotateDeviceToken(ctx context.Context, deviceID string) (ports.DeviceCredentials, error) {
	token, hash, err := domain.NewDeviceToken()
	if err != nil {
		return ports.DeviceCredentials{}, fmt.Errorf("making device token: %w", err)
	}
	dev, err := s.deps.Devices.Update(ctx, deviceID, func(d *domain.Device) error {
		d.RotateToken(hash)
		return nil
	})
	if err != nil {
		return ports.DeviceCredentials{}, fmt.Errorf("rotating token: %w", err)
	}
	return ports.DeviceCredentials{Device: dev, Token: token}, nil
}

// GetDevice shows a device and its active task.
func (s *Admin) GetDevice(ctx context.Context, deviceID string) (ports.DeviceView, error) {
	dev, err := s.deps.Devices.Get(ctx, deviceID)
	if err != nil {
		return ports.DeviceView{}, fmt.Errorf("loading device: %w", err)
	}
	active, err := s.deps.activeTask(ctx, deviceID)
	if err != nil || active == nil {
		return ports.DeviceView{Device: dev}, err
	}
	v, err := s.deps.view(ctx, nil, *active)
	if err != nil {
		return ports.DeviceView{}, err
	}
	return ports.DeviceView{Device: dev, ActiveTask: &v}, nil
}

// PublishFirmware validates and stores a released firmware.
func (s *Admin) PublishFirmware(ctx context.Context, spec domain.FirmwareSpec) (domain.Firmware, error) {
	fw, err := domain.NewFirmware(s.deps.IDs.NewID(), spec, s.deps.Clock.Now())
	if err != nil {
		return domain.Firmware{}, err
	}
	if err := s.deps.Firmwares.Create(ctx, fw); err != nil {
		return domain.Firmware{}, fmt.Errorf("publishing firmware: %w", err)
	}
	return fw, nil
}

// ListFirmwares lists a model's firmware, or all when model is empty.
func (s *Admin) ListFirmwares(ctx context.Context, model string) ([]domain.Firmware, error) {
	if model != "" {
		if err := domain.ValidateIdentifier("model", model); err != nil {
			return nil, err
		}
	}
	return s.deps.Firmwares.List(ctx, model)
}

// RevokeFirmware withdraws a firmware: it is never offered again, its
// rollouts stop admitting, and its pending tasks are cancelled at each
// device's next check (check rule 5).
func (s *Admin) RevokeFirmware(ctx context.Context, id string) (domain.Firmware, error) {
	now := s.deps.Clock.Now()
	fw, err := s.deps.Firmwares.Update(ctx, id, func(f *domain.Firmware) error {
		f.Revoke(now)
		return nil
	})
	if err != nil {
		return domain.Firmware{}, fmt.Errorf("revoking firmware: %w", err)
	}
	return fw, nil
}

// StartRollout starts an active rollout of a released firmware.
func (s *Admin) StartRollout(ctx context.Context, req ports.StartRollout) (domain.Rollout, error) {
	fw, err := s.deps.Firmwares.Get(ctx, req.FirmwareID)
	if err != nil {
		return domain.Rollout{}, fmt.Errorf("loading firmware: %w", err)
	}
	r, err := domain.NewRollout(s.deps.IDs.NewID(), fw, req.Spec, s.deps.Clock.Now())
	if err != nil {
		return domain.Rollout{}, err
	}
	if err := s.deps.Rollouts.Create(ctx, r); err != nil {
		return domain.Rollout{}, fmt.Errorf("starting rollout: %w", err)
	}
	return r, nil
}

// UpdateRollout widens, narrows, pauses, resumes or cancels a rollout.
// Every rule is applied at the devices' next check, so nothing sweeps the fleet.
func (s *Admin) UpdateRollout(ctx context.Context, id string, change ports.RolloutChange) (domain.Rollout, error) {
	if change.Percentage == nil && change.Status == nil {
		return domain.Rollout{}, &domain.ValidationError{Reason: "give percentage, status, or both"}
	}
	var to *domain.RolloutStatus
	if change.Status != nil {
		st, err := domain.ParseRolloutStatus(*change.Status)
		if err != nil {
			return domain.Rollout{}, err
		}
		to = &st
	}
	current, err := s.deps.Rollouts.Get(ctx, id)
	if err != nil {
		return domain.Rollout{}, fmt.Errorf("loading rollout: %w", err)
	}
	fw, err := s.deps.Firmwares.Get(ctx, current.FirmwareID())
	if err != nil {
		return domain.Rollout{}, fmt.Errorf("loading firmware: %w", err)
	}
	now := s.deps.Clock.Now()
	r, err := s.deps.Rollouts.Update(ctx, id, func(r *domain.Rollout) error {
		// Percentage first: {"percentage":0,"status":"cancelled"} is a
		// coherent request, and a cancelled rollout refuses any change.
		if change.Percentage != nil {
			if err := r.SetPercentage(*change.Percentage, now); err != nil {
				return err
			}
		}
		if to != nil {
			return r.ChangeStatus(*to, fw, now)
		}
		return nil
	})
	if err != nil {
		return domain.Rollout{}, fmt.Errorf("updating rollout: %w", err)
	}
	return r, nil
}

// GetRollout shows a rollout with its task counts, counted by the store.
func (s *Admin) GetRollout(ctx context.Context, id string) (ports.RolloutView, error) {
	r, err := s.deps.Rollouts.Get(ctx, id)
	if err != nil {
		return ports.RolloutView{}, fmt.Errorf("loading rollout: %w", err)
	}
	stats, err := s.deps.Tasks.RolloutStats(ctx, id)
	if err != nil {
		return ports.RolloutView{}, fmt.Errorf("counting rollout tasks: %w", err)
	}
	return ports.RolloutView{Rollout: r, Stats: stats}, nil
}

// ListTasks pages through tasks in (created_at, id) order with an opaque
// cursor, so pages neither skip nor repeat while tasks are being created.
func (s *Admin) ListTasks(ctx context.Context, q ports.TaskQuery) (ports.TaskPage, error) {
	f, err := parseTaskQuery(q)
	if err != nil {
		return ports.TaskPage{}, err
	}
	limit := f.Limit
	f.Limit = limit + 1 // one more tells whether there is a next page
	tasks, err := s.deps.Tasks.List(ctx, f)
	if err != nil {
		return ports.TaskPage{}, fmt.Errorf("listing tasks: %w", err)
	}
	page := ports.TaskPage{}
	if len(tasks) > limit {
		tasks = tasks[:limit]
		last := tasks[len(tasks)-1]
		page.Next = encodeCursor(ports.TaskCursor{CreatedAt: last.CreatedAt(), ID: last.ID()})
	}
	known := map[string]domain.Firmware{}
	page.Items = make([]ports.TaskView, 0, len(tasks))
	for _, t := range tasks {
		v, err := s.deps.view(ctx, known, t)
		if err != nil {
			return ports.TaskPage{}, err
		}
		page.Items = append(page.Items, v)
	}
	return page, nil
}

func parseTaskQuery(q ports.TaskQuery) (ports.TaskFilter, error) {
	f := ports.TaskFilter{DeviceID: q.DeviceID, RolloutID: q.RolloutID, Limit: defaultTaskLimit}
	if q.DeviceID != "" {
		if err := domain.ValidateIdentifier("device_id", q.DeviceID); err != nil {
			return f, err
		}
	}
	if q.RolloutID != "" {
		u, err := uuid.Parse(q.RolloutID)
		if err != nil || len(q.RolloutID) != 36 {
			return f, &domain.ValidationError{Field: "rollout_id", Reason: "must be a UUID"}
		}
		f.RolloutID = u.String()
	}
	if q.Status != "" {
		st, err := domain.ParseTaskStatus(q.Status)
		if err != nil {
			return f, err
		}
		f.Status = &st
	}
	if q.Limit != "" {
		n, err := strconv.Atoi(q.Limit)
		if err != nil || n < 1 || n > maxTaskLimit {
			return f, &domain.ValidationError{Field: "limit", Reason: fmt.Sprintf("must be an integer from 1 to %d", maxTaskLimit)}
		}
		f.Limit = n
	}
	if q.After != "" {
		c, err := decodeCursor(q.After)
		if err != nil {
			return f, err
		}
		f.After = &c
	}
	return f, nil
}

// encodeCursor makes an opaque, URL-safe position: microseconds since the
// epoch (the store's precision) and the task id.
func encodeCursor(c ports.TaskCursor) string {
	raw := strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "|" + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

var errBadCursor = &domain.ValidationError{Field: "after", Reason: "is not a cursor this service issued"}

func decodeCursor(s string) (ports.TaskCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return ports.TaskCursor{}, errBadCursor
	}
	micros, id, ok := strings.Cut(string(raw), "|")
	if !ok {
		return ports.TaskCursor{}, errBadCursor
	}
	us, err := strconv.ParseInt(micros, 10, 64)
	if err != nil {
		return ports.TaskCursor{}, errBadCursor
	}
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return ports.TaskCursor{}, errBadCursor
	}
	return ports.TaskCursor{CreatedAt: time.UnixMicro(us).UTC(), ID: u.String()}, nil
}
