package ports

import (
	"context"
	"slices"
	"time"

	"github.com/ai-device/ota/domain"
)

// DeviceFilter selects devices for the admin listing (GET /admin/devices): every
// given condition must hold. Empty fields match all.
type DeviceFilter struct {
	Model string
	// Tags: the device carries every one of them.
	Tags []string
	// Attributes: the device reported each with exactly this value.
	Attributes map[string]string
	// Version: the device reports this version, build metadata aside
	// (Version.Key, as the fleet groups versions). Zero: any.
	Version domain.Version
	// SeenBefore: the device was last seen before this instant, or never
	// (the stale part of a fleet). Zero: any.
	SeenBefore time.Time
	// After continues a listing after this device id (keyset order);
	// the zero DeviceID starts at the beginning.
	After domain.DeviceID
	Limit int
}

// DeviceListing is a device as the admin listing shows it.
type DeviceListing struct {
	Device     domain.Device
	Tags       []string
	Attributes domain.DeviceAttributes
}

// DeviceQuery is the admin device listing's filter, as received: tag may
// repeat; attribute is "key=value" and may repeat.
type DeviceQuery struct {
	Model      string
	Tags       []string
	Attributes []string
	// Version is a SemVer version; SeenBefore an RFC 3339 instant.
	Version    string
	SeenBefore string
	Limit      string
	After      string
}

// DevicePage is one page of devices and the cursor of the next ("" on
// the last).
type DevicePage struct {
	Items []DeviceListing
	Next  string
}

// TagChange is an operator's bulk change of tags on a list of devices:
// Set replaces the tags (when not nil); Add and Remove edit them.
type TagChange struct {
	DeviceIDs []string
	Set       []string
	Add       []string
	Remove    []string
}

// DeviceTargeting is what operators do with tags and the device listing.
type DeviceTargeting interface {
	// SetDeviceTags replaces one device's tags.
	SetDeviceTags(ctx context.Context, actor domain.Actor, deviceID domain.DeviceID, tags []string) ([]string, error)
	// ChangeDeviceTags edits the tags of many devices at once, all or nothing.
	ChangeDeviceTags(ctx context.Context, actor domain.Actor, change TagChange) (map[string][]string, error)
	// ListDevices pages through devices by model, tags and attributes.
	ListDevices(ctx context.Context, q DeviceQuery) (DevicePage, error)
}

// Admits reports whether the filter selects l, paging aside: the meaning
// of each field, for a store that filters in Go rather than in SQL.
func (f DeviceFilter) Admits(l DeviceListing) bool {
	d, seen := l.Device, l.Device.LastSeenAt()
	ok := (f.Model == "" || d.Model() == f.Model) && (f.Version.IsZero() || d.CurrentVersion().Key() == f.Version.Key()) &&
		(f.SeenBefore.IsZero() || seen.IsZero() || seen.Before(f.SeenBefore))
	for _, t := range f.Tags {
		ok = ok && slices.Contains(l.Tags, t)
	}
	for k, v := range f.Attributes {
		got, has := l.Attributes.Get(k)
		ok = ok && has && got == v
	}
	return ok
}
