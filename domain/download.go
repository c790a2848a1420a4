package domain

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"time"
)

// Errors of hosted downloads (docs/ERRORS.md maps each to its code).
var (
	// ErrFirmwareGone means a device asked for the image of a firmware an
	// operator revoked: it is no longer downloadable, and asking again will
	// not change that.
	ErrFirmwareGone = errors.New("firmware revoked: its image is no longer downloadable")
	// ErrLinkInvalid means a signed download link whose signature does not
	// match what it names (forged, altered, or signed with another key).
	ErrLinkInvalid = errors.New("download link invalid")
	// ErrLinkExpired means an authentic signed download link past its
	// expiry: the agent asks the service for a new one.
	ErrLinkExpired = errors.New("download link expired")
)

// MayDownload is the rule of hosted downloads: a device may download a
// firmware's hosted image when the firmware is of the device's model and
// not revoked. Another model's firmware, or one hosted elsewhere, is not
// found — the answer reveals nothing about firmware the device could never
// be offered; a revoked one is gone (ErrFirmwareGone).
func MayDownload(dev Device, fw Firmware) error {
	if fw.artifactID.IsZero() || fw.model != dev.Model() {
		return ErrNotFound
	}
	if fw.Revoked() {
		return ErrFirmwareGone
	}
	return nil
}

// ArtifactLink is a signed download link: it lets whoever holds it download
// one firmware's artifact for one device until it expires, with no other
// credentials (mender-client sends none when it follows source.uri). The
// signature covers all four fields, so none can be changed.
type ArtifactLink struct {
	ArtifactID UUID
	FirmwareID UUID
	DeviceID   DeviceID
	Expires    time.Time
	// Signature is the HMAC-SHA256 of the fields, base64url without padding.
	Signature string
}

// LinkKey signs and verifies artifact links. It redacts itself when
// printed, so it cannot leak through a log line.
type LinkKey struct{ k []byte }

// NewLinkKey makes a key of secret, which must hold at least 32 bytes: an
// HMAC-SHA256 key shorter than the hash adds guessable structure.
func NewLinkKey(secret []byte) (LinkKey, error) {
	if len(secret) < 32 {
		return LinkKey{}, invalid("link_key", "must be at least 32 bytes")
	}
	return LinkKey{k: append([]byte(nil), secret...)}, nil
}

// IsZero reports whether the key is missing.
func (k LinkKey) IsZero() bool { return len(k.k) == 0 }

// String redacts the key.
func (LinkKey) String() string { return "[redacted]" }

// GoString redacts the key under %#v too.
func (LinkKey) GoString() string { return "[redacted]" }

// Sign returns the link to fw's artifact for dev, valid until expires
// (truncated to the second, as the link carries it).
func (k LinkKey) Sign(fw Firmware, dev DeviceID, expires time.Time) ArtifactLink {
	l := ArtifactLink{ArtifactID: fw.artifactID, FirmwareID: fw.id, DeviceID: dev, Expires: time.Unix(expires.Unix(), 0).UTC()}
	l.Signature = base64.RawURLEncoding.EncodeToString(k.mac(l))
	return l
}

// Verify accepts a link this key signed that has not expired at now. The
// signature is compared in constant time and checked before the expiry, so
// only the holder of an authentic link learns that it expired.
func (k LinkKey) Verify(l ArtifactLink, now time.Time) error {
	sig, err := base64.RawURLEncoding.DecodeString(l.Signature)
	if err != nil || len(k.k) == 0 || !hmac.Equal(sig, k.mac(l)) {
		return ErrLinkInvalid
	}
	if !now.Before(l.Expires) {
		return ErrLinkExpired
	}
	return nil
}

// mac is the HMAC of the link's fields, one per line: none of them can
// contain a newline (ids are UUIDs and device ids; the expiry is decimal),
// so no two different links share a message.
func (k LinkKey) mac(l ArtifactLink) []byte {
	h := hmac.New(sha256.New, k.k)
	h.Write([]byte("ota-artifact-link/1\n" + l.ArtifactID.String() + "\n" + l.FirmwareID.String() + "\n" +
		l.DeviceID.String() + "\n" + strconv.FormatInt(l.Expires.Unix(), 10)))
	return h.Sum(nil)
}
