package domain

import "time"

// Device is a registered unit of a fleet. It is identified by the operator's
// device id and authenticated by a token of which only the hash is kept.
type Device struct {
	id             DeviceID
	model          string
	currentVersion Version
	tokenHash      TokenHash
	lastSeenAt     time.Time
	createdAt      time.Time
}

// ReservedDeviceID is the one id no device is registered under: the
// admin API's GET /devices/pending lists Mender's pending devices, and a
// device of that id could never be read there.
const ReservedDeviceID = "pending"

// NewDevice registers a device. currentVersion may be empty: a device's
// version is learned from its first check. The id was parsed by the caller
// (ParseDeviceID); the zero id and ReservedDeviceID are refused here.
func NewDevice(id DeviceID, model, currentVersion string, tokenHash TokenHash, now time.Time) (Device, error) {
	if id.IsZero() {
		return Device{}, invalid("device_id", "is required")
	}
	if id.String() == ReservedDeviceID {
		return Device{}, invalid("device_id", "%q is reserved: GET /api/v1/admin/devices/%s is Mender's queue of pending devices", ReservedDeviceID, ReservedDeviceID)
	}
	if err := ValidateIdentifier("model", model); err != nil {
		return Device{}, err
	}
	var v Version
	if currentVersion != "" {
		var err error
		if v, err = ParseVersion("current_version", currentVersion); err != nil {
			return Device{}, err
		}
	}
	return Device{id: id, model: model, currentVersion: v, tokenHash: tokenHash, createdAt: stamp(now)}, nil
}

// RehydrateDevice rebuilds a stored device without re-running registration
// rules; only adapters call it. The id is taken as stored: a store holds
// only ids that were parsed before they were written.
func RehydrateDevice(id, model string, currentVersion Version, tokenHash TokenHash, lastSeenAt, createdAt time.Time) Device {
	return Device{id: DeviceID{s: id}, model: model, currentVersion: currentVersion, tokenHash: tokenHash, lastSeenAt: stamp(lastSeenAt), createdAt: stamp(createdAt)}
}

// ID is the operator-assigned device id.
func (d Device) ID() DeviceID { return d.id }

// Model is the hardware model; firmware is published per model.
func (d Device) Model() string { return d.model }

// CurrentVersion is the version last reported (zero if never reported).
func (d Device) CurrentVersion() Version { return d.currentVersion }

// TokenHash is the hash of the device's current token.
func (d Device) TokenHash() TokenHash { return d.tokenHash }

// LastSeenAt is when the device last checked (zero if never).
func (d Device) LastSeenAt() time.Time { return d.lastSeenAt }

// CreatedAt is when the device was registered.
func (d Device) CreatedAt() time.Time { return d.createdAt }

// CheckModel enforces check rule 1: a device must report its registered model.
func (d Device) CheckModel(model string) error {
	if model != d.model {
		return ErrModelMismatch
	}
	return nil
}

// RotateToken replaces the token hash; the old token stops working as soon
// as the change is stored.
func (d *Device) RotateToken(h TokenHash) { d.tokenHash = h }

// Seen records a check: the version the device runs and when it asked.
func (d *Device) Seen(v Version, at time.Time) {
	d.currentVersion = v
	d.lastSeenAt = stamp(at)
}

// SeenNeedsWrite reports whether a check reporting v at time at must be
// stored for a device whose stored record is d (check rule 1). The version
// is stored whenever it differs from the stored one (compared as reported,
// build metadata included); last_seen_at only when it has never been
// stored or is at least resolution older than at. A fleet polling every
// few minutes thus writes a device row at most once per resolution instead
// of once per poll, and an operator reads last_seen_at at most resolution
// behind the device's newest check. A resolution of zero or less stores
// every check.
func (d Device) SeenNeedsWrite(v Version, at time.Time, resolution time.Duration) bool {
	switch {
	case resolution <= 0, d.lastSeenAt.IsZero(), d.SeenChangesVersion(v):
		return true
	}
	return at.Sub(d.lastSeenAt) >= resolution
}

// SeenChangesVersion reports whether a check reporting v, decided on the
// device as read in d, says anything new about the device's version: v
// differs from the version read (compared as reported, build metadata
// included). A check that repeats the version it read — a DDI poll, which
// carries no version and checks with the stored one, or a device polling
// again — moves last_seen_at only: its read may be stale (a success or a
// report stored since), and writing the old version back over that newer
// word would make the device look as if it had gone backwards, and be
// offered what it already runs. A check whose version differs from the one
// read is the device's own new report and is stored (check rule 1).
func (d Device) SeenChangesVersion(v Version) bool { return v.String() != d.currentVersion.String() }
