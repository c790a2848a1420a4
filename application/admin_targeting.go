package application

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Device listing page sizes.
const (
	defaultDevicePage = 50
	maxDevicePage     = 500
	maxBulkDevices    = 1000
)

// DeviceDirectory keeps the operator's tags on devices and lists devices
// by model, tags and attributes. Tags are read by the check with the rest
// of the device (ports.DeviceTasks.Facts), never separately.
type DeviceDirectory interface {
	// UpdateTags locks every listed device, lets fn compute each one's new
	// tags from its current ones, and stores them all in one transaction:
	// all or nothing. An unknown id is domain.ErrNotFound and nothing is
	// written. It returns the stored tags by device id. rec, the
	// operator's record of the change, is stored with it.
	UpdateTags(ctx context.Context, deviceIDs []domain.DeviceID, fn func(deviceID domain.DeviceID, tags []string) ([]string, error),
		rec domain.AuditRecord) (map[domain.DeviceID][]string, error)
	// Tags returns a device's tags (empty, never nil, when it has none or
	// does not exist).
	Tags(ctx context.Context, deviceID domain.DeviceID) ([]string, error)
	// List returns the devices matching f in device_id order, at most
	// f.Limit, after f.After. Never nil.
	List(ctx context.Context, f ports.DeviceFilter) ([]ports.DeviceListing, error)
}

// TargetingAdmin tags devices and lists them by tags and attributes
// (docs/DOMAIN.md, rules T1–T2): what rollout selectors are written against.
type TargetingAdmin struct {
	directory DeviceDirectory
	attrs     ports.DeviceAttributes
	clock     ports.Clock
}

// NewTargetingAdmin builds the operators' tag and listing use cases.
func NewTargetingAdmin(directory DeviceDirectory, attrs ports.DeviceAttributes, clock ports.Clock) (*TargetingAdmin, error) {
	if err := required(directory, attrs, clock); err != nil {
		return nil, err
	}
	return &TargetingAdmin{directory: directory, attrs: attrs, clock: clock}, nil
}

// SetDeviceTags replaces a device's tags. The zero id (one the edge could
// not parse from its path) names no device and is not looked up.
func (s *TargetingAdmin) SetDeviceTags(ctx context.Context, actor domain.Actor, deviceID domain.DeviceID, tags []string) ([]string, error) {
	if deviceID.IsZero() {
		return nil, fmt.Errorf("device: %w", domain.ErrNotFound)
	}
	out, err := s.changeTags(ctx, actor, domain.AuditDeviceTagsSet, deviceID.String(), []domain.DeviceID{deviceID}, ports.TagChange{Set: tagsOrEmpty(tags)})
	if err != nil {
		return nil, err
	}
	return out[deviceID], nil
}

func tagsOrEmpty(t []string) []string {
	if t == nil {
		return []string{}
	}
	return t
}

// ChangeDeviceTags sets, adds or removes tags on up to 1000 devices at
// once, all or nothing. The ids come in the request body: they are parsed
// here, and a bad one is VALIDATION_FAILED on device_ids.
func (s *TargetingAdmin) ChangeDeviceTags(ctx context.Context, actor domain.Actor, c ports.TagChange) (map[string][]string, error) {
	if len(c.DeviceIDs) == 0 || len(c.DeviceIDs) > maxBulkDevices {
		return nil, &domain.ValidationError{Field: "device_ids", Reason: fmt.Sprintf("give 1 to %d device ids", maxBulkDevices)}
	}
	ids := make([]domain.DeviceID, 0, len(c.DeviceIDs))
	for _, raw := range c.DeviceIDs {
		id, err := domain.ParseDeviceID(raw)
		if err != nil {
			var ve *domain.ValidationError
			if errors.As(err, &ve) {
				return nil, &domain.ValidationError{Field: "device_ids", Reason: ve.Reason}
			}
			return nil, err
		}
		ids = append(ids, id)
	}
	// One change, one record: its target is the list as a whole, which the
	// record names device by device.
	out, err := s.changeTags(ctx, actor, domain.AuditDevicesTagsChange, "devices", ids, c)
	if err != nil {
		return nil, err
	}
	byString := make(map[string][]string, len(out))
	for id, tags := range out {
		byString[id.String()] = tags
	}
	return byString, nil
}

