package contract

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/google/uuid"
)

// Repos is one adapter's set of storage ports. The four share one store, so
// a task can reference the device, firmware and rollout it belongs to.
type Repos struct {
	Devices   ports.DeviceRepository
	Firmwares ports.FirmwareRepository
	Rollouts  ports.RolloutRepository
	Tasks     ports.TaskRepository
}

// RunRepositories runs the repository contract against the Repos that
// newRepos returns. It calls newRepos once per port suite; the suites run in
// parallel and use uniquely named data, so newRepos may hand all of them
// the same store, and that store need not be empty.
//
// Beyond the port docs the contract pins what both adapters must agree on:
// timestamps come back truncated to microseconds, ids that are not UUIDs
// are not found, references to missing rows are domain.ErrNotFound, fn's
// work is stored whole or not at all, and a context that ends before the
// write (a lost lock) stores nothing.
func RunRepositories(t *testing.T, newRepos func(t *testing.T) Repos) {
	t.Run("Devices", func(t *testing.T) {
		t.Parallel()
		newRepoSuite(newRepos(t)).devices(t)
	})
	t.Run("Firmwares", func(t *testing.T) {
		t.Parallel()
		newRepoSuite(newRepos(t)).firmwares(t)
	})
	t.Run("Rollouts", func(t *testing.T) {
		t.Parallel()
		newRepoSuite(newRepos(t)).rollouts(t)
	})
	t.Run("Tasks", func(t *testing.T) {
		t.Parallel()
		newRepoSuite(newRepos(t)).tasks(t)
	})
}

// repoSuite carries the repositories under test and the fixtures built on them.
type repoSuite struct {
	Repos
	base time.Time
}

// errRepoBoom is what a test's fn fails with, to check nothing is stored.
var errRepoBoom = errors.New("contract: fn failed on purpose")

func newRepoSuite(r Repos) *repoSuite {
	// 789 ns below the microsecond: every stored time must come back truncated.
	return &repoSuite{Repos: r, base: time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.UTC)}
}

// at is a distinct instant for step k of a test, with a sub-microsecond part.
func (s *repoSuite) at(k int) time.Time { return s.base.Add(time.Duration(k) * time.Second) }

// repoName is an identifier no other test (or earlier run) uses.
func repoName(prefix string) string { return prefix + "-" + uuid.NewString() }

