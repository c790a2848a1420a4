package domain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

func TestNewFirmwareValidation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*domain.FirmwareSpec)
		field  string // "" when valid
	}{
		{"baseline", func(*domain.FirmwareSpec) {}, ""},

		{"model empty", func(s *domain.FirmwareSpec) { s.Model = "" }, "model"},
		{"model bad char", func(s *domain.FirmwareSpec) { s.Model = "cam x1" }, "model"},
		{"model 65 chars", func(s *domain.FirmwareSpec) { s.Model = strings.Repeat("m", 65) }, "model"},

		{"version empty", func(s *domain.FirmwareSpec) { s.Version = "" }, "version"},
		{"version shorthand", func(s *domain.FirmwareSpec) { s.Version = "1.2" }, "version"},
		{"version v prefix", func(s *domain.FirmwareSpec) { s.Version = "v1.2.3" }, "version"},
		{"version prerelease+build ok", func(s *domain.FirmwareSpec) { s.Version = "1.2.0-rc.1+b.5" }, ""},

		{"url http ok", func(s *domain.FirmwareSpec) { s.URL = "http://10.0.0.1:8080/fw.bin?sig=abc" }, ""},
		{"url upper-case scheme ok", func(s *domain.FirmwareSpec) { s.URL = "HTTPS://CDN.EXAMPLE.COM/fw.bin" }, ""},
		{"url empty", func(s *domain.FirmwareSpec) { s.URL = "" }, "url"},
		{"url relative path", func(s *domain.FirmwareSpec) { s.URL = "/fw/1.2.0.bin" }, "url"},
		{"url no scheme", func(s *domain.FirmwareSpec) { s.URL = "cdn.example.com/fw.bin" }, "url"},
		{"url protocol-relative", func(s *domain.FirmwareSpec) { s.URL = "//cdn.example.com/fw.bin" }, "url"},
		{"url ftp", func(s *domain.FirmwareSpec) { s.URL = "ftp://cdn.example.com/fw.bin" }, "url"},
		{"url file", func(s *domain.FirmwareSpec) { s.URL = "file:///etc/passwd" }, "url"},
		{"url javascript", func(s *domain.FirmwareSpec) { s.URL = "javascript:alert(1)" }, "url"},
		{"url no host", func(s *domain.FirmwareSpec) { s.URL = "https:///fw.bin" }, "url"},
		{"url scheme only", func(s *domain.FirmwareSpec) { s.URL = "https://" }, "url"},
		{"url opaque", func(s *domain.FirmwareSpec) { s.URL = "https:cdn.example.com/fw.bin" }, "url"},
		{"url space in host", func(s *domain.FirmwareSpec) { s.URL = "https://cdn example.com/fw.bin" }, "url"},
		{"url leading space", func(s *domain.FirmwareSpec) { s.URL = " https://cdn.example.com/fw.bin" }, "url"},
		{"url newline", func(s *domain.FirmwareSpec) { s.URL = "https://cdn.example.com/fw\n.bin" }, "url"},
		{"url bad port", func(s *domain.FirmwareSpec) { s.URL = "https://cdn.example.com:port/fw.bin" }, "url"},
		{"url ipv6 ok", func(s *domain.FirmwareSpec) { s.URL = "http://[2001:db8::1]:8080/fw.bin" }, ""},
		{"url NUL", func(s *domain.FirmwareSpec) { s.URL = "https://cdn.example.com/\x00" }, "url"},
		{"url too long", func(s *domain.FirmwareSpec) {
			s.URL = "https://cdn.example.com/" + strings.Repeat("a", domain.MaxURLLen)
		}, "url"},

		{"size zero", func(s *domain.FirmwareSpec) { s.SizeBytes = 0 }, "size_bytes"},
		{"size negative", func(s *domain.FirmwareSpec) { s.SizeBytes = -1 }, "size_bytes"},
		{"size one", func(s *domain.FirmwareSpec) { s.SizeBytes = 1 }, ""},

		{"sha256 empty", func(s *domain.FirmwareSpec) { s.SHA256 = "" }, "sha256"},
		{"sha256 upper-case", func(s *domain.FirmwareSpec) { s.SHA256 = strings.Repeat("AB", 32) }, "sha256"},
		{"sha256 63", func(s *domain.FirmwareSpec) { s.SHA256 = goodSHA256[:63] }, "sha256"},
		{"sha256 65", func(s *domain.FirmwareSpec) { s.SHA256 = goodSHA256 + "a" }, "sha256"},
		{"sha256 non-hex", func(s *domain.FirmwareSpec) { s.SHA256 = strings.Repeat("g", 64) }, "sha256"},
		{"sha256 all digits ok", func(s *domain.FirmwareSpec) { s.SHA256 = strings.Repeat("0123456789", 6) + "abcd" }, ""},

		{"sha1 ok", func(s *domain.FirmwareSpec) { s.SHA1 = goodSHA1 }, ""},
		{"sha1 39", func(s *domain.FirmwareSpec) { s.SHA1 = goodSHA1[:39] }, "sha1"},
		{"sha1 upper-case", func(s *domain.FirmwareSpec) { s.SHA1 = strings.ToUpper(strings.Repeat("af", 20)) }, "sha1"},
		{"sha1 sha256-length", func(s *domain.FirmwareSpec) { s.SHA1 = goodSHA256 }, "sha1"},
		{"sha1 non-hex", func(s *domain.FirmwareSpec) { s.SHA1 = strings.Repeat("z", 40) }, "sha1"},

		{"md5 ok", func(s *domain.FirmwareSpec) { s.MD5 = goodMD5 }, ""},
		{"md5 31", func(s *domain.FirmwareSpec) { s.MD5 = goodMD5[:31] }, "md5"},
		{"md5 upper-case", func(s *domain.FirmwareSpec) { s.MD5 = strings.Repeat("AF", 16) }, "md5"},
		{"md5 non-hex", func(s *domain.FirmwareSpec) { s.MD5 = strings.Repeat("x", 32) }, "md5"},

		{"signature ok", func(s *domain.FirmwareSpec) { s.Signature = "MEUCIQDx…base64==" }, ""},
		{"signature NUL", func(s *domain.FirmwareSpec) { s.Signature = "sig\x00" }, "signature"},
		{"signature bad UTF-8", func(s *domain.FirmwareSpec) { s.Signature = "sig\xff" }, "signature"},
		{"signature too long", func(s *domain.FirmwareSpec) { s.Signature = strings.Repeat("s", 100000) }, "signature"},

		{"notes at max", func(s *domain.FirmwareSpec) { s.ReleaseNotes = strings.Repeat("n", domain.MaxNotesLen) }, ""},
		{"notes over max", func(s *domain.FirmwareSpec) { s.ReleaseNotes = strings.Repeat("n", domain.MaxNotesLen+1) }, "release_notes"},
		{"notes bad UTF-8", func(s *domain.FirmwareSpec) { s.ReleaseNotes = "fix \xc3" }, "release_notes"},
		{"notes NUL", func(s *domain.FirmwareSpec) { s.ReleaseNotes = "a\x00b" }, "release_notes"},

		{"min source lower ok", func(s *domain.FirmwareSpec) { s.MinSourceVersion = "1.0.0" }, ""},
		{"min source prerelease of version ok", func(s *domain.FirmwareSpec) { s.MinSourceVersion = "1.2.0-rc.1" }, ""},
		{"min source malformed", func(s *domain.FirmwareSpec) { s.MinSourceVersion = "1.0" }, "min_source_version"},
		{"min source equal", func(s *domain.FirmwareSpec) { s.MinSourceVersion = "1.2.0" }, "min_source_version"},
		{"min source equal but build", func(s *domain.FirmwareSpec) {
			s.Version, s.MinSourceVersion = "1.2.0+b", "1.2.0+a"
		}, "min_source_version"},
		{"min source greater", func(s *domain.FirmwareSpec) { s.MinSourceVersion = "1.3.0" }, "min_source_version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := validSpec()
			tt.mutate(&spec)
			fw, err := domain.NewFirmware(idOf("fw-1"), spec, t0)
			if tt.field != "" {
				wantValidation(t, err, tt.field)
				return
			}
			if err != nil {
				t.Fatalf("NewFirmware: %v", err)
			}
			if got := fw.Spec(); got != spec {
				t.Fatalf("Spec() = %+v, want %+v", got, spec)
			}
		})
	}
}