// changeTags applies c's tag edits (c.DeviceIDs is ignored) to ids, all or
// nothing, recorded as action on target.
func (s *TargetingAdmin) changeTags(ctx context.Context, actor domain.Actor, action domain.AuditAction, target string,
	ids []domain.DeviceID, c ports.TagChange) (map[domain.DeviceID][]string, error) {
	if c.Set == nil && len(c.Add) == 0 && len(c.Remove) == 0 {
		return nil, &domain.ValidationError{Field: "tags", Reason: "give tags, add or remove"}
	}
	set, err := validTagsOrNil("tags", c.Set)
	if err != nil {
		return nil, err
	}
	add, err := domain.ValidateTags("add", c.Add)
	if err != nil {
		return nil, err
	}
	remove, err := domain.ValidateTags("remove", c.Remove)
	if err != nil {
		return nil, err
	}
	change := map[string]any{}
	if set != nil {
		change["tags"] = set
	}
	if len(add) > 0 {
		change["add"] = add
	}
	if len(remove) > 0 {
		change["remove"] = remove
	}
	if len(ids) > 1 {
		names := make([]string, len(ids))
		for i, id := range ids {
			names[i] = id.String()
		}
		change["device_ids"] = names
	}
	rec, err := actor.Record(s.clock.Now(), action, target, nil, change)
	if err != nil {
		return nil, err
	}
	out, err := s.directory.UpdateTags(ctx, ids, func(_ domain.DeviceID, cur []string) ([]string, error) {
		next := cur
		if set != nil {
			next = set
		}
		next = append(append([]string{}, next...), add...)
		kept := next[:0:0]
		for _, t := range next {
			if !contains(remove, t) {
				kept = append(kept, t)
			}
		}
		return domain.ValidateTags("tags", kept)
	}, rec)
	if err != nil {
		return nil, fmt.Errorf("tagging devices: %w", err)
	}
	return out, nil
}

func validTagsOrNil(field string, t []string) ([]string, error) {
	if t == nil {
		return nil, nil
	}
	return domain.ValidateTags(field, t)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ListDevices pages through devices in device_id order, filtered by model,
// tags (all of), attributes (key=value, all of), version and last seen.
func (s *TargetingAdmin) ListDevices(ctx context.Context, q ports.DeviceQuery) (ports.DevicePage, error) {
	f := ports.DeviceFilter{Model: q.Model, Limit: defaultDevicePage}
	if q.Model != "" {
		if err := domain.ValidateIdentifier("model", q.Model); err != nil {
			return ports.DevicePage{}, err
		}
	}
	if q.After != "" {
		// The cursor is an untyped source: its device id is parsed here, once.
		after, err := domain.ParseDeviceID(q.After)
		if err != nil {
			return ports.DevicePage{}, &domain.ValidationError{Field: "after", Reason: "is not a valid cursor"}
		}
		f.After = after
	}
	tags, err := domain.ValidateTags("tag", q.Tags)
	if err != nil {
		return ports.DevicePage{}, err
	}
	f.Tags = tags
	if len(q.Attributes) > domain.MaxSelectorAttrs {
		return ports.DevicePage{}, &domain.ValidationError{Field: "attribute", Reason: fmt.Sprintf("at most %d attribute filters", domain.MaxSelectorAttrs)}
	}
	for _, kv := range q.Attributes {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || domain.ValidateText("attribute", k, domain.MaxAttributeKeyLen) != nil || domain.ValidateText("attribute", v, domain.MaxAttributeValueLen) != nil {
			return ports.DevicePage{}, &domain.ValidationError{Field: "attribute", Reason: "must be key=value"}
		}
		if f.Attributes == nil {
			f.Attributes = map[string]string{}
		}
		f.Attributes[k] = v
	}
	if q.Version != "" {
		v, err := domain.ParseVersion("version", q.Version)
		if err != nil {
			return ports.DevicePage{}, err
		}
		f.Version = v
	}
	if q.SeenBefore != "" {
		at, err := domain.ParseInstant("seen_before", q.SeenBefore)
		if err != nil {
			return ports.DevicePage{}, err
		}
		f.SeenBefore = at
	}
	if q.Limit != "" {
		n, err := strconv.Atoi(q.Limit)
		if err != nil || n < 1 || n > maxDevicePage {
			return ports.DevicePage{}, &domain.ValidationError{Field: "limit", Reason: fmt.Sprintf("must be between 1 and %d", maxDevicePage)}
		}
		f.Limit = n
	}
	items, next, err := listPage(&f.Limit, func() ([]ports.DeviceListing, error) { return s.directory.List(ctx, f) },
		func(last ports.DeviceListing) string { return last.Device.ID().String() })
	if err != nil {
		return ports.DevicePage{}, fmt.Errorf("listing devices: %w", err)
	}
	return ports.DevicePage{Items: items, Next: next}, nil
}

// describe adds a device's tags and attributes to its view.
func (s *TargetingAdmin) describe(ctx context.Context, v ports.DeviceView) (ports.DeviceView, error) {
	attrs, err := s.attrs.Get(ctx, v.Device.ID())
	if err != nil {
		return v, fmt.Errorf("loading device attributes: %w", err)
	}
	v.Attributes = attrs
	if v.Tags, err = s.directory.Tags(ctx, v.Device.ID()); err != nil {
		return v, fmt.Errorf("loading device tags: %w", err)
	}
	if v.Tags == nil {
		v.Tags = []string{}
	}
	return v, nil
}
