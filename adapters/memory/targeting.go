package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// facts is what a check view carries beside the tasks: the device's tags
// and its stored attributes.
func (s *Store) facts(deviceID string) domain.DeviceFacts {
	f := domain.DeviceFacts{Tags: slices.Clone(s.tags[deviceID])}
	if a, ok := s.attrs[deviceID]; ok && a.Known() {
		f.Attributes = a.Values()
	}
	return f
}

// Directory is the in-memory ports.DeviceDirectory over a Store.
type Directory struct{ s *Store }

var _ ports.DeviceDirectory = (*Directory)(nil)

func NewDirectory(s *Store) *Directory { return &Directory{s: s} }

// UpdateTags changes the tags of every listed device, all or nothing.
func (r *Directory) UpdateTags(ctx context.Context, ids []domain.DeviceID, fn func(domain.DeviceID, []string) ([]string, error)) (map[domain.DeviceID][]string, error) {
	return locked(ctx, r.s, func() (map[domain.DeviceID][]string, error) {
		for _, id := range ids {
			if !has(r.s.devices, id.String()) {
				return nil, fmt.Errorf("device %q: %w", id, domain.ErrNotFound)
			}
		}
		out := make(map[domain.DeviceID][]string, len(ids))
		for _, id := range ids {
			cur, listed := out[id]
			if !listed {
				cur = r.s.tags[id.String()]
			}
			next, err := fn(id, slices.Clone(cur))
			if err != nil {
				return nil, err
			}
			out[id] = slices.Clone(next)
		}
		for id, t := range out {
			r.s.tags[id.String()] = t
		}
		return out, nil
	})
}

// Tags returns a device's tags (empty, never nil).
func (r *Directory) Tags(ctx context.Context, device domain.DeviceID) ([]string, error) {
	return locked(ctx, r.s, func() ([]string, error) { return append([]string{}, r.s.tags[device.String()]...), nil })
}

// List returns the devices matching f in device_id order.
func (r *Directory) List(ctx context.Context, f ports.DeviceFilter) ([]ports.DeviceListing, error) {
	return locked(ctx, r.s, func() ([]ports.DeviceListing, error) {
		out := []ports.DeviceListing{}
		for _, d := range r.s.devices {
			facts := domain.DeviceFacts{Tags: r.s.tags[d.ID().String()], Attributes: r.s.attrs[d.ID().String()].Values()}
			ok := d.ID().String() > f.After.String() && (f.Model == "" || d.Model() == f.Model) &&
				(f.Version.IsZero() || d.CurrentVersion().Key() == f.Version.Key()) &&
				(f.SeenBefore.IsZero() || d.LastSeenAt().IsZero() || d.LastSeenAt().Before(f.SeenBefore))
			for _, t := range f.Tags {
				ok = ok && facts.HasTag(t)
			}
			for k, v := range f.Attributes {
				got, has := facts.Attributes[k]
				ok = ok && has && got == v
			}
			if ok {
				out = append(out, ports.DeviceListing{Device: d, Tags: append([]string{}, facts.Tags...), Attributes: r.s.attributes(d.ID().String())})
			}
		}
		return page(out, f.Limit, DefaultListLimit, func(a, b ports.DeviceListing) bool { return a.Device.ID().String() < b.Device.ID().String() }), nil
	})
}
