package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// tagTables hold the operators' device tags beside a Store (like
// ddiTables), so every repository built over one Store shares them.
type tagTables struct {
	mu   sync.Mutex
	tags map[string][]string
}

var tagsByStore sync.Map // *Store → *tagTables

func tagsOf(s *Store) *tagTables {
	t, _ := tagsByStore.LoadOrStore(s, &tagTables{tags: map[string][]string{}})
	return t.(*tagTables)
}

// factsLocked is what a check view carries beside the tasks: the device's
// tags and stored attributes. s.mu is held; the side tables' mutexes are
// only ever taken after it.
func (s *Store) factsLocked(deviceID string) domain.DeviceFacts {
	tt := tagsOf(s)
	tt.mu.Lock()
	tags := slices.Clone(tt.tags[deviceID])
	tt.mu.Unlock()
	dt := ddiOf(s)
	dt.mu.Lock()
	a, known := dt.attrs[deviceID]
	dt.mu.Unlock()
	f := domain.DeviceFacts{Tags: tags}
	if known && a.Known() {
		f.Attributes = a.Values()
	}
	return f
}

// Directory is the in-memory application.DeviceDirectory over a Store.
type Directory struct{ s *Store }

// NewDirectory returns the device directory of s.
func NewDirectory(s *Store) *Directory { return &Directory{s: s} }

// UpdateTags changes the tags of every listed device, all or nothing.
func (r *Directory) UpdateTags(ctx context.Context, ids []domain.DeviceID, fn func(domain.DeviceID, []string) ([]string, error)) (map[domain.DeviceID][]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if _, ok := s.devices[id.String()]; !ok {
			return nil, fmt.Errorf("device %q: %w", id, domain.ErrNotFound)
		}
	}
	tt := tagsOf(s)
	tt.mu.Lock()
	defer tt.mu.Unlock()
	out := make(map[domain.DeviceID][]string, len(ids))
	for _, id := range ids {
		cur := tt.tags[id.String()]
		if prev, ok := out[id]; ok {
			cur = prev
		}
		next, err := fn(id, slices.Clone(cur))
		if err != nil {
			return nil, err
		}
		out[id] = slices.Clone(next)
	}
	for id, t := range out {
		tt.tags[id.String()] = t
	}
	return out, nil
}

// Tags returns a device's tags (empty, never nil).
func (r *Directory) Tags(ctx context.Context, device domain.DeviceID) ([]string, error) {
	deviceID := device.String()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tt := tagsOf(r.s)
	tt.mu.Lock()
	defer tt.mu.Unlock()
	out := slices.Clone(tt.tags[deviceID])
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// List returns the devices matching f in device_id order.
func (r *Directory) List(ctx context.Context, f ports.DeviceFilter) ([]ports.DeviceListing, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := r.s
	s.mu.Lock()
	ids := make([]string, 0, len(s.devices))
	for id := range s.devices {
		if id > f.After.String() {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	devs := make([]domain.Device, len(ids))
	for i, id := range ids {
		devs[i] = s.devices[id]
	}
	s.mu.Unlock()
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	out := []ports.DeviceListing{}
	tt, dt := tagsOf(s), ddiOf(s)
	for _, d := range devs {
		if len(out) == limit {
			break
		}
		if f.Model != "" && d.Model() != f.Model {
			continue
		}
		if !f.Version.IsZero() && d.CurrentVersion().Key() != f.Version.Key() {
			continue
		}
		if !f.SeenBefore.IsZero() && !d.LastSeenAt().IsZero() && !d.LastSeenAt().Before(f.SeenBefore) {
			continue
		}
		tt.mu.Lock()
		tags := slices.Clone(tt.tags[d.ID().String()])
		tt.mu.Unlock()
		dt.mu.Lock()
		a := dt.attrs[d.ID().String()]
		dt.mu.Unlock()
		facts := domain.DeviceFacts{Tags: tags, Attributes: a.Values()}
		ok := true
		for _, t := range f.Tags {
			ok = ok && facts.HasTag(t)
		}
		for k, v := range f.Attributes {
			got, has := facts.Attributes[k]
			ok = ok && has && got == v
		}
		if !ok {
			continue
		}
		if tags == nil {
			tags = []string{}
		}
		out = append(out, ports.DeviceListing{Device: d, Tags: tags,
			Attributes: domain.RehydrateDeviceAttributes(maps.Clone(a.Values()), a.UpdatedAt())})
	}
	return out, nil
}
