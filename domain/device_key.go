package domain

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"time"
)

// Bounds of a device public key.
const (
	// MaxPublicKeyLen bounds a PEM public key (an RSA-4096 key is ~800
	// bytes; 8 KiB leaves room for comments and PKCS#1 forms).
	MaxPublicKeyLen = 8 << 10
	// MinRSAKeyBits refuses RSA keys too weak to identify a device.
	MinRSAKeyBits = 2048
	// MaxRSAKeyBits refuses RSA keys larger than any Mender agent makes:
	// verifying a signature costs the square of the modulus size, and an
	// unauthenticated caller chooses it (a 16384-bit key costs ~16 times a
	// 4096-bit one per request).
	MaxRSAKeyBits = 4096
)

// DeviceKey is the public half of the key pair a device signs its
// authentication requests with (Mender's agents: RSA, ECDSA or Ed25519).
// It is kept in canonical form (PKIX DER), so two PEM encodings of the same
// key are the same DeviceKey.
type DeviceKey struct {
	der []byte
	pub crypto.PublicKey
}

// ParseDeviceKey reads a PEM public key ("PUBLIC KEY", PKIX; or "RSA
// PUBLIC KEY", PKCS#1): one block, nothing else but white space around it,
// an RSA key of 2048 to 4096 bits, an ECDSA key, or an Ed25519 key.
// Anything else is a ValidationError on field. Every key a caller presents
// (preauthorization, a key rotation, an auth request) is read here.
func ParseDeviceKey(field, text string) (DeviceKey, error) {
	return parseDeviceKey(field, text, MaxRSAKeyBits)
}

// parseDeviceKey is ParseDeviceKey with an RSA size bound: stored keys are
// read without one (maxRSABits 0), so a key admitted before the bound
// existed still loads.
func parseDeviceKey(field, text string, maxRSABits int) (DeviceKey, error) {
	if err := ValidateText(field, text, MaxPublicKeyLen); err != nil {
		return DeviceKey{}, err
	}
	block, rest := pem.Decode([]byte(text))
	if block == nil || len(bytes.TrimSpace(rest)) != 0 {
		return DeviceKey{}, invalid(field, "must be one PEM-encoded public key")
	}
	var (
		pub any
		err error
	)
	switch block.Type {
	case "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
	default:
		return DeviceKey{}, invalid(field, "must be a PEM \"PUBLIC KEY\" block, not %.32q", block.Type)
	}
	if err != nil {
		return DeviceKey{}, invalid(field, "is not a readable public key")
	}
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < MinRSAKeyBits {
			return DeviceKey{}, invalid(field, "an RSA key must have at least %d bits", MinRSAKeyBits)
		}
		if maxRSABits > 0 && k.N.BitLen() > maxRSABits {
			return DeviceKey{}, invalid(field, "an RSA key must have at most %d bits", maxRSABits)
		}
	case *ecdsa.PublicKey, ed25519.PublicKey:
	default:
		return DeviceKey{}, invalid(field, "must be an RSA, ECDSA or Ed25519 key")
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return DeviceKey{}, invalid(field, "is not a usable public key")
	}
	return DeviceKey{der: der, pub: pub}, nil
}

// IsZero reports whether no key is set.
func (k DeviceKey) IsZero() bool { return len(k.der) == 0 }

// PEM is the key in canonical PKIX PEM form, for storage and display.
func (k DeviceKey) PEM() string {
	if k.IsZero() {
		return ""
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: k.der}))
}

// Equal reports whether two keys are the same key.
func (k DeviceKey) Equal(o DeviceKey) bool { return !k.IsZero() && bytes.Equal(k.der, o.der) }

// Fingerprint is the SHA-256 of the key's PKIX form, base64: a short name
// for the key that operators can compare with the device's.
func (k DeviceKey) Fingerprint() string {
	sum := sha256.Sum256(k.der)
	return base64.RawStdEncoding.EncodeToString(sum[:])
}

