package domain

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Errors of hosted artifacts (docs/ERRORS.md maps each to its code).
var (
	// ErrArtifactInUse means an artifact was to be deleted while a firmware
	// still refers to it: devices offered that firmware download it.
	ErrArtifactInUse = errors.New("artifact in use")
	// ErrChecksumMismatch means an upload's content does not hash to the
	// checksum its sender declared: nothing of it is kept.
	ErrChecksumMismatch = errors.New("checksum mismatch")
	// ErrArtifactTooLarge means an upload passed the configured limit
	// (OTA_ARTIFACT_MAX_BYTES): nothing of it is kept.
	ErrArtifactTooLarge = errors.New("artifact too large")
	// ErrArtifactUnreadable is what an ArtifactFormatError unwraps to.
	ErrArtifactUnreadable = errors.New("artifact unreadable")
)

// ArtifactFormatError says why an uploaded file that claims a format (a
// .mender or .swu file) cannot be read as one: a caller fixes the file, so
// the reason names what is wrong in it.
type ArtifactFormatError struct {
	Format ArtifactFormat
	Reason string
}

// Error renders the format and the reason in words safe to show a caller.
func (e *ArtifactFormatError) Error() string {
	return fmt.Sprintf("not a readable %s file: %s", e.Format, e.Reason)
}

// Unwrap lets errors.Is(err, ErrArtifactUnreadable) match.
func (e *ArtifactFormatError) Unwrap() error { return ErrArtifactUnreadable }

// ArtifactFormat is what kind of file an artifact is: an opaque image, a
// Mender artifact (.mender) or an SWUpdate image (.swu). The format decides
// what the service can read from the file about itself.
type ArtifactFormat struct{ s string }

// The artifact formats.
var (
	ArtifactRaw    = ArtifactFormat{"raw"}
	ArtifactMender = ArtifactFormat{"mender"}
	ArtifactSWU    = ArtifactFormat{"swu"}
)

// ParseArtifactFormat reads a stored or requested format name.
func ParseArtifactFormat(s string) (ArtifactFormat, error) {
	return named("format", s, ArtifactRaw, ArtifactMender, ArtifactSWU)
}

// String is the format's name.
func (f ArtifactFormat) String() string { return f.s }

// ArtifactMeta is what a file says about itself, read on upload to pre-fill
// the firmware published from it. Fields a format does not carry are empty.
type ArtifactMeta struct {
	Format ArtifactFormat
	// ArtifactName is a .mender file's artifact_name (the name a Mender
	// device reports once it runs the image).
	ArtifactName string
	// DeviceTypes are the device types a .mender file is compatible with,
	// or the hardware-compatibility list of a .swu file's sw-description.
	DeviceTypes []string
	// PayloadType is a .mender file's payload type (rootfs-image, …).
	PayloadType string
	// Provides are a .mender file's provides (rootfs-image.version, …).
	Provides map[string]string
	// Version is a .swu file's sw-description version, or a .mender file's
	// software version: its rootfs-image.version, else its one
	// rootfs-image.<name>.version (--software-name, a module image's
	// --software-version), when it provides one.
	Version string
	// Description is a .swu file's sw-description description.
	Description string
}

// ArtifactDigest is what the service computed of an artifact's bytes while
// storing them.
type ArtifactDigest struct {
	Size   int64
	SHA256 string
	SHA1   string
	MD5    string
}

// Artifact is a file an operator uploaded once and every device downloads
// from the service. It is stored by content (its sha256), so the same bytes
// uploaded twice are one artifact.
type Artifact struct {
	id        UUID
	fileName  string
	digest    ArtifactDigest
	meta      ArtifactMeta
	createdAt time.Time
}

// maxFileNameLen bounds an artifact's file name (a common file-system limit).
const maxFileNameLen = 255

