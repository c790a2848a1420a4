package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

func TestNewDevice(t *testing.T) {
	tests := []struct {
		name, id, model, version string
		field                    string // "" when valid
	}{
		{"valid with version", "cam-0001", "cam-x1", "1.0.0", ""},
		{"valid without version", "cam-0001", "cam-x1", "", ""},
		{"valid prerelease+build", "aa:bb:cc", "AI.Box_2", "2.0.0-rc.1+b7", ""},
		{"id 64 chars", strings.Repeat("d", 64), "m", "", ""},
		{"model 64 chars", "d", strings.Repeat("m", 64), "", ""},
		{"empty id", "", "cam-x1", "", "device_id"},
		{"id 65 chars", strings.Repeat("d", 65), "cam-x1", "", "device_id"},
		{"id bad char", "cam/1", "cam-x1", "", "device_id"},
		{"empty model", "cam-1", "", "", "model"},
		{"model 65 chars", "cam-1", strings.Repeat("m", 65), "", "model"},
		{"model bad char", "cam-1", "cam x1", "", "model"},
		{"bad version", "cam-1", "cam-x1", "1.2", "current_version"},
		{"v-prefixed version", "cam-1", "cam-x1", "v1.2.3", "current_version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := domain.HashToken("secret")
			d, err := domain.NewDevice(asDeviceID(tt.id), tt.model, tt.version, h, t0)
			if tt.field != "" {
				wantValidation(t, err, tt.field)
				return
			}
			if err != nil {
				t.Fatalf("NewDevice: %v", err)
			}
			if d.ID().String() != tt.id || d.Model() != tt.model {
				t.Fatalf("id/model = %q/%q", d.ID(), d.Model())
			}
			if d.CurrentVersion().String() != tt.version || d.CurrentVersion().IsZero() != (tt.version == "") {
				t.Fatalf("current version = %q", d.CurrentVersion())
			}
			if d.TokenHash() != h {
				t.Fatal("token hash not kept")
			}
			if !d.LastSeenAt().IsZero() {
				t.Fatal("a new device has not been seen yet")
			}
			if !d.CreatedAt().Equal(t0) || d.CreatedAt().Location() != time.UTC {
				t.Fatalf("createdAt = %v, want %v in UTC", d.CreatedAt(), t0)
			}
		})
	}
}

func TestDeviceCheckModel(t *testing.T) {
	d := mustDevice(t, "cam-0001", "cam-x1", "1.0.0")
	tests := []struct {
		model    string
		mismatch bool
	}{
		{"cam-x1", false},
		{"cam-x2", true},
		{"CAM-X1", true},
		{"cam-x1 ", true},
		{"", true},
	}
	for _, tt := range tests {
		err := d.CheckModel(tt.model)
		if tt.mismatch != errors.Is(err, domain.ErrModelMismatch) || (!tt.mismatch && err != nil) {
			t.Errorf("CheckModel(%q) = %v, mismatch want %v", tt.model, err, tt.mismatch)
		}
	}
}

func TestDeviceSeenAndRotateToken(t *testing.T) {
	d := mustDevice(t, "cam-0001", "cam-x1", "1.0.0")
	v := domain.MustParseVersion("1.1.0")
	d.Seen(v, t1)
	if !d.CurrentVersion().Equal(v) || d.CurrentVersion().String() != "1.1.0" {
		t.Fatalf("current version = %q", d.CurrentVersion())
	}
	if !d.LastSeenAt().Equal(t1) || d.LastSeenAt().Location() != time.UTC {
		t.Fatalf("last seen = %v", d.LastSeenAt())
	}
	old := d.TokenHash()
	nh := domain.HashToken("another")
	d.RotateToken(nh)
	if d.TokenHash() != nh || d.TokenHash() == old {
		t.Fatal("RotateToken did not replace the hash")
	}
}

func TestRehydrateDevice(t *testing.T) {
	h := domain.HashToken("x")
	v := domain.MustParseVersion("3.0.0")
	seen := t1.UTC()
	d := domain.RehydrateDevice("d1", "m1", v, h, seen, t0)
	if d.ID().String() != "d1" || d.Model() != "m1" || !d.CurrentVersion().Equal(v) || d.TokenHash() != h ||
		!d.LastSeenAt().Equal(seen) || !d.CreatedAt().Equal(t0) {
		t.Fatalf("rehydrated device lost fields: %+v", d)
	}
}

func TestDeviceSeenNeedsWrite(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v1, v1b, v2 := domain.MustParseVersion("1.0.0"), domain.MustParseVersion("1.0.0+b2"), domain.MustParseVersion("2.0.0")
	seen := domain.RehydrateDevice("d", "m", v1, domain.TokenHash{}, at, at)
	never := domain.RehydrateDevice("d", "m", v1, domain.TokenHash{}, time.Time{}, at)
	tests := []struct {
		name       string
		d          domain.Device
		v          domain.Version
		at         time.Time
		resolution time.Duration
		want       bool
	}{
		{"never seen", never, v1, at, 5 * time.Minute, true},
		{"same version within the resolution", seen, v1, at.Add(5*time.Minute - time.Microsecond), 5 * time.Minute, false},
		{"same version at the resolution", seen, v1, at.Add(5 * time.Minute), 5 * time.Minute, true},
		{"an older report", seen, v1, at.Add(-time.Hour), 5 * time.Minute, false},
		{"new version at once", seen, v2, at.Add(time.Second), 5 * time.Minute, true},
		{"new build metadata at once", seen, v1b, at.Add(time.Second), 5 * time.Minute, true},
		{"no resolution: every check", seen, v1, at, 0, true},
	}
	for _, tc := range tests {
		if got := tc.d.SeenNeedsWrite(tc.v, tc.at, tc.resolution); got != tc.want {
			t.Errorf("%s: SeenNeedsWrite = %v, want %v", tc.name, got, tc.want)
		}
	}
}
