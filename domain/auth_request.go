package domain

import "time"

// MaxIdentityDataLen bounds the identity data a device sends (Mender's
// id_data: a small JSON object such as {"mac": "..."}).
const MaxIdentityDataLen = 4096

// AuthRequestStatus is where an unadmitted device's request stands.
type AuthRequestStatus struct{ s string }

// Auth request statuses: pending until an operator accepts (the request is
// then gone: the device is admitted) or rejects it.
var (
	AuthRequestPending  = AuthRequestStatus{"pending"}
	AuthRequestRejected = AuthRequestStatus{"rejected"}
)

// ParseAuthRequestStatus reads a stored status.
func ParseAuthRequestStatus(s string) (AuthRequestStatus, error) {
	return named("status", s, AuthRequestPending, AuthRequestRejected)
}

// String is the wire and storage form.
func (s AuthRequestStatus) String() string { return s.s }

// AuthRequest is a device that asked to authenticate with a key nobody
// registered: it waits, one request per device and key, for an operator to
// accept or reject it (when the operator turned accepting pending devices
// on), or until it expires (ExpiredBy).
type AuthRequest struct {
	id         UUID
	deviceID   DeviceID
	identity   string
	key        DeviceKey
	deviceType string
	status     AuthRequestStatus
	createdAt  time.Time
	updatedAt  time.Time
}

// NewAuthRequest records a device's first unadmitted request. deviceType
// may be empty (the identity data rarely names it); it must otherwise be a
// valid model name, or it is dropped.
func NewAuthRequest(id UUID, deviceID DeviceID, identity string, key DeviceKey, deviceType string, now time.Time) (AuthRequest, error) {
	if id.IsZero() {
		return AuthRequest{}, invalid("id", "is required")
	}
	if deviceID.IsZero() {
		return AuthRequest{}, invalid("device_id", "is required")
	}
	if err := ValidateText("id_data", identity, MaxIdentityDataLen); err != nil {
		return AuthRequest{}, err
	}
	if key.IsZero() {
		return AuthRequest{}, invalid("pubkey", "is required")
	}
	if ValidateIdentifier("device_type", deviceType) != nil {
		deviceType = ""
	}
	now = stamp(now)
	return AuthRequest{id: id, deviceID: deviceID, identity: identity, key: key, deviceType: deviceType,
		status: AuthRequestPending, createdAt: now, updatedAt: now}, nil
}

// RehydrateAuthRequest rebuilds a stored request; only adapters call it.
func RehydrateAuthRequest(id, deviceID, identity, keyPEM, deviceType string, status AuthRequestStatus, createdAt, updatedAt time.Time) (AuthRequest, error) {
	k, err := parseDeviceKey("pubkey", keyPEM, 0)
	if err != nil {
		return AuthRequest{}, err
	}
	return AuthRequest{id: UUID{s: id}, deviceID: DeviceID{s: deviceID}, identity: identity, key: k, deviceType: deviceType,
		status: status, createdAt: stamp(createdAt), updatedAt: stamp(updatedAt)}, nil
}

// ID is the request's UUID, which operators accept or reject.
func (r AuthRequest) ID() UUID { return r.id }

// DeviceID is the device id taken from the identity data.
func (r AuthRequest) DeviceID() DeviceID { return r.deviceID }

// Identity is the identity data as the device sent it.
func (r AuthRequest) Identity() string { return r.identity }

// Key is the public key the device presented.
func (r AuthRequest) Key() DeviceKey { return r.key }

// DeviceType is the model the identity data names ("" if none).
func (r AuthRequest) DeviceType() string { return r.deviceType }

// Status is pending or rejected.
func (r AuthRequest) Status() AuthRequestStatus { return r.status }

// CreatedAt is when the device first asked.
func (r AuthRequest) CreatedAt() time.Time { return r.createdAt }

// UpdatedAt is when it was made, or rejected: its age for expiry.
func (r AuthRequest) UpdatedAt() time.Time { return r.updatedAt }