// repoUs is what a store keeps of a time: microseconds, truncated.
func repoUs(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

func repoHex(seed string) string {
	h := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(h[:])
}

func (s *repoSuite) hash(t *testing.T) domain.TokenHash {
	t.Helper()
	_, h, err := domain.NewDeviceToken()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// device registers a new device of model.
func (s *repoSuite) device(t *testing.T, model, version string) domain.Device {
	t.Helper()
	d, err := domain.NewDevice(repoName("dev"), model, version, s.hash(t), s.at(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Devices.Create(t.Context(), d); err != nil {
		t.Fatalf("create device: %v", err)
	}
	return d
}

func repoSpec(model, version string) domain.FirmwareSpec {
	return domain.FirmwareSpec{
		Model: model, Version: version, URL: "https://cdn.example.com/" + model + "/" + version + ".bin",
		SizeBytes: 1 << 20, SHA256: repoHex(model + version),
	}
}

// firmware publishes a firmware (without storing it when store is false).
func (s *repoSuite) firmware(t *testing.T, spec domain.FirmwareSpec, at time.Time, store bool) domain.Firmware {
	t.Helper()
	f, err := domain.NewFirmware(uuid.NewString(), spec, at)
	if err != nil {
		t.Fatal(err)
	}
	if store {
		if err := s.Firmwares.Create(t.Context(), f); err != nil {
			t.Fatalf("create firmware: %v", err)
		}
	}
	return f
}

// rollout starts a rollout of fw (without storing it when store is false).
func (s *repoSuite) rollout(t *testing.T, fw domain.Firmware, spec domain.RolloutSpec, at time.Time, store bool) domain.Rollout {
	t.Helper()
	r, err := domain.NewRollout(uuid.NewString(), fw, spec, at)
	if err != nil {
		t.Fatal(err)
	}
	if store {
		if err := s.Rollouts.Create(t.Context(), r); err != nil {
			t.Fatalf("create rollout: %v", err)
		}
	}
	return r
}

// offer publishes version of model and rolls it out to everyone.
func (s *repoSuite) offer(t *testing.T, model, version string) domain.Offer {
	t.Helper()
	fw := s.firmware(t, repoSpec(model, version), s.at(1), true)
	return domain.Offer{Firmware: fw, Rollout: s.rollout(t, fw, domain.RolloutSpec{Percentage: 100}, s.at(2), true)}
}

func (s *repoSuite) newTask(t *testing.T, deviceID string, o domain.Offer, attempt int, at time.Time) domain.Task {
	t.Helper()
	tk, err := domain.NewTask(uuid.NewString(), deviceID, o, attempt, at)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// insert makes tk the device's active task, superseding a pending one, and
// checks that it was created as given.
func (s *repoSuite) insert(t *testing.T, tk domain.Task) domain.Task {
	t.Helper()
	got, created, err := s.Tasks.ReplaceActive(t.Context(), tk.DeviceID(), onActive(func(active *domain.Task) (*domain.Task, error) {
		if active != nil {
			if err := active.Cancel(domain.CodeSuperseded, "superseded", tk.CreatedAt()); err != nil {
				return nil, err
			}
		}
		return &tk, nil
	}))
	if err != nil || !created {
		t.Fatalf("insert task: created=%v err=%v", created, err)
	}
	want := tk.Record()
	want.ActionID = got.ActionID()
	if got.ActionID() <= 0 {
		t.Errorf("action id %d, want a positive one", got.ActionID())
	}
	repoSameTask(t, got, want)
	return got
}

// drive moves a task to status with Update, as the domain allows.
func (s *repoSuite) drive(t *testing.T, id string, status domain.TaskStatus, at time.Time) domain.Task {
	t.Helper()
	got, err := s.Tasks.Update(t.Context(), id, func(tk *domain.Task) error {
		switch status {
		case domain.TaskPending:
			return nil
		case domain.TaskCancelled:
			return tk.Cancel(domain.CodeRolloutCancelled, "the rollout was cancelled", at)
		}
		code, msg := "", ""
		if status == domain.TaskFailed {
			code, msg = "E_FLASH", "flash write failed"
		}
		ev, err := domain.NewEvent(uuid.NewString(), status.String(), nil, code, msg)
		if err != nil {
			return err
		}
		_, err = tk.ApplyEvent(ev, nil, at)
		return err
	})
	if err != nil {
		t.Fatalf("drive task to %s: %v", status, err)
	}
	if got.Status() != status {
		t.Fatalf("task is %s, want %s", got.Status(), status)
	}
	return got
}

func repoEvent(t *testing.T, id, status string, progress *int) domain.Event {
	t.Helper()
	ev, err := domain.NewEvent(id, status, progress, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func repoInt(v int) *int { return &v }

// onActive adapts a function of the active task alone (nil if none) to
// ReplaceActive.
func onActive(fn func(active *domain.Task) (*domain.Task, error)) func(ports.TaskState) (*domain.Task, error) {
	return func(st ports.TaskState) (*domain.Task, error) {
		if st.Active == nil {
			return fn(nil)
		}
		return fn(&st.Active.Task)
	}
}

func repoIsNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("%s: err = %v, want domain.ErrNotFound", what, err)
	}
}

func repoNoErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func repoCancelled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

// repoSameDevice compares every field, want's times as a store keeps them.
func repoSameDevice(t *testing.T, got, want domain.Device) {
	t.Helper()
	if got.ID() != want.ID() || got.Model() != want.Model() || got.CurrentVersion().String() != want.CurrentVersion().String() ||
		got.TokenHash() != want.TokenHash() || !got.LastSeenAt().Equal(repoUs(want.LastSeenAt())) ||
		got.LastSeenAt().IsZero() != want.LastSeenAt().IsZero() || !got.CreatedAt().Equal(repoUs(want.CreatedAt())) {
		t.Errorf("device\n got %s %s v=%q seen=%v created=%v hash=%x\nwant %s %s v=%q seen=%v created=%v hash=%x",
			got.ID(), got.Model(), got.CurrentVersion(), got.LastSeenAt(), got.CreatedAt(), got.TokenHash(),
			want.ID(), want.Model(), want.CurrentVersion(), repoUs(want.LastSeenAt()), repoUs(want.CreatedAt()), want.TokenHash())
	}
}

func repoSameFirmware(t *testing.T, got, want domain.Firmware) {
	t.Helper()
	if got.ID() != want.ID() || got.Spec() != want.Spec() || got.Status() != want.Status() ||
		!got.CreatedAt().Equal(repoUs(want.CreatedAt())) || !got.UpdatedAt().Equal(repoUs(want.UpdatedAt())) {
		t.Errorf("firmware\n got %s %+v %s %v %v\nwant %s %+v %s %v %v",
			got.ID(), got.Spec(), got.Status(), got.CreatedAt(), got.UpdatedAt(),
			want.ID(), want.Spec(), want.Status(), repoUs(want.CreatedAt()), repoUs(want.UpdatedAt()))
	}
}

func repoSameRollout(t *testing.T, got, want domain.Rollout) {
	t.Helper()
	g, w := got.Record(), want.Record()
	samePtr := (g.FailureThresholdPercent == nil) == (w.FailureThresholdPercent == nil) &&
		(g.FailureThresholdPercent == nil || *g.FailureThresholdPercent == *w.FailureThresholdPercent)
	if g.ID != w.ID || g.FirmwareID != w.FirmwareID || g.Percentage != w.Percentage || g.MaxAttempts != w.MaxAttempts ||
		!samePtr || g.MinSample != w.MinSample || g.Status != w.Status || g.PausedReason != w.PausedReason ||
		!g.CreatedAt.Equal(repoUs(w.CreatedAt)) || !g.UpdatedAt.Equal(repoUs(w.UpdatedAt)) {
		t.Errorf("rollout\n got %+v (threshold %v)\nwant %+v (threshold %v)", g, repoDeref(g.FailureThresholdPercent), w, repoDeref(w.FailureThresholdPercent))
	}
}

func repoDeref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// repoSameTask compares every field of a task with a record.
func repoSameTask(t *testing.T, got domain.Task, want domain.TaskRecord) {
	t.Helper()
	g := got.Record()
	if g.ID != want.ID || g.ActionID != want.ActionID || g.DeviceID != want.DeviceID || g.FirmwareID != want.FirmwareID ||
		g.RolloutID != want.RolloutID || g.Status != want.Status || g.Progress != want.Progress || g.Attempt != want.Attempt ||
		g.ErrorCode != want.ErrorCode || g.ErrorMessage != want.ErrorMessage ||
		!g.CreatedAt.Equal(repoUs(want.CreatedAt)) || !g.UpdatedAt.Equal(repoUs(want.UpdatedAt)) {
		want.CreatedAt, want.UpdatedAt = repoUs(want.CreatedAt), repoUs(want.UpdatedAt)
		t.Errorf("task\n got %+v\nwant %+v", g, want)
	}
}

func repoTaskIDs(ts []domain.Task) []string {
	ids := make([]string, len(ts))
	for i, tk := range ts {
		ids[i] = tk.ID()
	}
	return ids
}

// ---------------------------------------------------------------- devices

func (s *repoSuite) devices(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")

	t.Run("CreateGetRoundTrip", func(t *testing.T) {
		d, err := domain.NewDevice(repoName("dev"), model, "1.2.3-rc.1+build.7", s.hash(t), s.at(0))
		repoNoErr(t, "new device", err)
		repoNoErr(t, "create", s.Devices.Create(ctx, d))
		got, err := s.Devices.Get(ctx, d.ID())
		repoNoErr(t, "get", err)
		repoSameDevice(t, got, d)
		if !got.LastSeenAt().IsZero() {
			t.Errorf("a new device was seen at %v", got.LastSeenAt())
		}

		bare, err := domain.NewDevice(repoName("dev"), model, "", s.hash(t), s.at(1))
		repoNoErr(t, "new device", err)
		repoNoErr(t, "create", s.Devices.Create(ctx, bare))
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
		repoNoErr(t, "create", s.Devices.Create(ctx, d))
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
		if err := s.Devices.Create(ctx, dup); !errors.Is(err, domain.ErrDeviceExists) {
			t.Fatalf("second create: err = %v, want domain.ErrDeviceExists", err)
		}
		got, err := s.Devices.Get(ctx, d.ID())
		repoNoErr(t, "get", err)
		repoSameDevice(t, got, d)
		if _, err := s.Devices.GetByTokenHash(ctx, dup.TokenHash()); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("the refused device's token finds a device: err = %v", err)
		}
	})

	t.Run("GetMissing", func(t *testing.T) {
		_, err := s.Devices.Get(ctx, repoName("dev"))
		repoIsNotFound(t, "get unknown", err)
	})

	t.Run("TokenHashesAreUnique", func(t *testing.T) {
		d := s.device(t, model, "1.0.0")
		other := s.device(t, model, "1.0.0")
		twin, err := domain.NewDevice(repoName("dev"), model, "1.0.0", d.TokenHash(), s.at(0))
		repoNoErr(t, "new device", err)
		if err := s.Devices.Create(ctx, twin); err == nil {
			t.Error("a second device with a taken token hash was stored")
		}
		_, err = s.Devices.Get(ctx, twin.ID())
		repoIsNotFound(t, "the refused twin", err)

		_, err = s.Devices.Update(ctx, other.ID(), func(dv *domain.Device) error {
			dv.RotateToken(d.TokenHash())
			return nil
		})
		if err == nil {
			t.Error("rotating to another device's token hash succeeded")
		}
		for _, want := range []domain.Device{d, other} {
			got, err := s.Devices.GetByTokenHash(ctx, want.TokenHash())
			repoNoErr(t, "by token", err)
			repoSameDevice(t, got, want)
		}
	})

	t.Run("GetByTokenHash", func(t *testing.T) {
		d := s.device(t, model, "1.0.0")
		s.device(t, model, "1.0.0") // another device, another token
		got, err := s.Devices.GetByTokenHash(ctx, d.TokenHash())
		repoNoErr(t, "by token", err)
		repoSameDevice(t, got, d)
		_, err = s.Devices.GetByTokenHash(ctx, s.hash(t))
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
		})
		repoNoErr(t, "update", err)
		if !called {
			t.Fatal("fn not called")
		}
		want := domain.RehydrateDevice(d.ID(), d.Model(), domain.MustParseVersion("1.1.0+b9"), newHash, s.at(10), d.CreatedAt())
		repoSameDevice(t, got, want)
		stored, err := s.Devices.Get(ctx, d.ID())
		repoNoErr(t, "get", err)
		repoSameDevice(t, stored, want)
		_, err = s.Devices.GetByTokenHash(ctx, d.TokenHash())
		repoIsNotFound(t, "old token after rotation", err)
		byNew, err := s.Devices.GetByTokenHash(ctx, newHash)
		repoNoErr(t, "new token", err)
		repoSameDevice(t, byNew, want)

		// fn fails after changing its copy: nothing is stored.
		_, err = s.Devices.Update(ctx, d.ID(), func(dv *domain.Device) error {
			dv.RotateToken(s.hash(t))
			dv.Seen(domain.MustParseVersion("9.9.9"), s.at(20))
			return errRepoBoom
		})
		if !errors.Is(err, errRepoBoom) {
			t.Fatalf("failing fn: err = %v, want fn's error", err)
		}
		stored, err = s.Devices.Get(ctx, d.ID())
		repoNoErr(t, "get", err)
		repoSameDevice(t, stored, want)
		_, err = s.Devices.GetByTokenHash(ctx, newHash)
		repoNoErr(t, "token after failed update", err)

		_, err = s.Devices.Update(ctx, repoName("dev"), func(*domain.Device) error {
			t.Error("fn called for an unknown device")
			return nil
		})
		repoIsNotFound(t, "update unknown", err)
	})

	t.Run("RecordSeen", func(t *testing.T) {
		d := s.device(t, model, "1.0.0")
		v := domain.MustParseVersion("1.4.0+ci.3")
		repoNoErr(t, "record seen", s.Devices.RecordSeen(ctx, d.ID(), v, s.at(30)))
		s.eventuallySeen(t, domain.RehydrateDevice(d.ID(), d.Model(), v, d.TokenHash(), s.at(30), d.CreatedAt()))

		// Reports may arrive out of order: an older one never overwrites a
		// newer one; one of the same instant does.
		old := domain.MustParseVersion("1.3.0")
		repoNoErr(t, "record an older report", s.Devices.RecordSeen(ctx, d.ID(), old, s.at(29)))
		s.eventuallySeen(t, domain.RehydrateDevice(d.ID(), d.Model(), v, d.TokenHash(), s.at(30), d.CreatedAt()))
		same := domain.MustParseVersion("1.4.1")
		repoNoErr(t, "record a report of the same instant", s.Devices.RecordSeen(ctx, d.ID(), same, s.at(30)))
		s.eventuallySeen(t, domain.RehydrateDevice(d.ID(), d.Model(), same, d.TokenHash(), s.at(30), d.CreatedAt()))

		unknown := repoName("dev")
		if err := s.Devices.RecordSeen(ctx, unknown, v, s.at(31)); err != nil && !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("record seen of an unknown device: err = %v, want nil or domain.ErrNotFound", err)
		}
		time.Sleep(1100 * time.Millisecond)
		_, err := s.Devices.Get(ctx, unknown)
		repoIsNotFound(t, "record seen must not register a device", err)
	})

	t.Run("CancelledContext", func(t *testing.T) {
		d, err := domain.NewDevice(repoName("dev"), model, "1.0.0", s.hash(t), s.at(0))
		repoNoErr(t, "new device", err)
		if err := s.Devices.Create(repoCancelled(t), d); err == nil {
			t.Error("create with a cancelled context succeeded")
		}
		_, err = s.Devices.Get(ctx, d.ID())
		repoIsNotFound(t, "device created under a cancelled context", err)

		stored := s.device(t, model, "1.0.0")
		_, err = s.Devices.Update(repoCancelled(t), stored.ID(), func(dv *domain.Device) error {
			dv.RotateToken(s.hash(t))
			return nil
		})
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
			if err := s.Firmwares.Create(ctx, dup); !errors.Is(err, domain.ErrFirmwareExists) {
				t.Errorf("publish %s after 1.2.0+a: err = %v, want domain.ErrFirmwareExists", v, err)
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

	t.Run("DuplicateID", func(t *testing.T) {
		model := repoName("model")
		f := s.firmware(t, repoSpec(model, "1.0.0"), s.at(0), true)
		same, err := domain.NewFirmware(f.ID(), repoSpec(model, "2.0.0"), s.at(1))
		repoNoErr(t, "new firmware", err)
		if err := s.Firmwares.Create(ctx, same); err == nil {
			t.Error("a second firmware with a taken id was stored")
		}
		got, err := s.Firmwares.Get(ctx, f.ID())
		repoNoErr(t, "get", err)
		repoSameFirmware(t, got, f)
	})

	t.Run("GetMissing", func(t *testing.T) {
		for _, id := range []string{uuid.NewString(), "not-a-uuid", "", "'; drop table firmwares; --"} {
			_, err := s.Firmwares.Get(ctx, id)
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
		pos := map[string]int{}
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
		})
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
		})
		if !errors.Is(err, errRepoBoom) {
			t.Fatalf("failing fn: err = %v, want fn's error", err)
		}
		stored, err = s.Firmwares.Get(ctx, g.ID())
		repoNoErr(t, "get", err)
		repoSameFirmware(t, stored, g)

		for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
			_, err = s.Firmwares.Update(ctx, id, func(*domain.Firmware) error {
				t.Error("fn called for an unknown firmware")
				return nil
			})
			repoIsNotFound(t, "update "+id, err)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		f := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), false)
		if err := s.Firmwares.Create(repoCancelled(t), f); err == nil {
			t.Error("create with a cancelled context succeeded")
		}
		_, err := s.Firmwares.Get(ctx, f.ID())
		repoIsNotFound(t, "firmware created under a cancelled context", err)
	})
}

