package domain

import (
	"net/url"
	"time"
)

// FirmwareStatus says whether a firmware may still be offered.
type FirmwareStatus struct{ s string }

// Firmware statuses. Revoked firmware is never offered again.
var (
	FirmwareReleased = FirmwareStatus{"released"}
	FirmwareRevoked  = FirmwareStatus{"revoked"}
)

// ParseFirmwareStatus reads a stored or requested status.
func ParseFirmwareStatus(s string) (FirmwareStatus, error) {
	return named("status", s, FirmwareReleased, FirmwareRevoked)
}

// String is the wire and storage form.
func (s FirmwareStatus) String() string { return s.s }

// FirmwareSpec is what an operator publishes. Optional fields are empty strings.
type FirmwareSpec struct {
	Model            string
	Version          string
	URL              string
	SizeBytes        int64
	SHA256           string
	SHA1             string
	MD5              string
	Signature        string
	ReleaseNotes     string
	Mandatory        bool
	MinSourceVersion string
	// ArtifactName is the name Mender devices know this image by (their
	// artifact_name); optional, unique per model. See ValidateArtifactName.
	ArtifactName string
	// ArtifactID names the uploaded artifact devices download this image
	// from (the service hosts it), instead of URL: a firmware has exactly
	// one of the two. Its size, checksums and artifact name come from the
	// artifact (FirmwareSpec.WithArtifact).
	ArtifactID UUID
}

// Firmware is one published image of one model at one version.
type Firmware struct {
	id               UUID
	model            string
	version          Version
	url              string
	sizeBytes        int64
	sha256           string
	sha1             string
	md5              string
	signature        string
	releaseNotes     string
	mandatory        bool
	minSourceVersion Version
	artifactName     string
	artifactID       UUID
	status           FirmwareStatus
	createdAt        time.Time
	updatedAt        time.Time
}

// Maximum lengths of the optional firmware strings not covered elsewhere.
const (
	maxSignatureLen = 4096
)

// NewFirmware validates a publication and returns a released firmware.
func NewFirmware(id UUID, spec FirmwareSpec, now time.Time) (Firmware, error) {
	if id.IsZero() {
		return Firmware{}, invalid("id", "is required")
	}
	if err := ValidateIdentifier("model", spec.Model); err != nil {
		return Firmware{}, err
	}
	v, err := ParseVersion("version", spec.Version)
	if err != nil {
		return Firmware{}, err
	}
	if spec.ArtifactID.IsZero() {
		if err := validateURL(spec.URL); err != nil {
			return Firmware{}, err
		}
	} else if spec.URL != "" {
		return Firmware{}, invalid("url", "must be empty when artifact_id names the image: give one of url or artifact_id")
	}
	if spec.SizeBytes <= 0 {
		return Firmware{}, invalid("size_bytes", "must be greater than 0")
	}
	if !isLowerHex(spec.SHA256, 64) {
		return Firmware{}, invalid("sha256", "must be 64 lowercase hex characters")
	}
	if spec.SHA1 != "" && !isLowerHex(spec.SHA1, 40) {
		return Firmware{}, invalid("sha1", "must be 40 lowercase hex characters")
	}
	if spec.MD5 != "" && !isLowerHex(spec.MD5, 32) {
		return Firmware{}, invalid("md5", "must be 32 lowercase hex characters")
	}
	if err := ValidateText("signature", spec.Signature, maxSignatureLen); err != nil {
		return Firmware{}, err
	}
	if err := ValidateText("release_notes", spec.ReleaseNotes, MaxNotesLen); err != nil {
		return Firmware{}, err
	}
	if err := ValidateArtifactName(spec.ArtifactName); err != nil {
		return Firmware{}, err
	}
	var minSrc Version
	if spec.MinSourceVersion != "" {
		if minSrc, err = ParseVersion("min_source_version", spec.MinSourceVersion); err != nil {
			return Firmware{}, err
		}
		if !minSrc.Less(v) {
			return Firmware{}, invalid("min_source_version", "must be lower than version")
		}
	}
	now = stamp(now)
	return Firmware{
		id: id, model: spec.Model, version: v, url: spec.URL, sizeBytes: spec.SizeBytes,
		sha256: spec.SHA256, sha1: spec.SHA1, md5: spec.MD5, signature: spec.Signature,
		releaseNotes: spec.ReleaseNotes, mandatory: spec.Mandatory, minSourceVersion: minSrc,
		artifactName: spec.ArtifactName, artifactID: spec.ArtifactID, status: FirmwareReleased, createdAt: now, updatedAt: now,
	}, nil
}