// A request names one key for good: a device that presents another key
// makes another request (it has no method to change the key), so an
// operator accepting a request admits exactly the key whose fingerprint
// was shown, and a rejected key stays rejected whatever else the device
// presents.

// DefaultAuthRequestTTL is how long a request is kept after its last
// change (made, or rejected) when the operator sets no other age
// (OTA_MENDER_AUTH_REQUEST_TTL): long enough for an operator to get to it,
// short enough that requests nobody answers do not fill the queue for good.
const DefaultAuthRequestTTL = 7 * 24 * time.Hour

// AuthRequestCutoff is the last-change time before which a request has
// expired at now under ttl; stores delete requests changed before it.
func AuthRequestCutoff(now time.Time, ttl time.Duration) time.Time { return stamp(now.Add(-ttl)) }

// ExpiredBy reports whether the request was last changed before cutoff
// (AuthRequestCutoff): expired, pending or rejected alike. A device whose
// request expired and that asks again makes a new one.
func (r AuthRequest) ExpiredBy(cutoff time.Time) bool { return r.updatedAt.Before(cutoff) }

// PendingRoom reports whether another pending request may be stored when
// pending are stored already and max is the bound: only pending requests
// count (rejected ones are bounded by what operators reject, and expire).
func PendingRoom(pending, max int) bool { return pending < max }

// KeyConflict is what accepting a request would override: the device it
// names is registered already.
type KeyConflict struct {
	// RegisteredModel is the registered device's model.
	RegisteredModel string
	// AdmittedKey is the key the device is admitted with (zero: registered
	// without one).
	AdmittedKey DeviceKey
	// DeviceTypeMismatch: the request's device_type names another model.
	DeviceTypeMismatch bool
}

// ConflictWith judges the request against the device it names:
// registeredModel is the registered device's model ("" when the device is
// not registered: no conflict), admitted its admission (nil: none). Anyone
// can make a request for any device id, so one for a registered device is
// flagged for the operator and replaces nothing without an explicit
// replace_key (CheckAccept).
func (r AuthRequest) ConflictWith(registeredModel string, admitted *DeviceAdmission) *KeyConflict {
	if registeredModel == "" {
		return nil
	}
	c := &KeyConflict{RegisteredModel: registeredModel,
		DeviceTypeMismatch: r.deviceType != "" && r.deviceType != registeredModel}
	if admitted != nil {
		c.AdmittedKey = admitted.Key()
	}
	return c
}

// CheckAccept refuses to accept a request that conflicts with a registered
// device (ConflictWith) unless the operator said replaceKey: a device's key
// is replaced on purpose, never by accepting what looked like a new device.
func (c *KeyConflict) CheckAccept(deviceID DeviceID, replaceKey bool) error {
	if c == nil || replaceKey {
		return nil
	}
	detail := "device " + deviceID.String() + " is registered already (model " + c.RegisteredModel
	if !c.AdmittedKey.IsZero() {
		detail += ", admitted key " + c.AdmittedKey.Fingerprint()
	}
	return &TransitionError{Kind: ErrInvalidTransition,
		Detail: detail + "): accept with replace_key true to give it this request's key"}
}

// Reject refuses the request: the device's requests with this key stay
// unanswered. Rejecting twice is harmless.
func (r *AuthRequest) Reject(now time.Time) {
	if r.status == AuthRequestRejected {
		return
	}
	r.status, r.updatedAt = AuthRequestRejected, stamp(now)
}

// AcceptModel is the model a device accepted from this request is
// registered with: the operator's choice, else the device type its identity
// data names; neither is a ValidationError.
func (r AuthRequest) AcceptModel(operatorModel string) (string, error) {
	model := operatorModel
	if model == "" {
		model = r.deviceType
	}
	if model == "" {
		return "", invalid("model", "is required: the device's identity data names no device_type")
	}
	if err := ValidateIdentifier("model", model); err != nil {
		return "", err
	}
	return model, nil
}