// ---------------------------------------------------------------- rollouts

func (s *repoSuite) rollouts(t *testing.T) {
	ctx := t.Context()

	t.Run("CreateGetRoundTrip", func(t *testing.T) {
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
		specs := []domain.RolloutSpec{
			{Percentage: 35, MaxAttempts: repoInt(5), FailureThresholdPercent: repoInt(12), MinSample: repoInt(7)},
			{Percentage: 0},
			{Percentage: 100, FailureThresholdPercent: repoInt(1)},
		}
		for i, spec := range specs {
			r := s.rollout(t, fw, spec, s.at(i+1), true)
			got, err := s.Rollouts.Get(ctx, r.ID())
			repoNoErr(t, "get", err)
			repoSameRollout(t, got, r)
			// A returned rollout shares nothing with the store.
			if p := got.Record().FailureThresholdPercent; p != nil {
				*p = 99
				again, err := s.Rollouts.Get(ctx, r.ID())
				repoNoErr(t, "get", err)
				repoSameRollout(t, again, r)
			}
		}
	})

	t.Run("UnknownFirmware", func(t *testing.T) {
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), false)
		r := s.rollout(t, fw, domain.RolloutSpec{Percentage: 10}, s.at(1), false)
		repoIsNotFound(t, "rollout of an unstored firmware", s.Rollouts.Create(ctx, r))
		_, err := s.Rollouts.Get(ctx, r.ID())
		repoIsNotFound(t, "refused rollout", err)
	})

	t.Run("RevokedSinceTheCallerLooked", func(t *testing.T) {
		// The caller judged a copy of the firmware read before the revoke
		// (from a cache, say); the store must still refuse the rollout.
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
		paused := s.rollout(t, fw, domain.RolloutSpec{Percentage: 10}, s.at(1), true)
		if _, err := s.Rollouts.Update(ctx, paused.ID(), func(r *domain.Rollout, _ domain.Firmware) error {
			return r.ChangeStatus(domain.RolloutPaused, fw, s.at(2))
		}); err != nil {
			t.Fatal(err)
		}
		stale := fw
		if _, err := s.Firmwares.Update(ctx, fw.ID(), func(f *domain.Firmware) error { f.Revoke(s.at(3)); return nil }); err != nil {
			t.Fatal(err)
		}
		late := s.rollout(t, stale, domain.RolloutSpec{Percentage: 10}, s.at(4), false)
		if err := s.Rollouts.Create(ctx, late); !errors.Is(err, domain.ErrFirmwareRevoked) {
			t.Fatalf("create with a stale firmware: %v, want ErrFirmwareRevoked", err)
		}
		// Update hands fn the firmware as its transaction sees it, not
		// the caller's stale copy: the domain's rule refuses the resume.
		_, err := s.Rollouts.Update(ctx, paused.ID(), func(r *domain.Rollout, seen domain.Firmware) error {
			if seen.ID() != stale.ID() || !seen.Revoked() {
				t.Errorf("Update handed fn firmware %s (%s), want %s revoked", seen.ID(), seen.Status(), stale.ID())
			}
			return r.ChangeStatus(domain.RolloutActive, seen, s.at(5))
		})
		if !errors.Is(err, domain.ErrFirmwareRevoked) {
			t.Fatalf("resume of a revoked firmware's rollout: %v, want ErrFirmwareRevoked", err)
		}
		got, err := s.Rollouts.Get(ctx, paused.ID())
		if err != nil || got.Status() != domain.RolloutPaused {
			t.Fatalf("rollout after the refused resume: %v %v", got.Status(), err)
		}
	})

	t.Run("DuplicateID", func(t *testing.T) {
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
		r := s.rollout(t, fw, domain.RolloutSpec{Percentage: 10}, s.at(1), true)
		same, err := domain.NewRollout(r.ID(), fw, domain.RolloutSpec{Percentage: 90}, s.at(2))
		repoNoErr(t, "new rollout", err)
		if err := s.Rollouts.Create(ctx, same); err == nil {
			t.Error("a second rollout with a taken id was stored")
		}
		got, err := s.Rollouts.Get(ctx, r.ID())
		repoNoErr(t, "get", err)
		repoSameRollout(t, got, r)
	})

	t.Run("GetMissing", func(t *testing.T) {
		for _, id := range []string{uuid.NewString(), "not-a-uuid", ""} {
			_, err := s.Rollouts.Get(ctx, id)
			repoIsNotFound(t, "get "+id, err)
		}
	})

	t.Run("Update", func(t *testing.T) {
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
		r := s.rollout(t, fw, domain.RolloutSpec{Percentage: 10, FailureThresholdPercent: repoInt(30)}, s.at(1), true)
		got, err := s.Rollouts.Update(ctx, r.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			repoSameRollout(t, *ro, r)
			if err := ro.SetPercentage(60, s.at(5)); err != nil {
				return err
			}
			return ro.ChangeStatus(domain.RolloutPaused, fw, s.at(6))
		})
		repoNoErr(t, "update", err)
		want := r
		repoNoErr(t, "set", want.SetPercentage(60, s.at(5)))
		repoNoErr(t, "pause", want.ChangeStatus(domain.RolloutPaused, fw, s.at(6)))
		repoSameRollout(t, got, want)
		stored, err := s.Rollouts.Get(ctx, r.ID())
		repoNoErr(t, "get", err)
		repoSameRollout(t, stored, want)
		if stored.PausedReason() != domain.PausedManual {
			t.Errorf("paused reason %q, want manual", stored.PausedReason())
		}

		_, err = s.Rollouts.Update(ctx, r.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			_ = ro.ChangeStatus(domain.RolloutCancelled, fw, s.at(7))
			return errRepoBoom
		})
		if !errors.Is(err, errRepoBoom) {
			t.Fatalf("failing fn: err = %v, want fn's error", err)
		}
		stored, err = s.Rollouts.Get(ctx, r.ID())
		repoNoErr(t, "get", err)
		repoSameRollout(t, stored, want)

		for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
			_, err = s.Rollouts.Update(ctx, id, func(*domain.Rollout, domain.Firmware) error {
				t.Error("fn called for an unknown rollout")
				return nil
			})
			repoIsNotFound(t, "update "+id, err)
		}

		lost, cancel := context.WithCancel(ctx)
		_, err = s.Rollouts.Update(lost, r.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			cancel() // the lock is lost while fn runs
			return ro.SetPercentage(90, s.at(8))
		})
		if err == nil {
			t.Error("update whose context ended inside fn succeeded")
		}
		stored, err = s.Rollouts.Get(ctx, r.ID())
		repoNoErr(t, "get", err)
		repoSameRollout(t, stored, want)
	})

	t.Run("ConcurrentUpdatesSerialise", func(t *testing.T) {
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
		r := s.rollout(t, fw, domain.RolloutSpec{Percentage: 0}, s.at(1), true)
		const n = 40
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				_, err := s.Rollouts.Update(ctx, r.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
					p := ro.Percentage()
					time.Sleep(time.Millisecond) // widen the window for a lost update
					return ro.SetPercentage(p+1, s.at(2))
				})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			repoNoErr(t, "concurrent update", err)
		}
		got, err := s.Rollouts.Get(ctx, r.ID())
		repoNoErr(t, "get", err)
		if got.Percentage() != n {
			t.Errorf("percentage %d after %d increments: updates were lost", got.Percentage(), n)
		}
	})

	t.Run("Offers", func(t *testing.T) {
		model, other := repoName("model"), repoName("model")
		spec := domain.RolloutSpec{Percentage: 50}
		fwA := s.firmware(t, repoSpec(model, "1.1.0"), s.at(1), true)
		rA := s.rollout(t, fwA, spec, s.at(2), true)
		rA2 := s.rollout(t, fwA, domain.RolloutSpec{Percentage: 100}, s.at(3), true)
		fwB := s.firmware(t, repoSpec(model, "1.2.0"), s.at(1), true)
		rB := s.rollout(t, fwB, spec, s.at(2), true)
		fwC := s.firmware(t, repoSpec(model, "1.3.0"), s.at(1), true)
		s.rollout(t, fwC, spec, s.at(2), true)
		s.firmware(t, repoSpec(model, "1.4.0"), s.at(1), true) // no rollout
		fwE := s.firmware(t, repoSpec(model, "1.5.0"), s.at(1), true)
		rE := s.rollout(t, fwE, spec, s.at(2), true)
		fwX := s.firmware(t, repoSpec(other, "1.1.0"), s.at(1), true)
		rX := s.rollout(t, fwX, spec, s.at(2), true)

		_, err := s.Rollouts.Update(ctx, rA2.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			return ro.ChangeStatus(domain.RolloutPaused, fwA, s.at(4))
		})
		repoNoErr(t, "pause", err)
		_, err = s.Rollouts.Update(ctx, rB.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			return ro.ChangeStatus(domain.RolloutCancelled, fwB, s.at(4))
		})
		repoNoErr(t, "cancel", err)
		_, err = s.Firmwares.Update(ctx, fwC.ID(), func(f *domain.Firmware) error {
			f.Revoke(s.at(4))
			return nil
		})
		repoNoErr(t, "revoke", err)

		check := func(model string, want ...domain.Offer) {
			t.Helper()
			got, err := s.Rollouts.Offers(ctx, model)
			repoNoErr(t, "offers", err)
			byRollout := map[string]domain.Offer{}
			for _, o := range got {
				byRollout[o.Rollout.ID()] = o
			}
			if len(got) != len(want) || len(byRollout) != len(want) {
				t.Errorf("offers of %s: got %d, want %d", model, len(got), len(want))
			}
			for _, w := range want {
				g, ok := byRollout[w.Rollout.ID()]
				if !ok {
					t.Errorf("offers of %s miss rollout %s", model, w.Rollout.ID())
					continue
				}
				repoSameRollout(t, g.Rollout, w.Rollout)
				repoSameFirmware(t, g.Firmware, w.Firmware)
			}
		}
		check(model, domain.Offer{Firmware: fwA, Rollout: rA}, domain.Offer{Firmware: fwE, Rollout: rE})
		check(other, domain.Offer{Firmware: fwX, Rollout: rX})
		check(repoName("model"))

		// Pausing an offered rollout withdraws it; resuming brings it back.
		paused, err := s.Rollouts.Update(ctx, rE.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			return ro.ChangeStatus(domain.RolloutPaused, fwE, s.at(5))
		})
		repoNoErr(t, "pause", err)
		check(model, domain.Offer{Firmware: fwA, Rollout: rA})
		resumed, err := s.Rollouts.Update(ctx, rE.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			return ro.ChangeStatus(domain.RolloutActive, fwE, s.at(6))
		})
		repoNoErr(t, "resume", err)
		if paused.Status() != domain.RolloutPaused || resumed.Status() != domain.RolloutActive {
			t.Fatalf("statuses %s then %s", paused.Status(), resumed.Status())
		}
		check(model, domain.Offer{Firmware: fwA, Rollout: rA}, domain.Offer{Firmware: fwE, Rollout: resumed})
	})

	t.Run("CancelledContext", func(t *testing.T) {
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
		r := s.rollout(t, fw, domain.RolloutSpec{Percentage: 10}, s.at(1), false)
		if err := s.Rollouts.Create(repoCancelled(t), r); err == nil {
			t.Error("create with a cancelled context succeeded")
		}
		_, err := s.Rollouts.Get(ctx, r.ID())
		repoIsNotFound(t, "rollout created under a cancelled context", err)
	})
}

