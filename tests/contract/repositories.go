package contract

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
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
	Tasks     application.TaskStore
	// Open lists the open rollouts for the rollout sweep, as production
	// wires it (the uncached store).
	Open application.OpenRollouts
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
	d, err := domain.NewDevice(asDeviceID(repoName("dev")), model, version, s.hash(t), s.at(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Devices.Create(t.Context(), d, domain.AuditRecord{}); err != nil {
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
	f, err := domain.NewFirmware(domain.UUIDOf(uuid.New()), spec, at)
	if err != nil {
		t.Fatal(err)
	}
	if store {
		if err := s.Firmwares.Create(t.Context(), f, domain.AuditRecord{}); err != nil {
			t.Fatalf("create firmware: %v", err)
		}
	}
	return f
}

// rollout starts a rollout of fw (without storing it when store is false).
func (s *repoSuite) rollout(t *testing.T, fw domain.Firmware, spec domain.RolloutSpec, at time.Time, store bool) domain.Rollout {
	t.Helper()
	r, err := domain.NewRollout(domain.UUIDOf(uuid.New()), fw, spec, at)
	if err != nil {
		t.Fatal(err)
	}
	if store {
		if err := s.Rollouts.Create(t.Context(), r, domain.AuditRecord{}); err != nil {
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

// watchedOffer is offer with a failure threshold: a rollout that has
// something to judge when one of its tasks ends (domain.Rollout.Evaluates).
func (s *repoSuite) watchedOffer(t *testing.T, model, version string) domain.Offer {
	t.Helper()
	fw := s.firmware(t, repoSpec(model, version), s.at(1), true)
	threshold := 50
	spec := domain.RolloutSpec{Percentage: 100, FailureThresholdPercent: &threshold}
	return domain.Offer{Firmware: fw, Rollout: s.rollout(t, fw, spec, s.at(2), true)}
}

// stagedOffer is offer with two stages whose first gate held at at(2),
// soaking until next: the tasks created from next on count in the second
// stage, started at next (domain.Rollout.StageAt), before any event
// stores the advance; the earlier ones in the first, started at at(2).
func (s *repoSuite) stagedOffer(t *testing.T, model, version string, next time.Time) domain.Offer {
	t.Helper()
	fw := s.firmware(t, repoSpec(model, version), s.at(1), true)
	spec := domain.RolloutSpec{Stages: []domain.StageRequest{
		{Percentage: new(50), MinFinished: new(1), SuccessPercent: new(0), Soak: next.Sub(s.at(2))}, {Percentage: new(100)}}}
	r := s.rollout(t, fw, spec, s.at(2), false)
	if !r.Evaluate(domain.TaskStats{}, domain.TaskStats{Succeeded: 1}, s.at(2)) || !r.StageAt(next).Equal(next.Truncate(time.Microsecond)) {
		t.Fatalf("the first stage's gate did not hold: %+v", r.Record())
	}
	if err := s.Rollouts.Create(t.Context(), r, domain.AuditRecord{}); err != nil {
		t.Fatalf("create rollout: %v", err)
	}
	return domain.Offer{Firmware: fw, Rollout: r}
}

func (s *repoSuite) newTask(t *testing.T, deviceID domain.DeviceID, o domain.Offer, attempt int, at time.Time) domain.Task {
	t.Helper()
	tk, err := domain.NewTask(asUUID(uuid.NewString()), deviceID, o, attempt, at)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// insert makes tk the device's active task, superseding a pending one, and
// checks that it was created as given.
func (s *repoSuite) insert(t *testing.T, tk domain.Task) domain.Task {
	t.Helper()
	got, created, err := application.ReplaceActive(t.Context(), s.Tasks, tk.DeviceID(), onActive(func(active *domain.Task) (*domain.Task, error) {
		if active != nil {
			if err := active.Cancel(domain.CodeSuperseded, "superseded", tk.CreatedAt()); err != nil {
				return nil, err
			}
		}
		return &tk, nil
	}), nil)
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
func (s *repoSuite) drive(t *testing.T, id domain.UUID, status domain.TaskStatus, at time.Time) domain.Task {
	t.Helper()
	got, err := application.UpdateTask(t.Context(), s.Tasks, id, func(tk *domain.Task) error {
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
func onActive(fn func(active *domain.Task) (*domain.Task, error)) func(application.TaskState) (*domain.Task, error) {
	return func(st application.TaskState) (*domain.Task, error) {
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
		ids[i] = tk.ID().String()
	}
	return ids
}

// ---------------------------------------------------------------- devices