// RehydrateFirmware rebuilds a stored firmware; only adapters call it, with
// the id as the store wrote it (a UUID it put in canonical form), which is
// not checked again.
func RehydrateFirmware(id string, spec FirmwareSpec, status FirmwareStatus, createdAt, updatedAt time.Time) (Firmware, error) {
	v, err := ParseVersion("version", spec.Version)
	if err != nil {
		return Firmware{}, err
	}
	var minSrc Version
	if spec.MinSourceVersion != "" {
		if minSrc, err = ParseVersion("min_source_version", spec.MinSourceVersion); err != nil {
			return Firmware{}, err
		}
	}
	return Firmware{
		id: UUID{s: id}, model: spec.Model, version: v, url: spec.URL, sizeBytes: spec.SizeBytes,
		sha256: spec.SHA256, sha1: spec.SHA1, md5: spec.MD5, signature: spec.Signature,
		releaseNotes: spec.ReleaseNotes, mandatory: spec.Mandatory, minSourceVersion: minSrc,
		artifactName: spec.ArtifactName, artifactID: spec.ArtifactID, status: status, createdAt: stamp(createdAt), updatedAt: stamp(updatedAt),
	}, nil
}

func validateURL(s string) error {
	if s == "" {
		return invalid("url", "is required")
	}
	if err := ValidateText("url", s, MaxURLLen); err != nil {
		return err
	}
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("url", "must be an absolute http or https URL")
	}
	return nil
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ID is the firmware's UUID.
func (f Firmware) ID() UUID { return f.id }

// Model is the hardware model the image is for.
func (f Firmware) Model() string { return f.model }

// Version is the image's semantic version.
func (f Firmware) Version() Version { return f.version }

// Spec returns the published fields, for storage and display.
func (f Firmware) Spec() FirmwareSpec {
	return FirmwareSpec{
		Model: f.model, Version: f.version.String(), URL: f.url, SizeBytes: f.sizeBytes,
		SHA256: f.sha256, SHA1: f.sha1, MD5: f.md5, Signature: f.signature,
		ReleaseNotes: f.releaseNotes, Mandatory: f.mandatory, MinSourceVersion: f.minSourceVersion.String(),
		ArtifactName: f.artifactName, ArtifactID: f.artifactID,
	}
}

// ArtifactID is the hosted artifact devices download the image from, or
// the zero UUID for an image at its URL.
func (f Firmware) ArtifactID() UUID { return f.artifactID }

// Status is released or revoked.
func (f Firmware) Status() FirmwareStatus { return f.status }

// Revoked reports whether the firmware was withdrawn.
func (f Firmware) Revoked() bool { return f.status == FirmwareRevoked }

// CreatedAt is when it was published.
func (f Firmware) CreatedAt() time.Time { return f.createdAt }

// UpdatedAt is when its status last changed.
func (f Firmware) UpdatedAt() time.Time { return f.updatedAt }

// Revoke withdraws the firmware. Revoking twice is harmless: operators
// retry, and the outcome they asked for already holds.
func (f *Firmware) Revoke(now time.Time) {
	if f.status == FirmwareRevoked {
		return
	}
	f.status = FirmwareRevoked
	f.updatedAt = stamp(now)
}

// AcceptsSource reports whether a device running v may install this image:
// it must be an upgrade, and not from below min_source_version.
func (f Firmware) AcceptsSource(v Version) bool {
	if !v.Less(f.version) {
		return false
	}
	if !f.minSourceVersion.IsZero() && v.Less(f.minSourceVersion) {
		return false
	}
	return true
}

// Delivery is what the device protocol a check arrives over can deliver
// (check rule 4): the plan offers a device only firmware its protocol can
// hand it. The zero value is the REST API's, which delivers any firmware.
type Delivery int

// Deliveries of the device protocols.
const (
	// DeliverAny: the REST API hands out the URL and sha256 of any image.
	DeliverAny Delivery = iota
	// DeliverWithSHA1: hawkBit's DDI agents verify a sha1 digest
	// (CheckSHA1Deliverable).
	DeliverWithSHA1
	// DeliverWithArtifactName: Mender devices know images by artifact
	// name (CheckArtifactDeliverable).
	DeliverWithArtifactName
)

// CheckDeliverable returns ErrNotDeliverable, with an explanation, when the
// firmware lacks what delivery d needs.
func (f Firmware) CheckDeliverable(d Delivery) error {
	switch d {
	case DeliverWithSHA1:
		return f.CheckSHA1Deliverable()
	case DeliverWithArtifactName:
		return f.CheckArtifactDeliverable()
	}
	return nil
}