// ---------------------------------------------------------------- tasks

func (s *repoSuite) tasks(t *testing.T) {
	ctx := t.Context()

	t.Run("GetActiveMissing", func(t *testing.T) {
		for _, id := range []string{uuid.NewString(), "not-a-uuid", ""} {
			_, err := s.Tasks.Get(ctx, id)
			repoIsNotFound(t, "get "+id, err)
		}
		_, err := s.Tasks.Active(ctx, repoName("dev"))
		repoIsNotFound(t, "active of an unknown device", err)
		d := s.device(t, repoName("model"), "1.0.0")
		_, err = s.Tasks.Active(ctx, d.ID())
		repoIsNotFound(t, "active of a device without tasks", err)
	})

	t.Run("ReplaceActiveCreateReuseSupersede", func(t *testing.T) {
		model := repoName("model")
		d := s.device(t, model, "1.0.0")
		o1, o2 := s.offer(t, model, "2.0.0"), s.offer(t, model, "3.0.0")

		t1 := s.newTask(t, d.ID(), o1, 1, s.at(10))
		first, created, err := s.Tasks.ReplaceActive(ctx, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			if active != nil {
				t.Errorf("a device without tasks has active task %s", active.ID())
			}
			return &t1, nil
		}))
		repoNoErr(t, "create", err)
		if !created {
			t.Fatal("created = false for the first task")
		}
		want1 := t1.Record()
		want1.ActionID = first.ActionID()
		if first.ActionID() <= 0 {
			t.Errorf("action id %d, want positive", first.ActionID())
		}
		repoSameTask(t, first, want1)
		for _, get := range []func() (domain.Task, error){
			func() (domain.Task, error) { return s.Tasks.Get(ctx, t1.ID()) },
			func() (domain.Task, error) { return s.Tasks.Active(ctx, d.ID()) },
		} {
			got, err := get()
			repoNoErr(t, "read back", err)
			repoSameTask(t, got, want1)
		}

		// Reuse: fn sees the active task and inserts nothing.
		reused, created, err := s.Tasks.ReplaceActive(ctx, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			if active == nil {
				t.Fatal("fn did not get the active task")
			}
			repoSameTask(t, *active, want1)
			return nil, nil
		}))
		repoNoErr(t, "reuse", err)
		if created {
			t.Error("created = true when fn inserted nothing")
		}
		repoSameTask(t, reused, want1)

		// Supersede: fn cancels the pending task and inserts the new one.
		t2 := s.newTask(t, d.ID(), o2, 1, s.at(11))
		second, created, err := s.Tasks.ReplaceActive(ctx, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			if err := active.Cancel(domain.CodeSuperseded, "a newer firmware is rolled out", s.at(11)); err != nil {
				return nil, err
			}
			return &t2, nil
		}))
		repoNoErr(t, "supersede", err)
		if !created {
			t.Fatal("created = false for the superseding task")
		}
		want2 := t2.Record()
		want2.ActionID = second.ActionID()
		repoSameTask(t, second, want2)
		if second.ActionID() <= first.ActionID() {
			t.Errorf("action ids %d then %d: not increasing", first.ActionID(), second.ActionID())
		}
		cancelled := want1
		cancelled.Status, cancelled.ErrorCode, cancelled.ErrorMessage, cancelled.UpdatedAt =
			domain.TaskCancelled, domain.CodeSuperseded, "a newer firmware is rolled out", s.at(11)
		got, err := s.Tasks.Get(ctx, t1.ID())
		repoNoErr(t, "get superseded", err)
		repoSameTask(t, got, cancelled)
		got, err = s.Tasks.Active(ctx, d.ID())
		repoNoErr(t, "active", err)
		repoSameTask(t, got, want2)
	})

	t.Run("ReplaceActiveInsertLosesToActiveTask", func(t *testing.T) {
		model := repoName("model")
		d := s.device(t, model, "1.0.0")
		o1, o2 := s.offer(t, model, "2.0.0"), s.offer(t, model, "3.0.0")
		started := s.insert(t, s.newTask(t, d.ID(), o1, 1, s.at(10)))
		started = s.drive(t, started.ID(), domain.TaskDownloading, s.at(12))

		// fn does not (cannot) cancel the started task but still asks for an insert.
		t3 := s.newTask(t, d.ID(), o2, 1, s.at(13))
		got, created, err := s.Tasks.ReplaceActive(ctx, d.ID(), onActive(func(*domain.Task) (*domain.Task, error) { return &t3, nil }))
		repoNoErr(t, "replace", err)
		if created {
			t.Error("created = true although the device still has an active task")
		}
		repoSameTask(t, got, started.Record())
		_, err = s.Tasks.Get(ctx, t3.ID())
		repoIsNotFound(t, "the losing task", err)
		active, err := s.Tasks.Active(ctx, d.ID())
		repoNoErr(t, "active", err)
		repoSameTask(t, active, started.Record())
	})

	t.Run("ReplaceActiveCancelWithoutInsert", func(t *testing.T) {
		model := repoName("model")
		d := s.device(t, model, "1.0.0")
		pending := s.insert(t, s.newTask(t, d.ID(), s.offer(t, model, "2.0.0"), 1, s.at(10)))
		got, created, err := s.Tasks.ReplaceActive(ctx, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			return nil, active.Cancel(domain.CodeFirmwareRevoked, "the firmware was revoked", s.at(14))
		}))
		repoNoErr(t, "cancel", err)
		if created {
			t.Error("created = true when fn inserted nothing")
		}
		want := pending.Record()
		want.Status, want.ErrorCode, want.ErrorMessage, want.UpdatedAt = domain.TaskCancelled, domain.CodeFirmwareRevoked, "the firmware was revoked", s.at(14)
		repoSameTask(t, got, want)
		stored, err := s.Tasks.Get(ctx, pending.ID())
		repoNoErr(t, "get", err)
		repoSameTask(t, stored, want)
		_, err = s.Tasks.Active(ctx, d.ID())
		repoIsNotFound(t, "active after cancelling", err)
	})

	t.Run("ReplaceActiveNothingAtAll", func(t *testing.T) {
		d := s.device(t, repoName("model"), "1.0.0")
		got, created, err := s.Tasks.ReplaceActive(ctx, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			if active != nil {
				t.Errorf("unexpected active task %s", active.ID())
			}
			return nil, nil
		}))
		repoNoErr(t, "replace", err)
		if created || got.ID() != "" {
			t.Errorf("got task %q created=%v, want the zero task", got.ID(), created)
		}
	})

	t.Run("ReplaceActiveFnErrorStoresNothing", func(t *testing.T) {
		model := repoName("model")
		d := s.device(t, model, "1.0.0")
		o := s.offer(t, model, "2.0.0")
		pending := s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10)))
		t2 := s.newTask(t, d.ID(), s.offer(t, model, "3.0.0"), 1, s.at(11))
		_, _, err := s.Tasks.ReplaceActive(ctx, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			if err := active.Cancel(domain.CodeSuperseded, "superseded", s.at(11)); err != nil {
				return nil, err
			}
			return &t2, errRepoBoom
		}))
		if !errors.Is(err, errRepoBoom) {
			t.Fatalf("err = %v, want fn's error", err)
		}
		got, err := s.Tasks.Get(ctx, pending.ID())
		repoNoErr(t, "get", err)
		repoSameTask(t, got, pending.Record())
		_, err = s.Tasks.Get(ctx, t2.ID())
		repoIsNotFound(t, "task of a failed fn", err)
	})

	t.Run("ReplaceActiveUnknownReferences", func(t *testing.T) {
		model := repoName("model")
		o := s.offer(t, model, "2.0.0")
		unstoredFw := s.firmware(t, repoSpec(model, "9.0.0"), s.at(1), false)
		unstoredRollout := s.rollout(t, o.Firmware, domain.RolloutSpec{Percentage: 100}, s.at(1), false)
		otherOffer := s.offer(t, model, "3.0.0")
		cases := map[string]struct {
			deviceID string
			offer    domain.Offer
		}{
			"device":   {repoName("dev"), o},
			"firmware": {"", domain.Offer{Firmware: unstoredFw, Rollout: o.Rollout}},
			"rollout":  {"", domain.Offer{Firmware: o.Firmware, Rollout: unstoredRollout}},
			// A task's rollout must be a rollout of the task's firmware.
			"rollout of that firmware": {"", domain.Offer{Firmware: o.Firmware, Rollout: otherOffer.Rollout}},
		}
		for name, c := range cases {
			t.Run(name, func(t *testing.T) {
				deviceID := c.deviceID
				var pending domain.Task
				if deviceID == "" {
					deviceID = s.device(t, model, "1.0.0").ID()
					pending = s.insert(t, s.newTask(t, deviceID, o, 1, s.at(5)))
				}
				tk := s.newTask(t, deviceID, c.offer, 1, s.at(6))
				_, _, err := s.Tasks.ReplaceActive(ctx, deviceID, onActive(func(active *domain.Task) (*domain.Task, error) {
					if active != nil {
						if err := active.Cancel(domain.CodeSuperseded, "superseded", s.at(6)); err != nil {
							return nil, err
						}
					}
					return &tk, nil
				}))
				repoIsNotFound(t, "task with an unknown "+name, err)
				_, err = s.Tasks.Get(ctx, tk.ID())
				repoIsNotFound(t, "refused task", err)
				if pending.ID() != "" { // the cancellation was rolled back with the insert
					got, err := s.Tasks.Active(ctx, deviceID)
					repoNoErr(t, "active", err)
					repoSameTask(t, got, pending.Record())
				} else {
					_, err = s.Tasks.Active(ctx, deviceID)
					repoIsNotFound(t, "active", err)
				}
			})
		}
	})

	t.Run("ReplaceActiveTruncatesTimes", func(t *testing.T) {
		model := repoName("model")
		o := s.offer(t, model, "2.0.0")
		d := s.device(t, model, "1.0.0")
		us := repoUs(s.base)
		rec := s.newTask(t, d.ID(), o, 1, us).Record()
		rec.CreatedAt, rec.UpdatedAt = us.Add(999), us.Add(998) // as a rehydrated task could be
		tk := domain.RehydrateTask(rec)
		got, created, err := s.Tasks.ReplaceActive(ctx, d.ID(), onActive(func(*domain.Task) (*domain.Task, error) { return &tk, nil }))
		repoNoErr(t, "insert", err)
		if !created || !got.CreatedAt().Equal(us) || !got.UpdatedAt().Equal(us) {
			t.Errorf("created=%v, times %v, %v; want %v", created, got.CreatedAt(), got.UpdatedAt(), us)
		}
		stored, err := s.Tasks.Get(ctx, tk.ID())
		repoNoErr(t, "get", err)
		if !stored.CreatedAt().Equal(got.CreatedAt()) || !stored.UpdatedAt().Equal(got.UpdatedAt()) {
			t.Errorf("stored times %v, %v differ from the answer", stored.CreatedAt(), stored.UpdatedAt())
		}
	})

	t.Run("ReplaceActiveDuplicateID", func(t *testing.T) {
		model := repoName("model")
		o := s.offer(t, model, "2.0.0")
		d := s.device(t, model, "1.0.0")
		first := s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10)))
		first = s.drive(t, first.ID(), domain.TaskFailed, s.at(11))
		same, err := domain.NewTask(first.ID(), d.ID(), o, 2, s.at(12))
		repoNoErr(t, "new task", err)
		if _, _, err := s.Tasks.ReplaceActive(ctx, d.ID(), onActive(func(*domain.Task) (*domain.Task, error) { return &same, nil })); err == nil {
			t.Error("a second task with a taken id was stored")
		}
		got, err := s.Tasks.Get(ctx, first.ID())
		repoNoErr(t, "get", err)
		repoSameTask(t, got, first.Record())
		_, err = s.Tasks.Active(ctx, d.ID())
		repoIsNotFound(t, "active after a refused insert", err)
	})

	t.Run("ReplaceActiveContext", func(t *testing.T) {
		model := repoName("model")
		d := s.device(t, model, "1.0.0")
		pending := s.insert(t, s.newTask(t, d.ID(), s.offer(t, model, "2.0.0"), 1, s.at(10)))
		o2 := s.offer(t, model, "3.0.0")

		tk := s.newTask(t, d.ID(), o2, 1, s.at(11))
		_, _, err := s.Tasks.ReplaceActive(repoCancelled(t), d.ID(), onActive(func(*domain.Task) (*domain.Task, error) {
			t.Error("fn called under a cancelled context")
			return &tk, nil
		}))
		if err == nil {
			t.Error("replace with a cancelled context succeeded")
		}

		// The lock is lost while fn runs: the transaction must roll back.
		lost, cancel := context.WithCancel(ctx)
		_, _, err = s.Tasks.ReplaceActive(lost, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			if err := active.Cancel(domain.CodeSuperseded, "superseded", s.at(11)); err != nil {
				return nil, err
			}
			cancel()
			return &tk, nil
		}))
		if err == nil {
			t.Error("replace whose context ended inside fn succeeded")
		}
		_, err = s.Tasks.Get(ctx, tk.ID())
		repoIsNotFound(t, "task inserted after the context ended", err)
		got, err := s.Tasks.Active(ctx, d.ID())
		repoNoErr(t, "active", err)
		repoSameTask(t, got, pending.Record())
	})

	t.Run("ReplaceActiveRace", func(t *testing.T) {
		for _, alwaysInsert := range []bool{false, true} {
			name := "InsertWhenNone"
			if alwaysInsert {
				name = "AlwaysInsert"
			}
			t.Run(name, func(t *testing.T) { s.replaceActiveRace(t, alwaysInsert) })
		}
	})

	t.Run("Update", func(t *testing.T) {
		model := repoName("model")
		d := s.device(t, model, "1.0.0")
		o := s.offer(t, model, "2.0.0")
		tk := s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10)))

		got, err := s.Tasks.Update(ctx, tk.ID(), func(x *domain.Task) error {
			repoSameTask(t, *x, tk.Record())
			_, err := x.ApplyEvent(repoEvent(t, "e1", "downloading", repoInt(30)), nil, s.at(11))
			return err
		})
		repoNoErr(t, "update", err)
		want := tk.Record()
		want.Status, want.Progress, want.UpdatedAt = domain.TaskDownloading, 30, s.at(11)
		repoSameTask(t, got, want)
		stored, err := s.Tasks.Get(ctx, tk.ID())
		repoNoErr(t, "get", err)
		repoSameTask(t, stored, want)

		_, err = s.Tasks.Update(ctx, tk.ID(), func(x *domain.Task) error {
			_, _ = x.ApplyEvent(repoEvent(t, "e2", "downloaded", nil), nil, s.at(12))
			return errRepoBoom
		})
		if !errors.Is(err, errRepoBoom) {
			t.Fatalf("failing fn: err = %v, want fn's error", err)
		}
		stored, err = s.Tasks.Get(ctx, tk.ID())
		repoNoErr(t, "get", err)
		repoSameTask(t, stored, want)

		lost, cancel := context.WithCancel(ctx)
		_, err = s.Tasks.Update(lost, tk.ID(), func(x *domain.Task) error {
			cancel()
			_, err := x.ApplyEvent(repoEvent(t, "e3", "installing", nil), nil, s.at(13))
			return err
		})
		if err == nil {
			t.Error("update whose context ended inside fn succeeded")
		}
		stored, err = s.Tasks.Get(ctx, tk.ID())
		repoNoErr(t, "get", err)
		repoSameTask(t, stored, want)

		for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
			_, err = s.Tasks.Update(ctx, id, func(*domain.Task) error {
				t.Error("fn called for an unknown task")
				return nil
			})
			repoIsNotFound(t, "update "+id, err)
		}

		// A task that ends frees the device's active slot.
		s.drive(t, tk.ID(), domain.TaskFailed, s.at(14))
		_, err = s.Tasks.Active(ctx, d.ID())
		repoIsNotFound(t, "active after failure", err)
		next := s.insert(t, s.newTask(t, d.ID(), o, 2, s.at(15)))
		if next.ActionID() <= tk.ActionID() {
			t.Errorf("action ids %d then %d: not increasing", tk.ActionID(), next.ActionID())
		}
	})

	t.Run("ApplyEvent", func(t *testing.T) { s.applyEvent(t) })

	t.Run("ConcurrentEventsSerialise", func(t *testing.T) {
		model := repoName("model")
		d := s.device(t, model, "1.0.0")
		tk := s.insert(t, s.newTask(t, d.ID(), s.offer(t, model, "2.0.0"), 1, s.at(10)))
		const n = 40
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				ev := repoEvent(t, uuid.NewString(), "downloading", nil)
				_, err := s.Tasks.ApplyEvent(ctx, tk.ID(), ev, func(x *domain.Task, prior *domain.Event) (bool, error) {
					step := repoEvent(t, ev.ID(), "downloading", repoInt(x.Progress()+1))
					time.Sleep(time.Millisecond) // widen the window for a lost update
					return x.ApplyEvent(step, prior, s.at(11+i))
				}, nil)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			repoNoErr(t, "concurrent event", err)
		}
		got, err := s.Tasks.Get(ctx, tk.ID())
		repoNoErr(t, "get", err)
		if got.Progress() != n {
			t.Errorf("progress %d after %d one-step events: updates were lost", got.Progress(), n)
		}
	})

	t.Run("List", func(t *testing.T) { s.list(t) })
	t.Run("RolloutStats", func(t *testing.T) { s.rolloutStats(t) })
	t.Run("FailedCounts", func(t *testing.T) { s.failedCounts(t) })
}