func TestNewFirmwareResult(t *testing.T) {
	spec := validSpec()
	spec.SHA1, spec.MD5, spec.Signature = goodSHA1, goodMD5, "sig"
	spec.ReleaseNotes, spec.Mandatory, spec.MinSourceVersion = "notes", true, "1.0.0"
	fw, err := domain.NewFirmware(idOf("fw-9"), spec, t0)
	if err != nil {
		t.Fatal(err)
	}
	if fw.ID() != idOf("fw-9") || fw.Model() != "cam-x1" || fw.Version().String() != "1.2.0" {
		t.Fatalf("id/model/version = %s/%s/%s", fw.ID(), fw.Model(), fw.Version())
	}
	if fw.Status() != domain.FirmwareReleased || fw.Revoked() {
		t.Fatalf("new firmware status = %s", fw.Status())
	}
	if fw.Spec() != spec {
		t.Fatalf("Spec() = %+v", fw.Spec())
	}
	if !fw.CreatedAt().Equal(t0) || fw.CreatedAt().Location() != time.UTC || !fw.UpdatedAt().Equal(t0) {
		t.Fatalf("timestamps %v %v", fw.CreatedAt(), fw.UpdatedAt())
	}
}

func TestFirmwareRevoke(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	fw.Revoke(t1)
	if !fw.Revoked() || fw.Status() != domain.FirmwareRevoked || fw.Status().String() != "revoked" {
		t.Fatalf("status after Revoke = %s", fw.Status())
	}
	if !fw.UpdatedAt().Equal(t1) || fw.UpdatedAt().Location() != time.UTC {
		t.Fatalf("updatedAt = %v, want %v", fw.UpdatedAt(), t1)
	}
	// Revoking again is harmless and does not move the timestamp.
	fw.Revoke(t1.Add(time.Hour))
	if !fw.Revoked() || !fw.UpdatedAt().Equal(t1) {
		t.Fatalf("second Revoke changed updatedAt to %v", fw.UpdatedAt())
	}
}

