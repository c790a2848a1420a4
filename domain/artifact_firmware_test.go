package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

func testArtifact(t *testing.T, meta domain.ArtifactMeta) domain.Artifact {
	t.Helper()
	id, _ := domain.ParseUUID("id", "0b0e4c1e-5a5a-4c4c-9d9d-000000000001")
	a, err := domain.NewArtifact(id, "image.mender", domain.ArtifactDigest{Size: 1234,
		SHA256: strings.Repeat("a", 64), SHA1: strings.Repeat("b", 40), MD5: strings.Repeat("c", 32)}, meta, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A firmware published from an artifact takes its size, checksums and
// artifact name; a declared value that disagrees, or a URL as well, is
// refused naming the field.
func TestFirmwareSpecWithArtifact(t *testing.T) {
	a := testArtifact(t, domain.ArtifactMeta{Format: domain.ArtifactMender, ArtifactName: "release-7"})
	spec, err := domain.FirmwareSpec{Model: "cam", Version: "1.0.0", SHA1: strings.Repeat("b", 40)}.WithArtifact(a)
	if err != nil {
		t.Fatalf("WithArtifact: %v", err)
	}
	if spec.ArtifactID != a.ID() || spec.SizeBytes != 1234 || spec.SHA256 != a.Digest().SHA256 ||
		spec.MD5 != a.Digest().MD5 || spec.ArtifactName != "release-7" || spec.URL != "" {
		t.Errorf("spec = %+v, want the artifact's id, size, checksums and name", spec)
	}
	fw, err := domain.NewFirmware(a.ID(), spec, time.Now())
	if err != nil || fw.ArtifactID() != a.ID() {
		t.Fatalf("NewFirmware of the spec = %v (artifact %q)", err, fw.ArtifactID())
	}
	for _, c := range []struct {
		field string
		spec  domain.FirmwareSpec
	}{
		{"url", domain.FirmwareSpec{URL: "https://x.example/a.bin"}},
		{"size_bytes", domain.FirmwareSpec{SizeBytes: 1}},
		{"sha256", domain.FirmwareSpec{SHA256: strings.Repeat("0", 64)}},
		{"sha1", domain.FirmwareSpec{SHA1: strings.Repeat("0", 40)}},
		{"md5", domain.FirmwareSpec{MD5: strings.Repeat("0", 32)}},
		{"artifact_name", domain.FirmwareSpec{ArtifactName: "release-8"}},
	} {
		c.spec.Model, c.spec.Version = "cam", "1.0.0"
		_, err := c.spec.WithArtifact(a)
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("declared %s that disagrees: %v, want a validation error on %s", c.field, err, c.field)
		}
	}
}

// A firmware has exactly one source: a URL, or an artifact.
func TestFirmwareURLOrArtifact(t *testing.T) {
	a := testArtifact(t, domain.ArtifactMeta{})
	base := domain.FirmwareSpec{Model: "cam", Version: "1.0.0", SizeBytes: 1, SHA256: strings.Repeat("a", 64)}
	both := base
	both.URL, both.ArtifactID = "https://x.example/a.bin", a.ID()
	var ve *domain.ValidationError
	if _, err := domain.NewFirmware(a.ID(), both, time.Now()); !errors.As(err, &ve) || ve.Field != "url" {
		t.Errorf("url and artifact_id: %v, want a validation error on url", err)
	}
	if _, err := domain.NewFirmware(a.ID(), base, time.Now()); !errors.As(err, &ve) || ve.Field != "url" {
		t.Errorf("neither url nor artifact_id: %v, want a validation error on url", err)
	}
}

// TestNewArtifactRefusesAnEmptyFileAndKeepsItsFormat: an upload of no
// bytes is no artifact; an inspected format stands, and an unknown one is
// raw.
func TestNewArtifactRefusesAnEmptyFileAndKeepsItsFormat(t *testing.T) {
	id, _ := domain.ParseUUID("id", "0b0e4c1e-5a5a-4c4c-9d9d-000000000002")
	digest := domain.ArtifactDigest{SHA256: strings.Repeat("a", 64), SHA1: strings.Repeat("b", 40), MD5: strings.Repeat("c", 32)}
	if _, err := domain.NewArtifact(id, "empty.bin", digest, domain.ArtifactMeta{}, time.Now()); err == nil {
		t.Error("an artifact of 0 bytes accepted")
	}
	if got := testArtifact(t, domain.ArtifactMeta{Format: domain.ArtifactMender}).Meta().Format; got != domain.ArtifactMender {
		t.Errorf("a Mender artifact stored as %v", got)
	}
	if got := testArtifact(t, domain.ArtifactMeta{}).Meta().Format; got != domain.ArtifactRaw {
		t.Errorf("an artifact of no known format stored as %v, want raw", got)
	}
}

// TestNewArtifactRefusesMetadataNoStoreKeeps: what a file says about
// itself is kept as text; a NUL or invalid UTF-8 in any of it makes the
// file unreadable as what it claims (ARTIFACT_UNREADABLE), on every store.
func TestNewArtifactRefusesMetadataNoStoreKeeps(t *testing.T) {
	id, _ := domain.ParseUUID("id", "0b0e4c1e-5a5a-4c4c-9d9d-000000000003")
	digest := domain.ArtifactDigest{Size: 1, SHA256: strings.Repeat("a", 64), SHA1: strings.Repeat("b", 40), MD5: strings.Repeat("c", 32)}
	good := domain.ArtifactMeta{Format: domain.ArtifactMender, ArtifactName: "release-1", DeviceTypes: []string{"cam"},
		PayloadType: "rootfs-image", Provides: map[string]string{"rootfs-image.version": "1.0.0"}, Version: "1.0.0", Description: "d"}
	if _, err := domain.NewArtifact(id, "a.mender", digest, good, time.Now()); err != nil {
		t.Fatalf("good metadata: %v", err)
	}
	for name, bad := range map[string]func(*domain.ArtifactMeta){
		"artifact_name":  func(m *domain.ArtifactMeta) { m.ArtifactName = "r\x00" },
		"device type":    func(m *domain.ArtifactMeta) { m.DeviceTypes = []string{"cam", "\xff"} },
		"payload_type":   func(m *domain.ArtifactMeta) { m.PayloadType = "\x00" },
		"provides key":   func(m *domain.ArtifactMeta) { m.Provides = map[string]string{"k\x00": "v"} },
		"provides value": func(m *domain.ArtifactMeta) { m.Provides = map[string]string{"k": "v\x00"} },
		"version":        func(m *domain.ArtifactMeta) { m.Version = "1\x00" },
		"description":    func(m *domain.ArtifactMeta) { m.Description = "bad \xc3" },
	} {
		m := good
		bad(&m)
		var fe *domain.ArtifactFormatError
		if _, err := domain.NewArtifact(id, "a.mender", digest, m, time.Now()); !errors.As(err, &fe) || strings.ContainsRune(fe.Reason, 0) {
			t.Errorf("%s: %v, want an ArtifactFormatError that does not repeat the bad text", name, err)
		}
	}
}