func (s *repoSuite) replaceActiveRace(t *testing.T, alwaysInsert bool) {
	ctx := t.Context()
	model := repoName("model")
	d := s.device(t, model, "1.0.0")
	o := s.offer(t, model, "2.0.0")
	const n = 128
	type outcome struct {
		task    domain.Task
		created bool
		err     error
	}
	results := make([]outcome, n)
	mine := make([]domain.Task, n)
	for i := range mine {
		mine[i] = s.newTask(t, d.ID(), o, 1, s.at(20+i))
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			got, created, err := s.Tasks.ReplaceActive(ctx, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
				if active != nil && !alwaysInsert {
					return nil, nil
				}
				return &mine[i], nil
			}))
			results[i] = outcome{got, created, err}
		})
	}
	close(start)
	wg.Wait()

	winners := 0
	winner := ""
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("goroutine %d: %v", i, r.err)
		}
		if r.created {
			winners++
			winner = r.task.ID()
			if winner != mine[i].ID() {
				t.Errorf("goroutine %d created %s, not its own task %s", i, winner, mine[i].ID())
			}
		}
	}
	if winners != 1 {
		t.Fatalf("%d goroutines created a task, want exactly 1", winners)
	}
	for i, r := range results {
		if r.task.ID() != winner {
			t.Errorf("goroutine %d got task %s, want the winner %s", i, r.task.ID(), winner)
		}
	}
	active, err := s.Tasks.Active(ctx, d.ID())
	repoNoErr(t, "active", err)
	if active.ID() != winner {
		t.Errorf("active task %s, want the winner %s", active.ID(), winner)
	}
	all, err := s.Tasks.List(ctx, ports.TaskFilter{DeviceID: d.ID(), Limit: 10 * n})
	repoNoErr(t, "list", err)
	if len(all) != 1 || all[0].ID() != winner || !all[0].Status().IsActive() {
		t.Errorf("device has tasks %v, want only the winner %s", repoTaskIDs(all), winner)
	}
}

