package domain

import (
	"maps"
	"slices"
	"time"
)

// Limits of a device's attribute map. Device agents report a handful of
// facts about themselves (hardware revision, running version, serial
// number); the bounds keep one device from storing an arbitrary document.
const (
	MaxAttributes        = 64
	MaxAttributeKeyLen   = 128
	MaxAttributeValueLen = 512
)

// AttributeMode says how a device's report changes its stored attributes
// (hawkBit's configData modes).
type AttributeMode struct{ s string }

// Attribute modes: merge adds or overwrites the reported keys, replace
// makes the reported map the whole set, remove deletes the reported keys
// (their values are ignored).
var (
	AttributesMerge   = AttributeMode{"merge"}
	AttributesReplace = AttributeMode{"replace"}
	AttributesRemove  = AttributeMode{"remove"}
)

// ParseAttributeMode reads a reported mode; empty means merge, as in hawkBit.
func ParseAttributeMode(s string) (AttributeMode, error) {
	return namedOr("mode", s, AttributesMerge, AttributesMerge, AttributesReplace, AttributesRemove)
}

// String is the wire form.
func (m AttributeMode) String() string { return m.s }

// DeviceAttributes are the facts a device reports about itself, as a small
// bounded map of strings. A device that never reported any has none: the
// zero value, whose Known is false.
type DeviceAttributes struct {
	values    map[string]string
	updatedAt time.Time
}

// RehydrateDeviceAttributes rebuilds stored attributes; only adapters call it.
func RehydrateDeviceAttributes(values map[string]string, updatedAt time.Time) DeviceAttributes {
	return DeviceAttributes{values: maps.Clone(values), updatedAt: stamp(updatedAt)}
}

// Known reports whether the device ever reported its attributes.
func (a DeviceAttributes) Known() bool { return !a.updatedAt.IsZero() }

// Values returns a copy of the attributes (never nil).
func (a DeviceAttributes) Values() map[string]string {
	out := make(map[string]string, len(a.values))
	maps.Copy(out, a.values)
	return out
}

// Get returns one attribute.
func (a DeviceAttributes) Get(key string) (string, bool) {
	v, ok := a.values[key]
	return v, ok
}

// Keys returns the attribute names in sorted order.
func (a DeviceAttributes) Keys() []string { return slices.Sorted(maps.Keys(a.values)) }

// UpdatedAt is when the device last reported (zero if never).
func (a DeviceAttributes) UpdatedAt() time.Time { return a.updatedAt }

// MergedLen is how many attributes a merge of data would leave: the names
// already stored count once.
func (a DeviceAttributes) MergedLen(data map[string]string) int {
	n := len(a.values)
	for k := range data {
		if _, stored := a.values[k]; !stored {
			n++
		}
	}
	return n
}

// Apply records a device's report. Every key must be 1–128 characters and
// every value at most 512, both valid UTF-8 without NUL, and at most 64
// attributes may remain; anything else is a ValidationError and changes
// nothing. An empty report still counts as reporting (Known becomes true).
func (a *DeviceAttributes) Apply(mode AttributeMode, data map[string]string, now time.Time) error {
	if mode == (AttributeMode{}) {
		return invalid("mode", "is required")
	}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if k == "" {
			return invalid("data", "attribute names must not be empty")
		}
		if err := ValidateText("data", k, MaxAttributeKeyLen); err != nil {
			return invalid("data", "attribute name %.32q is invalid: at most %d characters of valid UTF-8 without NUL", k, MaxAttributeKeyLen)
		}
		if mode == AttributesRemove {
			continue
		}
		if err := ValidateText("data", data[k], MaxAttributeValueLen); err != nil {
			return invalid("data", "attribute %.32q: the value must be at most %d characters of valid UTF-8 without NUL", k, MaxAttributeValueLen)
		}
	}
	next := map[string]string{}
	switch mode {
	case AttributesMerge:
		maps.Copy(next, a.values)
		maps.Copy(next, data)
	case AttributesReplace:
		maps.Copy(next, data)
	case AttributesRemove:
		maps.Copy(next, a.values)
		for k := range data {
			delete(next, k)
		}
	}
	if len(next) > MaxAttributes {
		return invalid("data", "a device may have at most %d attributes (this report would leave %d)", MaxAttributes, len(next))
	}
	a.values = next
	a.updatedAt = stamp(now)
	return nil
}