func TestFirmwareAcceptsSource(t *testing.T) {
	withMin := mustFirmware(t, "fw-1", "cam-x1", "2.0.0", "1.5.0")
	noMin := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	tests := []struct {
		fw      domain.Firmware
		current string // "" is the zero version
		want    bool
	}{
		{noMin, "1.0.0", true},
		{noMin, "0.0.1", true},
		{noMin, "1.9.9", true},
		{noMin, "2.0.0-rc.1", true}, // prerelease is below the release
		{noMin, "2.0.0", false},     // not an upgrade
		{noMin, "2.0.0+other", false},
		{noMin, "2.0.1", false}, // downgrade
		{noMin, "10.0.0", false},
		{withMin, "1.5.0", true}, // exactly min_source_version
		{withMin, "1.5.0+b", true},
		{withMin, "1.6.0", true},
		{withMin, "1.9.9-beta", true},
		{withMin, "1.4.9", false},
		{withMin, "1.5.0-rc.1", false}, // below min
		{withMin, "1.0.0", false},
		{withMin, "2.0.0", false},
		{withMin, "3.0.0", false},
		{withMin, "", false}, // unknown version cannot be shown to be ≥ min
	}
	for _, tt := range tests {
		name := tt.fw.ID().String() + "_from_" + tt.current
		t.Run(name, func(t *testing.T) {
			var cur domain.Version
			if tt.current != "" {
				cur = domain.MustParseVersion(tt.current)
			}
			if got := tt.fw.AcceptsSource(cur); got != tt.want {
				t.Fatalf("AcceptsSource(%q) = %v, want %v", tt.current, got, tt.want)
			}
		})
	}
}

func TestParseFirmwareStatus(t *testing.T) {
	tests := []struct {
		in   string
		want domain.FirmwareStatus
		ok   bool
	}{
		{"released", domain.FirmwareReleased, true},
		{"revoked", domain.FirmwareRevoked, true},
		{"", domain.FirmwareStatus{}, false},
		{"Released", domain.FirmwareStatus{}, false},
		{"draft", domain.FirmwareStatus{}, false},
	}
	for _, tt := range tests {
		got, err := domain.ParseFirmwareStatus(tt.in)
		if tt.ok {
			if err != nil || got != tt.want || got.String() != tt.in {
				t.Errorf("ParseFirmwareStatus(%q) = %v, %v", tt.in, got, err)
			}
			continue
		}
		wantValidation(t, err, "status")
	}
}

func TestRehydrateFirmware(t *testing.T) {
	spec := validSpec()
	spec.MinSourceVersion = "1.0.0"
	fw, err := domain.RehydrateFirmware("fw-1", spec, domain.FirmwareRevoked, t0, t1)
	if err != nil {
		t.Fatal(err)
	}
	if fw.Spec() != spec || !fw.Revoked() || !fw.CreatedAt().Equal(t0) || !fw.UpdatedAt().Equal(t1) {
		t.Fatalf("rehydrated firmware lost fields: %+v", fw)
	}
	if fw.AcceptsSource(domain.MustParseVersion("0.9.0")) {
		t.Fatal("rehydrated firmware forgot min_source_version")
	}
	bad := spec
	bad.Version = "garbage"
	_, err = domain.RehydrateFirmware("fw-1", bad, domain.FirmwareReleased, t0, t1)
	wantValidation(t, err, "version")
	bad = spec
	bad.MinSourceVersion = "1.0"
	_, err = domain.RehydrateFirmware("fw-1", bad, domain.FirmwareReleased, t0, t1)
	wantValidation(t, err, "min_source_version")
}