func (s *repoSuite) applyEvent(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")
	o := s.offer(t, model, "2.0.0")
	d := s.device(t, model, "1.0.0")
	tk := s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10)))

	// apply runs ApplyEvent with the domain's rule, reporting the prior it saw.
	apply := func(id string, ev domain.Event, at time.Time) (domain.Task, *domain.Event, error) {
		var seen *domain.Event
		calls := 0
		got, err := s.Tasks.ApplyEvent(ctx, id, ev, func(x *domain.Task, prior *domain.Event) (bool, error) {
			calls++
			seen = prior
			return x.ApplyEvent(ev, prior, at)
		}, nil)
		if calls != 1 {
			t.Errorf("fn called %d times, want once", calls)
		}
		return got, seen, err
	}

	ev1 := repoEvent(t, "evt-1", "downloading", repoInt(10))
	got, prior, err := apply(tk.ID(), ev1, s.at(11))
	repoNoErr(t, "first event", err)
	if prior != nil {
		t.Errorf("a new event id came with prior event %q", prior.ID())
	}
	want := tk.Record()
	want.Status, want.Progress, want.UpdatedAt = domain.TaskDownloading, 10, s.at(11)
	repoSameTask(t, got, want)
	stored, err := s.Tasks.Get(ctx, tk.ID())
	repoNoErr(t, "get", err)
	repoSameTask(t, stored, want)

	// A replay sees the recorded event and changes nothing.
	got, prior, err = apply(tk.ID(), ev1, s.at(12))
	repoNoErr(t, "replay", err)
	if prior == nil || prior.ID() != ev1.ID() || !prior.SameBody(ev1) {
		t.Fatalf("replay: prior = %+v, want the recorded event", prior)
	}
	repoSameTask(t, got, want)

	// The same id with another body is a conflict, and changes nothing.
	ev1b := repoEvent(t, "evt-1", "downloading", repoInt(20))
	_, prior, err = apply(tk.ID(), ev1b, s.at(13))
	if !errors.Is(err, domain.ErrIdempotencyConflict) {
		t.Errorf("conflicting reuse: err = %v, want domain.ErrIdempotencyConflict", err)
	}
	if prior == nil || prior.SameBody(ev1b) {
		t.Errorf("conflicting reuse: prior = %+v, want the recorded, different event", prior)
	}
	stored, err = s.Tasks.Get(ctx, tk.ID())
	repoNoErr(t, "get", err)
	repoSameTask(t, stored, want)

	// fn reporting no change stores neither the task nor the event.
	ev2 := repoEvent(t, "evt-2", "downloaded", nil)
	_, err = s.Tasks.ApplyEvent(ctx, tk.ID(), ev2, func(x *domain.Task, _ *domain.Event) (bool, error) {
		_, err := x.ApplyEvent(ev2, nil, s.at(14))
		return false, err
	}, nil)
	repoNoErr(t, "unchanged", err)
	stored, err = s.Tasks.Get(ctx, tk.ID())
	repoNoErr(t, "get", err)
	repoSameTask(t, stored, want)
	// fn failing stores nothing either.
	ev3 := repoEvent(t, "evt-3", "installing", nil)
	_, err = s.Tasks.ApplyEvent(ctx, tk.ID(), ev3, func(x *domain.Task, _ *domain.Event) (bool, error) {
		_, _ = x.ApplyEvent(ev3, nil, s.at(15))
		return true, errRepoBoom
	}, nil)
	if !errors.Is(err, errRepoBoom) {
		t.Fatalf("failing fn: err = %v, want fn's error", err)
	}
	stored, err = s.Tasks.Get(ctx, tk.ID())
	repoNoErr(t, "get", err)
	repoSameTask(t, stored, want)
	// So neither event id was recorded: both apply afresh.
	got, prior, err = apply(tk.ID(), ev2, s.at(16))
	repoNoErr(t, "event after no-change", err)
	if prior != nil {
		t.Error("an event fn reported unchanged was recorded")
	}
	want.Status, want.Progress, want.UpdatedAt = domain.TaskDownloaded, 0, s.at(16)
	repoSameTask(t, got, want)
	got, prior, err = apply(tk.ID(), ev3, s.at(17))
	repoNoErr(t, "event after failure", err)
	if prior != nil {
		t.Error("an event whose fn failed was recorded")
	}
	want.Status, want.UpdatedAt = domain.TaskInstalling, s.at(17)
	repoSameTask(t, got, want)

	// Event ids are scoped to their task.
	other := s.device(t, model, "1.0.0")
	otk := s.insert(t, s.newTask(t, other.ID(), o, 1, s.at(10)))
	_, prior, err = apply(otk.ID(), ev1, s.at(18))
	repoNoErr(t, "same event id on another task", err)
	if prior != nil {
		t.Error("another task's event was given as prior")
	}

	// A context that ends inside fn (a lost lock) stores nothing.
	ev4 := repoEvent(t, "evt-4", "succeeded", nil)
	lost, cancel := context.WithCancel(ctx)
	_, err = s.Tasks.ApplyEvent(lost, tk.ID(), ev4, func(x *domain.Task, prior *domain.Event) (bool, error) {
		cancel()
		return x.ApplyEvent(ev4, prior, s.at(19))
	}, nil)
	if err == nil {
		t.Error("event whose context ended inside fn was applied")
	}
	stored, err = s.Tasks.Get(ctx, tk.ID())
	repoNoErr(t, "get", err)
	repoSameTask(t, stored, want)

	// A final event ends the task and frees the device's active slot.
	got, prior, err = apply(tk.ID(), ev4, s.at(20))
	repoNoErr(t, "final event", err)
	if prior != nil {
		t.Error("an event applied under an ended context was recorded")
	}
	want.Status, want.Progress, want.UpdatedAt = domain.TaskSucceeded, 100, s.at(20)
	repoSameTask(t, got, want)
	_, err = s.Tasks.Active(ctx, d.ID())
	repoIsNotFound(t, "active after success", err)

	for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
		_, err = s.Tasks.ApplyEvent(ctx, id, ev1, func(*domain.Task, *domain.Event) (bool, error) {
			t.Error("fn called for an unknown task")
			return true, nil
		}, nil)
		repoIsNotFound(t, "event on "+id, err)
	}
}

