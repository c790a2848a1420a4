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
	switch s {
	case AuthRequestPending.s:
		return AuthRequestPending, nil
	case AuthRequestRejected.s:
		return AuthRequestRejected, nil
	}
	return AuthRequestStatus{}, invalid("status", "must be pending or rejected")
}

// String is the wire and storage form.
func (s AuthRequestStatus) String() string { return s.s }

// AuthRequest is a device that asked to authenticate with a key nobody
// registered: it waits, one request per device, for an operator to accept
// or reject it (when the operator turned accepting pending devices on).
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
		status: status, createdAt: createdAt, updatedAt: updatedAt}, nil
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

// UpdatedAt is when it last asked with a new key, or was rejected.
func (r AuthRequest) UpdatedAt() time.Time { return r.updatedAt }

// Asked records another request of the device. The same key changes
// nothing (a rejected request stays rejected); a new key is a new request,
// pending again. It reports whether anything changed.
func (r *AuthRequest) Asked(identity string, key DeviceKey, deviceType string, now time.Time) bool {
	if r.key.Equal(key) {
		return false
	}
	if ValidateIdentifier("device_type", deviceType) != nil {
		deviceType = ""
	}
	if ValidateText("id_data", identity, MaxIdentityDataLen) == nil {
		r.identity = identity
	}
	r.key, r.deviceType, r.status, r.updatedAt = key, deviceType, AuthRequestPending, stamp(now)
	return true
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
