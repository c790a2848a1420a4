package contract

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// byToken finds a device by its token hash as authentication does, in
// the check view (application.Auth.AuthenticateDevice): no store looks a
// device up by token any other way.
func (s *repoSuite) byToken(ctx context.Context, h domain.TokenHash) (domain.Device, error) {
	v, err := s.Tasks.CheckView(ctx, h)
	return v.Device, err
}

func (s *repoSuite) devices(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")

	t.Run("CreateGetRoundTrip", func(t *testing.T) {
		d, err := domain.NewDevice(asDeviceID(repoName("dev")), model, "1.2.3-rc.1+build.7", s.hash(t), s.at(0))
		repoNoErr(t, "new device", err)
		repoNoErr(t, "create", s.Devices.Create(ctx, d, domain.AuditRecord{}))
		got, err := s.Devices.Get(ctx, d.ID())
		repoNoErr(t, "get", err)
		repoSameDevice(t, got, d)
		if !got.LastSeenAt().IsZero() {
			t.Errorf("a new device was seen at %v", got.LastSeenAt())
		}

		bare, err := domain.NewDevice(asDeviceID(repoName("dev")), model, "", s.hash(t), s.at(1))
		repoNoErr(t, "new device", err)
		repoNoErr(t, "create", s.Devices.Create(ctx, bare, domain.AuditRecord{}))
		got, err = s.Devices.Get(ctx, bare.ID())
		repoNoErr(t, "get", err)
		repoSameDevice(t, got, bare)
		if !got.CurrentVersion().IsZero() {
			t.Errorf("version %q, want none", got.CurrentVersion())
		}
	})

	t.Run("TimesAreTruncated", func(t *testing.T) {
		// The domain's constructors already truncate; a rehydrated value
		// need not be, and the store must still keep microseconds only.
		us := repoUs(s.base)
		d := domain.RehydrateDevice(repoName("dev"), model, domain.MustParseVersion("1.0.0"), s.hash(t), us.Add(999), us.Add(1))
		repoNoErr(t, "create", s.Devices.Create(ctx, d, domain.AuditRecord{}))
		got, err := s.Devices.Get(ctx, d.ID())
		repoNoErr(t, "get", err)
		if !got.CreatedAt().Equal(us) || !got.LastSeenAt().Equal(us) {
			t.Errorf("stored times %v, %v; want %v", got.CreatedAt(), got.LastSeenAt(), us)
		}
	})

	t.Run("CreateDuplicate", func(t *testing.T) {
		d := s.device(t, model, "1.0.0")
		dup, err := domain.NewDevice(d.ID(), repoName("model"), "2.0.0", s.hash(t), s.at(5))
		repoNoErr(t, "new device", err)
		if err := s.Devices.Create(ctx, dup, domain.AuditRecord{}); !errors.Is(err, domain.ErrDeviceExists) {
			t.Fatalf("second create: err = %v, want domain.ErrDeviceExists", err)
		}
		got, err := s.Devices.Get(ctx, d.ID())
		repoNoErr(t, "get", err)
		repoSameDevice(t, got, d)
		if _, err := s.byToken(ctx, dup.TokenHash()); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("the refused device's token finds a device: err = %v", err)
		}
	})

	t.Run("GetMissing", func(t *testing.T) {
		_, err := s.Devices.Get(ctx, asDeviceID(repoName("dev")))
		repoIsNotFound(t, "get unknown", err)
	})

	t.Run("TokenHashesAreUnique", func(t *testing.T) {
		d := s.device(t, model, "1.0.0")
		other := s.device(t, model, "1.0.0")
		twin, err := domain.NewDevice(asDeviceID(repoName("dev")), model, "1.0.0", d.TokenHash(), s.at(0))
		repoNoErr(t, "new device", err)
		if err := s.Devices.Create(ctx, twin, domain.AuditRecord{}); err == nil {
			t.Error("a second device with a taken token hash was stored")
		}
		_, err = s.Devices.Get(ctx, twin.ID())
		repoIsNotFound(t, "the refused twin", err)

		_, err = s.Devices.Update(ctx, other.ID(), func(dv *domain.Device) error {
			dv.RotateToken(d.TokenHash())
			return nil
		}, domain.AuditRecord{})
		if err == nil {
			t.Error("rotating to another device's token hash succeeded")
		}
		for _, want := range []domain.Device{d, other} {
			got, err := s.byToken(ctx, want.TokenHash())
			repoNoErr(t, "by token", err)
			repoSameDevice(t, got, want)
		}
	})

	t.Run("ByTokenHash", func(t *testing.T) {
		d := s.device(t, model, "1.0.0")
		s.device(t, model, "1.0.0") // another device, another token
		got, err := s.byToken(ctx, d.TokenHash())
		repoNoErr(t, "by token", err)
		repoSameDevice(t, got, d)
		_, err = s.byToken(ctx, s.hash(t))
		repoIsNotFound(t, "unknown token", err)
	})

	t.Run("Update", func(t *testing.T) {
		d := s.device(t, model, "1.0.0")
		newHash := s.hash(t)
		called := false
		got, err := s.Devices.Update(ctx, d.ID(), func(dv *domain.Device) error {
			called = true
			repoSameDevice(t, *dv, d)
			dv.RotateToken(newHash)
			dv.Seen(domain.MustParseVersion("1.1.0+b9"), s.at(10))
			return nil
		}, domain.AuditRecord{})
		repoNoErr(t, "update", err)
		if !called {
			t.Fatal("fn not called")
		}
		want := domain.RehydrateDevice(d.ID().String(), d.Model(), domain.MustParseVersion("1.1.0+b9"), newHash, s.at(10), d.CreatedAt())
		repoSameDevice(t, got, want)
		stored, err := s.Devices.Get(ctx, d.ID())
		repoNoErr(t, "get", err)
		repoSameDevice(t, stored, want)
		_, err = s.byToken(ctx, d.TokenHash())
		repoIsNotFound(t, "old token after rotation", err)
		byNew, err := s.byToken(ctx, newHash)
		repoNoErr(t, "new token", err)
		repoSameDevice(t, byNew, want)

		// fn fails after changing its copy: nothing is stored.
		_, err = s.Devices.Update(ctx, d.ID(), func(dv *domain.Device) error {
			dv.RotateToken(s.hash(t))
			dv.Seen(domain.MustParseVersion("9.9.9"), s.at(20))
			return errRepoBoom
		}, domain.AuditRecord{})
		if !errors.Is(err, errRepoBoom) {
			t.Fatalf("failing fn: err = %v, want fn's error", err)
		}
		stored, err = s.Devices.Get(ctx, d.ID())
		repoNoErr(t, "get", err)
		repoSameDevice(t, stored, want)
		_, err = s.byToken(ctx, newHash)
		repoNoErr(t, "token after failed update", err)

		_, err = s.Devices.Update(ctx, asDeviceID(repoName("dev")), func(*domain.Device) error {
			t.Error("fn called for an unknown device")
			return nil
		}, domain.AuditRecord{})
		repoIsNotFound(t, "update unknown", err)
	})

	t.Run("RecordSeen", func(t *testing.T) {
		d := s.device(t, model, "1.0.0")
		v := domain.MustParseVersion("1.4.0+ci.3")
		repoNoErr(t, "record seen", s.Devices.RecordSeen(ctx, d, v, s.at(30)))
		s.eventuallySeen(t, domain.RehydrateDevice(d.ID().String(), d.Model(), v, d.TokenHash(), s.at(30), d.CreatedAt()))

		// Reports may arrive out of order: an older one never overwrites a
		// newer one; one of the same instant does.
		old := domain.MustParseVersion("1.3.0")
		repoNoErr(t, "record an older report", s.Devices.RecordSeen(ctx, d, old, s.at(29)))
		s.eventuallySeen(t, domain.RehydrateDevice(d.ID().String(), d.Model(), v, d.TokenHash(), s.at(30), d.CreatedAt()))
		same := domain.MustParseVersion("1.4.1")
		repoNoErr(t, "record a report of the same instant", s.Devices.RecordSeen(ctx, d, same, s.at(30)))
		s.eventuallySeen(t, domain.RehydrateDevice(d.ID().String(), d.Model(), same, d.TokenHash(), s.at(30), d.CreatedAt()))

		unknown := repoName("dev")
		if err := s.Devices.RecordSeen(ctx, unseen(unknown), v, s.at(31)); err != nil && !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("record seen of an unknown device: err = %v, want nil or domain.ErrNotFound", err)
		}
		time.Sleep(1100 * time.Millisecond)
		_, err := s.Devices.Get(ctx, asDeviceID(unknown))
		repoIsNotFound(t, "record seen must not register a device", err)
	})

	t.Run("StaleReadNeverWritesTheVersionBack", func(t *testing.T) {
		// A poll reads the device at 1.1.0; before it records its check, a
		// success stores 1.3.0 (the device runs it now). The poll's check
		// repeats the version it read (a DDI poll has no other): it moves
		// last_seen_at, never the version back to 1.1.0.
		d := s.device(t, model, "1.1.0")
		stale, err := s.Devices.Get(ctx, d.ID())
		repoNoErr(t, "get", err)
		installed := domain.MustParseVersion("1.3.0")
		_, err = s.Devices.Update(ctx, d.ID(), func(dv *domain.Device) error {
			dv.Seen(installed, s.at(40))
			return nil
		}, domain.AuditRecord{})
		repoNoErr(t, "update", err)
		repoNoErr(t, "record the stale poll", s.Devices.RecordSeen(ctx, stale, stale.CurrentVersion(), s.at(41)))
		s.eventuallySeen(t, domain.RehydrateDevice(d.ID().String(), d.Model(), installed, d.TokenHash(), s.at(41), d.CreatedAt()))

		// A check read after it that reports another version is the
		// device's own new word, and is stored.
		fresh, err := s.Devices.Get(ctx, d.ID())
		repoNoErr(t, "get", err)
		back := domain.MustParseVersion("1.1.0")
		repoNoErr(t, "record a fresh report", s.Devices.RecordSeen(ctx, fresh, back, s.at(42)))
		s.eventuallySeen(t, domain.RehydrateDevice(d.ID().String(), d.Model(), back, d.TokenHash(), s.at(42), d.CreatedAt()))
	})

	t.Run("CancelledContext", func(t *testing.T) {
		d, err := domain.NewDevice(asDeviceID(repoName("dev")), model, "1.0.0", s.hash(t), s.at(0))
		repoNoErr(t, "new device", err)
		if err := s.Devices.Create(repoCancelled(t), d, domain.AuditRecord{}); err == nil {
			t.Error("create with a cancelled context succeeded")
		}
		_, err = s.Devices.Get(ctx, d.ID())
		repoIsNotFound(t, "device created under a cancelled context", err)

		stored := s.device(t, model, "1.0.0")
		_, err = s.Devices.Update(repoCancelled(t), stored.ID(), func(dv *domain.Device) error {
			dv.RotateToken(s.hash(t))
			return nil
		}, domain.AuditRecord{})
		if err == nil {
			t.Error("update with a cancelled context succeeded")
		}
		got, err := s.Devices.Get(ctx, stored.ID())
		repoNoErr(t, "get", err)
		repoSameDevice(t, got, stored)
	})
}

// eventuallySeen waits for the device to read back as want: RecordSeen may
// write behind, visible within a second.
func (s *repoSuite) eventuallySeen(t *testing.T, want domain.Device) {
	t.Helper()
	deadline := time.Now().Add(1500 * time.Millisecond)
	for {
		got, err := s.Devices.Get(t.Context(), want.ID())
		repoNoErr(t, "get", err)
		if got.CurrentVersion().String() == want.CurrentVersion().String() && got.LastSeenAt().Equal(repoUs(want.LastSeenAt())) ||
			time.Now().After(deadline) {
			repoSameDevice(t, got, want)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ---------------------------------------------------------------- firmwares

// unseen is a device by id only, never seen: a store given it as the
// stored record of a check has no reason to skip the write.
func unseen(id string) domain.Device {
	return domain.RehydrateDevice(id, "m", domain.Version{}, domain.TokenHash{}, time.Time{}, time.Time{})
}