func (s *repoSuite) list(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")
	fw := s.firmware(t, repoSpec(model, "2.0.0"), s.at(1), true)
	r1 := s.rollout(t, fw, domain.RolloutSpec{Percentage: 100}, s.at(2), true)
	r2 := s.rollout(t, fw, domain.RolloutSpec{Percentage: 100}, s.at(2), true)
	o1, o2 := domain.Offer{Firmware: fw, Rollout: r1}, domain.Offer{Firmware: fw, Rollout: r2}
	devs := make([]domain.Device, 4)
	for i := range devs {
		devs[i] = s.device(t, model, "1.0.0")
	}
	d4 := s.device(t, model, "1.0.0")

	// Six rounds; in each, every device gets a task at the same instant, so
	// the id breaks ties. Each new task supersedes the device's pending one.
	var ids []string
	var lastAction int64
	for k := range 6 {
		for _, d := range devs {
			tk := s.insert(t, s.newTask(t, d.ID(), o1, k+1, s.at(100+k)))
			if tk.ActionID() <= lastAction {
				t.Errorf("action id %d after %d: not increasing", tk.ActionID(), lastAction)
			}
			lastAction = tk.ActionID()
			ids = append(ids, tk.ID())
		}
	}
	r2ids := []string{
		s.insert(t, s.newTask(t, d4.ID(), o2, 1, s.at(100))).ID(),
		s.insert(t, s.newTask(t, d4.ID(), o2, 2, s.at(101))).ID(),
	}

	stored := map[string]domain.Task{}
	for _, id := range append(slices.Clone(ids), r2ids...) {
		tk, err := s.Tasks.Get(ctx, id)
		repoNoErr(t, "get", err)
		stored[id] = tk
	}
	// order sorts ids as the listing must: (created_at, id).
	order := func(ids []string) []string {
		out := slices.Clone(ids)
		slices.SortFunc(out, func(a, b string) int {
			if c := stored[a].CreatedAt().Compare(stored[b].CreatedAt()); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		return out
	}
	check := func(what string, f ports.TaskFilter, want []string) {
		t.Helper()
		got, err := s.Tasks.List(ctx, f)
		repoNoErr(t, what, err)
		if !slices.Equal(repoTaskIDs(got), want) {
			t.Errorf("%s:\n got %v\nwant %v", what, repoTaskIDs(got), want)
			return
		}
		for _, tk := range got {
			repoSameTask(t, tk, stored[tk.ID()].Record())
		}
	}
	pending, cancelled := domain.TaskPending, domain.TaskCancelled
	byRollout := order(ids)

	// Walk the rollout's tasks in pages of 5: 24 tasks, every page boundary
	// but one falls inside a group sharing created_at.
	var walked []string
	f := ports.TaskFilter{RolloutID: r1.ID(), Limit: 5}
	for page := 0; ; page++ {
		if page > len(ids) {
			t.Fatal("pagination does not end")
		}
		got, err := s.Tasks.List(ctx, f)
		repoNoErr(t, "page", err)
		if len(got) > f.Limit {
			t.Fatalf("page of %d tasks, limit %d", len(got), f.Limit)
		}
		if len(got) == 0 {
			break
		}
		for _, tk := range got {
			repoSameTask(t, tk, stored[tk.ID()].Record())
			walked = append(walked, tk.ID())
		}
		last := got[len(got)-1]
		f.After = &ports.TaskCursor{CreatedAt: last.CreatedAt(), ID: last.ID()}
	}
	if !slices.Equal(walked, byRollout) {
		t.Errorf("pages walked\n %v\nwant\n %v", walked, byRollout)
	}
	seen := map[string]bool{}
	for _, id := range walked {
		if seen[id] {
			t.Errorf("task %s listed twice", id)
		}
		seen[id] = true
	}

	check("rollout, one page", ports.TaskFilter{RolloutID: r1.ID(), Limit: 100}, byRollout)
	check("rollout, limit 3", ports.TaskFilter{RolloutID: r1.ID(), Limit: 3}, byRollout[:3])
	check("rollout, after the 7th", ports.TaskFilter{RolloutID: r1.ID(), Limit: 4,
		After: &ports.TaskCursor{CreatedAt: stored[byRollout[6]].CreatedAt(), ID: byRollout[6]}}, byRollout[7:11])
	check("rollout, after the last", ports.TaskFilter{RolloutID: r1.ID(), Limit: 5,
		After: &ports.TaskCursor{CreatedAt: stored[byRollout[23]].CreatedAt(), ID: byRollout[23]}}, []string{})
	check("other rollout", ports.TaskFilter{RolloutID: r2.ID(), Limit: 100}, order(r2ids))
	check("rollout without tasks", ports.TaskFilter{RolloutID: uuid.NewString(), Limit: 100}, []string{})

	var dev0, dev0Cancelled, pendingIDs []string
	for _, id := range byRollout {
		tk := stored[id]
		if tk.DeviceID() == devs[0].ID() {
			dev0 = append(dev0, id)
			if tk.Status() == domain.TaskCancelled {
				dev0Cancelled = append(dev0Cancelled, id)
			}
		}
		if tk.Status() == domain.TaskPending {
			pendingIDs = append(pendingIDs, id)
		}
	}
	if len(dev0) != 6 || len(dev0Cancelled) != 5 || len(pendingIDs) != 4 {
		t.Fatalf("fixture: %d tasks of device 0 (%d cancelled), %d pending", len(dev0), len(dev0Cancelled), len(pendingIDs))
	}
	check("device", ports.TaskFilter{DeviceID: devs[0].ID(), Limit: 100}, dev0)
	check("device, limit one short", ports.TaskFilter{DeviceID: devs[0].ID(), Limit: 5}, dev0[:5])
	check("device, page 2", ports.TaskFilter{DeviceID: devs[0].ID(), Limit: 2,
		After: &ports.TaskCursor{CreatedAt: stored[dev0[1]].CreatedAt(), ID: dev0[1]}}, dev0[2:4])
	check("other device", ports.TaskFilter{DeviceID: d4.ID(), Limit: 100}, order(r2ids))
	check("device and rollout", ports.TaskFilter{DeviceID: d4.ID(), RolloutID: r1.ID(), Limit: 100}, []string{})
	check("rollout and status", ports.TaskFilter{RolloutID: r1.ID(), Status: &pending, Limit: 100}, pendingIDs)
	check("device and status", ports.TaskFilter{DeviceID: devs[0].ID(), Status: &cancelled, Limit: 100}, dev0Cancelled)
	check("all three", ports.TaskFilter{DeviceID: devs[0].ID(), RolloutID: r1.ID(), Status: &pending, Limit: 100}, dev0[5:])
	check("other rollout, status", ports.TaskFilter{RolloutID: r2.ID(), Status: &cancelled, Limit: 100}, r2ids[:1])
	check("unknown device", ports.TaskFilter{DeviceID: repoName("dev"), Limit: 100}, []string{})
}

func (s *repoSuite) rolloutStats(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")
	o := s.offer(t, model, "2.0.0")
	r2 := s.rollout(t, o.Firmware, domain.RolloutSpec{Percentage: 100}, s.at(3), true)
	empty := s.rollout(t, o.Firmware, domain.RolloutSpec{Percentage: 100}, s.at(3), true)

	statuses := []domain.TaskStatus{
		domain.TaskPending, domain.TaskDownloading, domain.TaskDownloading, domain.TaskDownloaded,
		domain.TaskInstalling, domain.TaskSucceeded, domain.TaskSucceeded, domain.TaskSucceeded,
		domain.TaskFailed, domain.TaskFailed, domain.TaskCancelled,
	}
	for i, st := range statuses {
		d := s.device(t, model, "1.0.0")
		tk := s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10+i)))
		s.drive(t, tk.ID(), st, s.at(30+i))
	}
	// A task of another rollout of the same firmware counts there only.
	s.insert(t, s.newTask(t, s.device(t, model, "1.0.0").ID(), domain.Offer{Firmware: o.Firmware, Rollout: r2}, 1, s.at(10)))

	for _, c := range []struct {
		id   string
		want domain.TaskStats
	}{
		{o.Rollout.ID(), domain.TaskStats{Pending: 1, Downloading: 2, Downloaded: 1, Installing: 1, Succeeded: 3, Failed: 2, Cancelled: 1}},
		{r2.ID(), domain.TaskStats{Pending: 1}},
		{empty.ID(), domain.TaskStats{}},
	} {
		got, err := s.Tasks.RolloutStats(ctx, c.id)
		repoNoErr(t, "stats", err)
		if got != c.want {
			t.Errorf("stats of %s: got %+v, want %+v", c.id, got, c.want)
		}
	}
}

