package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

const (
	artifactA = "5b1a6f0e-6a3f-4a43-9a47-1a2b3c4d5e6f"
	artifactB = "7c2b7f1f-7b4f-4b54-8b58-2b3c4d5e6f70"
)

func mustUUID(t *testing.T, s string) domain.UUID {
	t.Helper()
	id, err := domain.ParseUUID("id", s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func hostedFirmware(t *testing.T, model string, artifact string) domain.Firmware {
	t.Helper()
	spec := validSpec()
	spec.Model = model
	spec.URL = ""
	spec.ArtifactID = mustUUID(t, artifact)
	fw, err := domain.NewFirmware(mustUUID(t, rolloutA), spec, t0)
	if err != nil {
		t.Fatal(err)
	}
	return fw
}

func device(t *testing.T, id, model string) domain.Device {
	t.Helper()
	return domain.RehydrateDevice(id, model, domain.MustParseVersion("1.0.0"), domain.HashToken("x"), t0, t0)
}

func TestMayDownload(t *testing.T) {
	dev := device(t, "cam-1", "cam-x1")
	hosted := hostedFirmware(t, "cam-x1", artifactA)
	if err := domain.MayDownload(dev, hosted); err != nil {
		t.Fatalf("own model's released hosted firmware: %v", err)
	}
	if err := domain.MayDownload(device(t, "cam-2", "cam-x2"), hosted); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("another model's device: %v, want ErrNotFound", err)
	}
	external, err := domain.NewFirmware(mustUUID(t, rolloutB), validSpec(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := domain.MayDownload(dev, external); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("firmware hosted elsewhere: %v, want ErrNotFound", err)
	}
	revoked := hosted
	revoked.Revoke(t1)
	if err := domain.MayDownload(dev, revoked); !errors.Is(err, domain.ErrFirmwareGone) {
		t.Errorf("revoked firmware: %v, want ErrFirmwareGone", err)
	}
	// Another model's device learns nothing about a revocation.
	if err := domain.MayDownload(device(t, "cam-2", "cam-x2"), revoked); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("another model, revoked: %v, want ErrNotFound", err)
	}
}

func TestArtifactLinks(t *testing.T) {
	key, err := domain.NewLinkKey([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := domain.NewLinkKey([]byte(strings.Repeat("k", 31))); err == nil {
		t.Error("a 31-byte key was accepted")
	}
	fw := hostedFirmware(t, "cam-x1", artifactA)
	dev, _ := domain.ParseDeviceID("cam-1")
	l := key.Sign(fw, dev, t0.Add(time.Hour))
	if l.ArtifactID.String() != artifactA || l.FirmwareID != fw.ID() || l.DeviceID != dev {
		t.Fatalf("link names %+v", l)
	}
	if err := key.Verify(l, t0); err != nil {
		t.Fatalf("fresh link: %v", err)
	}
	if err := key.Verify(l, t0.Add(time.Hour)); !errors.Is(err, domain.ErrLinkExpired) {
		t.Errorf("at its expiry: %v, want ErrLinkExpired", err)
	}
	other, _ := domain.ParseDeviceID("cam-2")
	forged := map[string]func(domain.ArtifactLink) domain.ArtifactLink{
		"device":    func(l domain.ArtifactLink) domain.ArtifactLink { l.DeviceID = other; return l },
		"artifact":  func(l domain.ArtifactLink) domain.ArtifactLink { l.ArtifactID = mustUUID(t, artifactB); return l },
		"firmware":  func(l domain.ArtifactLink) domain.ArtifactLink { l.FirmwareID = mustUUID(t, rolloutB); return l },
		"expiry":    func(l domain.ArtifactLink) domain.ArtifactLink { l.Expires = l.Expires.Add(time.Hour); return l },
		"signature": func(l domain.ArtifactLink) domain.ArtifactLink { l.Signature = "AAAA" + l.Signature[4:]; return l },
		"not b64":   func(l domain.ArtifactLink) domain.ArtifactLink { l.Signature = "!!"; return l },
		"empty":     func(l domain.ArtifactLink) domain.ArtifactLink { l.Signature = ""; return l },
	}
	for name, forge := range forged {
		// Checked before the expiry: a forged link is invalid, never "expired".
		if err := key.Verify(forge(l), t0.Add(2*time.Hour)); !errors.Is(err, domain.ErrLinkInvalid) {
			t.Errorf("changed %s: %v, want ErrLinkInvalid", name, err)
		}
	}
	otherKey, _ := domain.NewLinkKey([]byte(strings.Repeat("j", 32)))
	if err := otherKey.Verify(l, t0); !errors.Is(err, domain.ErrLinkInvalid) {
		t.Errorf("another key: %v, want ErrLinkInvalid", err)
	}
	if err := (domain.LinkKey{}).Verify(l, t0); !errors.Is(err, domain.ErrLinkInvalid) {
		t.Errorf("the zero key: %v, want ErrLinkInvalid", err)
	}
}