// Verify checks a signature over msg, as Mender's agents make it: base64
// of an RSA PKCS#1 v1.5 SHA-256 signature, an ASN.1 ECDSA signature over
// the SHA-256 digest, or an Ed25519 signature of the message itself.
func (k DeviceKey) Verify(msg []byte, signatureB64 string) bool {
	sig, err := base64.StdEncoding.DecodeString(signatureB64)
	if err != nil || len(sig) == 0 {
		return false
	}
	digest := sha256.Sum256(msg)
	switch pub := k.pub.(type) {
	case *rsa.PublicKey:
		return rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig) == nil
	case *ecdsa.PublicKey:
		return ecdsa.VerifyASN1(pub, digest[:], sig)
	case ed25519.PublicKey:
		return ed25519.Verify(pub, msg, sig)
	}
	return false
}

// DeviceAdmission says a device may authenticate with a key pair: the
// public key an operator registered for it (preauthorization) or accepted
// from its request, and the generation of the session tokens issued to it.
// Rotating the key or revoking tokens moves the generation on.
type DeviceAdmission struct {
	deviceID   DeviceID
	key        DeviceKey
	generation int64
	updatedAt  time.Time
}

// NewDeviceAdmission admits a device with its key.
func NewDeviceAdmission(deviceID DeviceID, key DeviceKey, now time.Time) (DeviceAdmission, error) {
	if deviceID.IsZero() {
		return DeviceAdmission{}, invalid("device_id", "is required")
	}
	if key.IsZero() {
		return DeviceAdmission{}, invalid("public_key", "is required")
	}
	return DeviceAdmission{deviceID: deviceID, key: key, generation: 1, updatedAt: stamp(now)}, nil
}

// RehydrateDeviceAdmission rebuilds a stored admission; only adapters call it.
func RehydrateDeviceAdmission(deviceID, keyPEM string, generation int64, updatedAt time.Time) (DeviceAdmission, error) {
	k, err := parseDeviceKey("public_key", keyPEM, 0)
	if err != nil {
		return DeviceAdmission{}, err
	}
	return DeviceAdmission{deviceID: DeviceID{s: deviceID}, key: k, generation: generation, updatedAt: stamp(updatedAt)}, nil
}

// DeviceID is the admitted device.
func (a DeviceAdmission) DeviceID() DeviceID { return a.deviceID }

// Key is the device's registered public key.
func (a DeviceAdmission) Key() DeviceKey { return a.key }

// Generation numbers the session tokens issued under this admission.
func (a DeviceAdmission) Generation() int64 { return a.generation }

// UpdatedAt is when the key or generation last changed.
func (a DeviceAdmission) UpdatedAt() time.Time { return a.updatedAt }

// Admits reports whether an authentication request may have a session:
// the key it presents is the registered one and its signature over the
// exact body verifies with it. Every request that passes gets a new token.
func (a DeviceAdmission) Admits(presented DeviceKey, body []byte, signatureB64 string) bool {
	return a.key.Equal(presented) && a.key.Verify(body, signatureB64)
}

// RevokeSessions ends every session token issued so far without changing
// the key: tokens of the old generation are no longer honoured
// (SessionClaims.Current), and the device authenticates again with its
// key. Operators revoke them when they replace a device's credentials.
func (a *DeviceAdmission) RevokeSessions(now time.Time) {
	a.generation++
	a.updatedAt = stamp(now)
}

// AdmitKey is the admission a device has once key is admitted for it: a
// device with none is admitted afresh, one with another key has it
// replaced (RotateKey ends its sessions), and the same key again keeps the
// admission and its sessions. Setting a key and accepting a request both
// decide it here, so every store only stores the result.
func AdmitKey(cur *DeviceAdmission, deviceID DeviceID, key DeviceKey, now time.Time) (DeviceAdmission, error) {
	if cur == nil {
		return NewDeviceAdmission(deviceID, key, now)
	}
	next := *cur
	next.RotateKey(key, now)
	return next, nil
}

// RotateKey replaces the key; tokens of the old generation are no longer
// issued or honoured (SessionClaims.Current).
func (a *DeviceAdmission) RotateKey(key DeviceKey, now time.Time) {
	if key.Equal(a.key) {
		return
	}
	a.key = key
	a.generation++
	a.updatedAt = stamp(now)
}