func (s *repoSuite) failedCounts(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")
	oA, oB, oC := s.offer(t, model, "2.0.0"), s.offer(t, model, "2.1.0"), s.offer(t, model, "2.2.0")
	oA2 := domain.Offer{Firmware: oA.Firmware, Rollout: s.rollout(t, oA.Firmware, domain.RolloutSpec{Percentage: 100}, s.at(3), true)}
	d := s.device(t, model, "1.0.0")

	// Failures count across rollouts of one firmware; cancellations and
	// successes do not count; the active task is not a failure.
	steps := []struct {
		offer domain.Offer
		to    domain.TaskStatus
	}{
		{oA, domain.TaskFailed}, {oA2, domain.TaskFailed}, {oA, domain.TaskCancelled},
		{oB, domain.TaskFailed}, {oB, domain.TaskSucceeded}, {oC, domain.TaskPending},
	}
	for i, st := range steps {
		tk := s.insert(t, s.newTask(t, d.ID(), st.offer, i+1, s.at(10+i)))
		s.drive(t, tk.ID(), st.to, s.at(10+i))
	}
	// Another device's failure is not this device's.
	other := s.device(t, model, "1.0.0")
	otk := s.insert(t, s.newTask(t, other.ID(), oC, 1, s.at(10)))
	s.drive(t, otk.ID(), domain.TaskFailed, s.at(11))

	got, err := s.Tasks.FailedCounts(ctx, d.ID())
	repoNoErr(t, "failed counts", err)
	want := map[string]int{oA.Firmware.ID(): 2, oB.Firmware.ID(): 1}
	if !maps.Equal(got, want) {
		t.Errorf("failed counts %v, want %v", got, want)
	}
	none, err := s.Tasks.FailedCounts(ctx, repoName("dev"))
	repoNoErr(t, "failed counts of an unknown device", err)
	if len(none) != 0 {
		t.Errorf("an unknown device has failures %v", none)
	}
}
