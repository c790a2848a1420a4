package contract

import (
	"errors"
	"testing"

	"github.com/ai-device/ota/domain"
	"github.com/google/uuid"
)

func (s *repoSuite) firmwares(t *testing.T) {
	ctx := t.Context()

	t.Run("CreateGetRoundTrip", func(t *testing.T) {
		model := repoName("model")
		full := domain.FirmwareSpec{
			Model: model, Version: "2.1.0-beta.2+exp.sha.5114f85", URL: "https://cdn.example.com/fw/a.bin?sig=x",
			SizeBytes: 123456789, SHA256: repoHex("a"), SHA1: repoHex("b")[:40], MD5: repoHex("c")[:32],
			Signature: "MEUCIQD…signature…", ReleaseNotes: "Fixes: wifi 断线\nAdds: things",
			Mandatory: true, MinSourceVersion: "1.5.0",
		}
		for _, spec := range []domain.FirmwareSpec{full, repoSpec(model, "1.0.0")} {
			f := s.firmware(t, spec, s.at(3), true)
			got, err := s.Firmwares.Get(ctx, f.ID())
			repoNoErr(t, "get", err)
			repoSameFirmware(t, got, f)
			if got.Status() != domain.FirmwareReleased {
				t.Errorf("status %s, want released", got.Status())
			}
		}
	})

	t.Run("Duplicate", func(t *testing.T) {
		model := repoName("model")
		f := s.firmware(t, repoSpec(model, "1.2.0+a"), s.at(0), true)
		for _, v := range []string{"1.2.0+a", "1.2.0+b", "1.2.0"} {
			dup := s.firmware(t, repoSpec(model, v), s.at(1), false)
			if err := s.Firmwares.Create(ctx, dup, domain.AuditRecord{}); !errors.Is(err, domain.ErrFirmwareExists) || errors.Is(err, domain.ErrArtifactNameTaken) {
				t.Errorf("publish %s after 1.2.0+a: err = %v, want domain.ErrFirmwareExists (the version, not an artifact name)", v, err)
			}
			_, err := s.Firmwares.Get(ctx, dup.ID())
			repoIsNotFound(t, "refused firmware", err)
		}
		// Other versions of the model, and the same version of another model, are fine.
		s.firmware(t, repoSpec(model, "1.2.0-rc.1"), s.at(2), true)
		s.firmware(t, repoSpec(model, "1.2.1"), s.at(2), true)
		s.firmware(t, repoSpec(repoName("model"), "1.2.0+a"), s.at(2), true)
		got, err := s.Firmwares.Get(ctx, f.ID())
		repoNoErr(t, "get", err)
		repoSameFirmware(t, got, f)
	})

	t.Run("UpdateToATakenVersion", func(t *testing.T) {
		// Only a status changes in practice, but an Update is written whole:
		// it may not make a second publication of a (model, version).
		model := repoName("model")
		s.firmware(t, repoSpec(model, "1.0.0"), s.at(0), true)
		f := s.firmware(t, repoSpec(model, "2.0.0"), s.at(1), true)
		clash, err := domain.NewFirmware(f.ID(), repoSpec(model, "1.0.0+b"), s.at(2))
		repoNoErr(t, "new firmware", err)
		if _, err := s.Firmwares.Update(ctx, f.ID(), func(x *domain.Firmware) error { *x = clash; return nil }, nil); !errors.Is(err, domain.ErrFirmwareExists) {
			t.Errorf("update to a taken version: err = %v, want domain.ErrFirmwareExists", err)
		}
		got, err := s.Firmwares.Get(ctx, f.ID())
		repoNoErr(t, "get", err)
		repoSameFirmware(t, got, f)
	})

	t.Run("DuplicateID", func(t *testing.T) {
		model := repoName("model")
		f := s.firmware(t, repoSpec(model, "1.0.0"), s.at(0), true)
		same, err := domain.NewFirmware(f.ID(), repoSpec(model, "2.0.0"), s.at(1))
		repoNoErr(t, "new firmware", err)
		if err := s.Firmwares.Create(ctx, same, domain.AuditRecord{}); err == nil {
			t.Error("a second firmware with a taken id was stored")
		}
		got, err := s.Firmwares.Get(ctx, f.ID())
		repoNoErr(t, "get", err)
		repoSameFirmware(t, got, f)
	})

	t.Run("GetMissing", func(t *testing.T) {
		for _, id := range []string{uuid.NewString(), "not-a-uuid", "", "'; drop table firmwares; --"} {
			_, err := s.Firmwares.Get(ctx, asUUID(id))
			repoIsNotFound(t, "get "+id, err)
		}
	})

	t.Run("ListNewestFirst", func(t *testing.T) {
		model, other := repoName("model"), repoName("model")
		f1 := s.firmware(t, repoSpec(model, "1.0.0"), s.at(1), true)
		f3 := s.firmware(t, repoSpec(model, "0.9.0"), s.at(3), true) // newest, though a lower version
		f2 := s.firmware(t, repoSpec(model, "1.1.0"), s.at(2), true)
		fo := s.firmware(t, repoSpec(other, "1.0.0"), s.at(4), true)

		got, err := s.Firmwares.List(ctx, model)
		repoNoErr(t, "list", err)
		want := []domain.Firmware{f3, f2, f1}
		if len(got) != len(want) {
			t.Fatalf("listed %d firmware of the model, want %d", len(got), len(want))
		}
		for i := range want {
			repoSameFirmware(t, got[i], want[i])
		}

		all, err := s.Firmwares.List(ctx, "")
		repoNoErr(t, "list all", err)
		pos := map[domain.UUID]int{}
		for i, f := range all {
			pos[f.ID()] = i + 1
		}
		for _, f := range []domain.Firmware{f1, f2, f3, fo} {
			if pos[f.ID()] == 0 {
				t.Errorf("list of all models misses %s", f.ID())
			}
		}
		if !(pos[fo.ID()] < pos[f3.ID()] && pos[f3.ID()] < pos[f2.ID()] && pos[f2.ID()] < pos[f1.ID()]) {
			t.Errorf("list of all models is not newest first: positions %v", pos)
		}

		none, err := s.Firmwares.List(ctx, repoName("model"))
		repoNoErr(t, "list unknown model", err)
		if len(none) != 0 {
			t.Errorf("unknown model lists %d firmware", len(none))
		}
	})

	t.Run("Update", func(t *testing.T) {
		f := s.firmware(t, repoSpec(repoName("model"), "3.0.0"), s.at(0), true)
		got, err := s.Firmwares.Update(ctx, f.ID(), func(fw *domain.Firmware) error {
			repoSameFirmware(t, *fw, f)
			fw.Revoke(s.at(9))
			return nil
		}, nil)
		repoNoErr(t, "revoke", err)
		want := f
		want.Revoke(s.at(9))
		repoSameFirmware(t, got, want)
		stored, err := s.Firmwares.Get(ctx, f.ID())
		repoNoErr(t, "get", err)
		repoSameFirmware(t, stored, want)
		if !stored.Revoked() {
			t.Error("revocation not stored")
		}

		g := s.firmware(t, repoSpec(repoName("model"), "3.0.0"), s.at(0), true)
		_, err = s.Firmwares.Update(ctx, g.ID(), func(fw *domain.Firmware) error {
			fw.Revoke(s.at(9))
			return errRepoBoom
		}, nil)
		if !errors.Is(err, errRepoBoom) {
			t.Fatalf("failing fn: err = %v, want fn's error", err)
		}
		stored, err = s.Firmwares.Get(ctx, g.ID())
		repoNoErr(t, "get", err)
		repoSameFirmware(t, stored, g)

		for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
			_, err = s.Firmwares.Update(ctx, asUUID(id), func(*domain.Firmware) error {
				t.Error("fn called for an unknown firmware")
				return nil
			}, nil)
			repoIsNotFound(t, "update "+id, err)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		f := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), false)
		if err := s.Firmwares.Create(repoCancelled(t), f, domain.AuditRecord{}); err == nil {
			t.Error("create with a cancelled context succeeded")
		}
		_, err := s.Firmwares.Get(ctx, f.ID())
		repoIsNotFound(t, "firmware created under a cancelled context", err)
	})
}

// ---------------------------------------------------------------- rollouts