// ValidateArtifactFileName refuses a file name that could name anything but
// one file: a path (separators, "." or ".."), control characters, or more
// than 255 bytes. The name appears in download routes and
// Content-Disposition headers.
func ValidateArtifactFileName(s string) error {
	switch {
	case s == "":
		return invalid("filename", "is required")
	case len(s) > maxFileNameLen:
		return invalid("filename", "must be at most %d bytes", maxFileNameLen)
	case !utf8.ValidString(s):
		return invalid("filename", "must be UTF-8")
	case s == "." || s == "..":
		return invalid("filename", "must name a file")
	case strings.ContainsAny(s, `/\`):
		return invalid("filename", "must not contain a path separator")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return invalid("filename", "must not contain control characters")
	}
	return nil
}

// NewArtifact validates a stored upload.
func NewArtifact(id UUID, fileName string, d ArtifactDigest, meta ArtifactMeta, now time.Time) (Artifact, error) {
	if id.IsZero() {
		return Artifact{}, invalid("id", "is required")
	}
	if err := ValidateArtifactFileName(fileName); err != nil {
		return Artifact{}, err
	}
	if d.Size <= 0 {
		return Artifact{}, invalid("size_bytes", "must be greater than 0")
	}
	if !isLowerHex(d.SHA256, 64) || !isLowerHex(d.SHA1, 40) || !isLowerHex(d.MD5, 32) {
		return Artifact{}, invalid("digest", "must be lowercase hex sha256, sha1 and md5")
	}
	if meta.Format == (ArtifactFormat{}) {
		meta.Format = ArtifactRaw
	}
	if err := meta.validText(); err != nil {
		return Artifact{}, err
	}
	return Artifact{id: id, fileName: fileName, digest: d, meta: meta, createdAt: stamp(now)}, nil
}

// validText refuses a file whose metadata holds text no store keeps as
// given (a NUL, invalid UTF-8): the file is unreadable as what it claims
// to be, for every store alike, rather than kept by one and a 500 in the
// other.
func (m ArtifactMeta) validText() error {
	type text struct{ field, s string }
	texts := []text{{"artifact_name", m.ArtifactName}, {"payload_type", m.PayloadType}, {"version", m.Version},
		{"description", m.Description}}
	for _, t := range m.DeviceTypes {
		texts = append(texts, text{"device types", t})
	}
	for k, v := range m.Provides { // the file's words are not repeated: they are what is broken
		texts = append(texts, text{"provides", k}, text{"provides", v})
	}
	for _, t := range texts {
		if err := ValidateText(t.field, t.s, len(t.s)); err != nil {
			return &ArtifactFormatError{Format: m.Format, Reason: "its " + t.field + " holds a NUL character or is not valid UTF-8"}
		}
	}
	return nil
}

// RehydrateArtifact rebuilds a stored artifact; only adapters call it.
func RehydrateArtifact(id string, fileName string, d ArtifactDigest, meta ArtifactMeta, createdAt time.Time) Artifact {
	return Artifact{id: UUID{s: id}, fileName: fileName, digest: d, meta: meta, createdAt: stamp(createdAt)}
}

// ID is the artifact's UUID.
func (a Artifact) ID() UUID { return a.id }

// FileName is the name the file was uploaded with, and is downloaded by.
func (a Artifact) FileName() string { return a.fileName }

// Digest is the artifact's size and checksums.
func (a Artifact) Digest() ArtifactDigest { return a.digest }

// Meta is what the file says about itself.
func (a Artifact) Meta() ArtifactMeta { return a.meta }

// CreatedAt is when the artifact was stored.
func (a Artifact) CreatedAt() time.Time { return a.createdAt }

// StorageKey is where the artifact's bytes live in the blob store. It is
// the artifact's id, not its checksum: an upload is written before its
// checksum is known, and the same bytes uploaded twice are one artifact
// because the store keeps one row per sha256 (the later upload's object is
// deleted), not because two uploads share a key.
func (a Artifact) StorageKey() string { return ArtifactStorageKey(a.id) }

// ArtifactStorageKey is the blob key of the artifact with this id.
func ArtifactStorageKey(id UUID) string { return "artifacts/" + id.String() }

// WithArtifact is the spec of a firmware published from an uploaded
// artifact: its size and checksums, and a .mender file's artifact name, are
// the artifact's, and devices download it from the service. A value the
// operator declared anyway must agree: a disagreeing one is a mistake to
// show them (the wrong file, or the wrong form), not one to overwrite. A URL
// as well is refused: a firmware has one source.
func (s FirmwareSpec) WithArtifact(a Artifact) (FirmwareSpec, error) {
	if s.URL != "" {
		return FirmwareSpec{}, invalid("url", "must be empty when artifact_id names the image: give one of url or artifact_id")
	}
	d := a.Digest()
	if s.SizeBytes != 0 && s.SizeBytes != d.Size {
		return FirmwareSpec{}, invalid("size_bytes", "is %d but the artifact has %d bytes", s.SizeBytes, d.Size)
	}
	for _, c := range []struct{ field, declared, actual string }{
		{"sha256", s.SHA256, d.SHA256}, {"sha1", s.SHA1, d.SHA1}, {"md5", s.MD5, d.MD5},
	} {
		if c.declared != "" && c.declared != c.actual {
			return FirmwareSpec{}, invalid(c.field, "does not match the artifact's (%s)", c.actual)
		}
	}
	if name := a.Meta().ArtifactName; name != "" {
		if s.ArtifactName != "" && s.ArtifactName != name {
			return FirmwareSpec{}, invalid("artifact_name", "is %q but the artifact names itself %q", s.ArtifactName, name)
		}
		s.ArtifactName = name
	}
	s.ArtifactID = a.ID()
	s.SizeBytes, s.SHA256, s.SHA1, s.MD5 = d.Size, d.SHA256, d.SHA1, d.MD5
	return s, nil
}
