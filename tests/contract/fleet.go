package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// FleetRepos is one adapter's fleet reader with the repositories that fill
// the store it reads.
type FleetRepos struct {
	Repos
	Fleet application.FleetReader
}

// RunFleet runs the fleet reader contract against what newRepos returns.
// Each subtest uses its own model name, so the store may be shared and
// need not be empty.
//
// The contract: rollouts list newest first with their firmware's model and
// version and their tasks counted by status, filtered by model and capped
// by the limit; devices are counted by (model, version as stored), with the
// polls at or after each instant; a rollout's failures come newest first,
// capped, and an unknown or malformed rollout id has none.
func RunFleet(t *testing.T, newRepos func(t *testing.T) FleetRepos) {
	t.Run("ListRollouts", func(t *testing.T) {
		t.Parallel()
		(&fleetSuite{FleetRepos: newRepos(t)}).listRollouts(t)
	})
	t.Run("VersionCounts", func(t *testing.T) {
		t.Parallel()
		(&fleetSuite{FleetRepos: newRepos(t)}).versionCounts(t)
	})
	t.Run("RecentFailures", func(t *testing.T) {
		t.Parallel()
		(&fleetSuite{FleetRepos: newRepos(t)}).recentFailures(t)
	})
}

type fleetSuite struct {
	FleetRepos
}

// fleetBase has a sub-microsecond part: stores keep microseconds.
var fleetBase = time.Date(2026, 7, 8, 9, 10, 11, 500, time.UTC)

func fleetAt(k int) time.Time { return fleetBase.Add(time.Duration(k) * time.Second) }

func (s *fleetSuite) device(t *testing.T, model, version string) domain.Device {
	t.Helper()
	_, h, err := domain.NewDeviceToken()
	if err != nil {
		t.Fatal(err)
	}
	d, err := domain.NewDevice(asDeviceID("dev-"+uuid.NewString()), model, version, h, fleetAt(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Devices.Create(t.Context(), d, domain.AuditRecord{}); err != nil {
		t.Fatalf("create device: %v", err)
	}
	return d
}

func (s *fleetSuite) offer(t *testing.T, model, version string, at time.Time) domain.Offer {
	t.Helper()
	sum := sha256.Sum256([]byte(model + version))
	fw, err := domain.NewFirmware(domain.UUIDOf(uuid.New()), domain.FirmwareSpec{
		Model: model, Version: version, URL: "https://cdn.example.com/" + model + "/" + version + ".bin",
		SizeBytes: 1 << 20, SHA256: hex.EncodeToString(sum[:]),
	}, at)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Firmwares.Create(t.Context(), fw, domain.AuditRecord{}); err != nil {
		t.Fatalf("create firmware: %v", err)
	}
	r, err := domain.NewRollout(domain.UUIDOf(uuid.New()), fw, domain.RolloutSpec{Percentage: 100}, at)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Rollouts.Create(t.Context(), r, domain.AuditRecord{}); err != nil {
		t.Fatalf("create rollout: %v", err)
	}
	return domain.Offer{Firmware: fw, Rollout: r}
}

// task gives a new device of the offer's model a task of the offer and
// moves it to status at the given time.
func (s *fleetSuite) task(t *testing.T, o domain.Offer, status domain.TaskStatus, at time.Time) domain.Task {
	t.Helper()
	return s.taskOf(t, s.device(t, o.Firmware.Model(), "0.0.1"), o, status, at)
}

// taskOf is task for a given device (whose active task, if any, must have ended).
func (s *fleetSuite) taskOf(t *testing.T, d domain.Device, o domain.Offer, status domain.TaskStatus, at time.Time) domain.Task {
	t.Helper()
	tk, err := domain.NewTask(asUUID(uuid.NewString()), d.ID(), o, 1, at)
	if err != nil {
		t.Fatal(err)
	}
	got, created, err := application.ReplaceActive(t.Context(), s.Tasks, d.ID(), func(application.TaskState) (*domain.Task, error) { return &tk, nil }, nil)
	if err != nil || !created {
		t.Fatalf("insert task: created=%v err=%v", created, err)
	}
	if status == domain.TaskPending {
		return got
	}
	got, err = application.UpdateTask(t.Context(), s.Tasks, got.ID(), func(tk *domain.Task) error {
		if status == domain.TaskCancelled {
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
	return got
}

func (s *fleetSuite) listRollouts(t *testing.T) {
	model := "fleet-" + uuid.NewString()[:8]
	older := s.offer(t, model, "1.0.0", fleetAt(1))
	newer := s.offer(t, model, "1.1.0+build.7", fleetAt(2))
	other := s.offer(t, model+"-other", "1.0.0", fleetAt(3))

	for _, st := range []domain.TaskStatus{domain.TaskPending, domain.TaskDownloading, domain.TaskInstalling,
		domain.TaskSucceeded, domain.TaskSucceeded, domain.TaskFailed, domain.TaskCancelled} {
		s.task(t, newer, st, fleetAt(10))
	}
	s.task(t, older, domain.TaskDownloaded, fleetAt(11))
	// A device given the newer firmware again counts once, by its latest
	// task: its earlier failure is not counted.
	again := s.device(t, model, "0.0.1")
	s.taskOf(t, again, newer, domain.TaskFailed, fleetAt(10))
	s.taskOf(t, again, newer, domain.TaskSucceeded, fleetAt(11))
	s.task(t, other, domain.TaskFailed, fleetAt(12))

	got, err := s.Fleet.ListRollouts(t.Context(), ports.RolloutFilter{Model: model})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d rollouts of the model, want 2: %+v", len(got), got)
	}
	if got[0].Rollout.ID() != newer.Rollout.ID() || got[1].Rollout.ID() != older.Rollout.ID() {
		t.Errorf("order %s, %s; want newest first %s, %s", got[0].Rollout.ID(), got[1].Rollout.ID(),
			newer.Rollout.ID(), older.Rollout.ID())
	}
	if got[0].Model != model || got[0].Version != "1.1.0+build.7" {
		t.Errorf("firmware %q %q, want %q 1.1.0+build.7 (as published)", got[0].Model, got[0].Version, model)
	}
	want := domain.TaskStats{Pending: 1, Downloading: 1, Installing: 1, Succeeded: 3, Failed: 1, Cancelled: 1}
	if got[0].Stats != want {
		t.Errorf("stats %+v, want %+v", got[0].Stats, want)
	}
	if want := (domain.TaskStats{Downloaded: 1}); got[1].Stats != want {
		t.Errorf("older stats %+v, want %+v", got[1].Stats, want)
	}
	if !got[0].Rollout.CreatedAt().Equal(fleetAt(2).Truncate(time.Microsecond)) || got[0].Rollout.Percentage() != 100 {
		t.Errorf("rollout read back as created %v, %d%%", got[0].Rollout.CreatedAt(), got[0].Rollout.Percentage())
	}

	limited, err := s.Fleet.ListRollouts(t.Context(), ports.RolloutFilter{Model: model, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(limited) != 1 || limited[0].Rollout.ID() != newer.Rollout.ID() {
		t.Errorf("limit 1: %d rollouts, want the newest only", len(limited))
	}
	all, err := s.Fleet.ListRollouts(t.Context(), ports.RolloutFilter{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[domain.UUID]bool{}
	for _, r := range all {
		seen[r.Rollout.ID()] = true
	}
	if !seen[newer.Rollout.ID()] || !seen[older.Rollout.ID()] || !seen[other.Rollout.ID()] {
		t.Errorf("unfiltered listing misses one of the three rollouts")
	}
	none, err := s.Fleet.ListRollouts(t.Context(), ports.RolloutFilter{Model: model + "-nobody"})
	if err != nil || len(none) != 0 || none == nil {
		t.Errorf("unknown model: %v, %v; want an empty, non-nil list", none, err)
	}
}

func (s *fleetSuite) versionCounts(t *testing.T) {
	model := "fleet-" + uuid.NewString()[:8]
	now := fleetAt(100_000)
	hourAgo, dayAgo := now.Add(-time.Hour), now.Add(-24*time.Hour)
	seen := func(d domain.Device, v string, at time.Time) {
		t.Helper()
		if err := s.Devices.RecordSeen(t.Context(), d, domain.MustParseVersion(v), at); err != nil {
			t.Fatal(err)
		}
	}
	// 1.0.0: one polled a minute ago, one exactly an hour ago (counts), one
	// 2 hours ago, one 2 days ago. 1.1.0: one 23 hours ago. One never polled
	// nor reported; one registered with 1.1.0 and never polled.
	a := s.device(t, model, "")
	b := s.device(t, model, "")
	c := s.device(t, model, "")
	d := s.device(t, model, "")
	e := s.device(t, model, "")
	s.device(t, model, "")
	s.device(t, model, "1.1.0")
	seen(a, "1.0.0", now.Add(-time.Minute))
	seen(b, "1.0.0", hourAgo)
	seen(c, "1.0.0", now.Add(-2*time.Hour))
	seen(d, "1.0.0", now.Add(-48*time.Hour))
	seen(e, "1.1.0", now.Add(-23*time.Hour))
	s.device(t, model+"-other", "1.0.0")

	var got map[string]ports.VersionCount
	deadline := time.Now().Add(2 * time.Second) // a written-behind RecordSeen is visible within a second
	for {
		counts, err := s.Fleet.VersionCounts(t.Context(), ports.VersionCountQuery{Model: model, HourAgo: hourAgo, DayAgo: dayAgo})
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]ports.VersionCount{}
		for _, c := range counts {
			if c.Model != model {
				t.Errorf("count of model %q in a query for %q", c.Model, model)
			}
			got[c.Version] = c
		}
		if got["1.0.0"].Devices == 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := map[string]ports.VersionCount{
		"1.0.0": {Model: model, Version: "1.0.0", Devices: 4, SeenSinceHour: 2, SeenSinceDay: 3},
		"1.1.0": {Model: model, Version: "1.1.0", Devices: 2, SeenSinceHour: 0, SeenSinceDay: 1},
		"":      {Model: model, Version: "", Devices: 1},
	}
	if len(got) != len(want) {
		t.Errorf("versions %v, want %v", got, want)
	}
	for v, w := range want {
		if got[v] != w {
			t.Errorf("version %q: %+v, want %+v", v, got[v], w)
		}
	}

	all, err := s.Fleet.VersionCounts(t.Context(), ports.VersionCountQuery{HourAgo: hourAgo, DayAgo: dayAgo})
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]int{}
	for _, c := range all {
		models[c.Model] += c.Devices
	}
	if models[model] != 7 || models[model+"-other"] != 1 {
		t.Errorf("every model: %d and %d devices, want 7 and 1", models[model], models[model+"-other"])
	}
}

func (s *fleetSuite) recentFailures(t *testing.T) {
	model := "fleet-" + uuid.NewString()[:8]
	o := s.offer(t, model, "2.0.0", fleetAt(1))
	var failed []domain.Task
	for i := range 5 {
		failed = append(failed, s.task(t, o, domain.TaskFailed, fleetAt(20+i)))
		s.task(t, o, domain.TaskSucceeded, fleetAt(40+i))
	}
	s.task(t, o, domain.TaskCancelled, fleetAt(60))
	otherRollout := s.offer(t, model, "2.1.0", fleetAt(2))
	s.task(t, otherRollout, domain.TaskFailed, fleetAt(70))

	got, err := s.Fleet.RecentFailures(t.Context(), o.Rollout.ID(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d failures, want 3 (the limit)", len(got))
	}
	for i, tk := range got {
		want := failed[len(failed)-1-i]
		if tk.ID() != want.ID() {
			t.Errorf("failure %d is %s, want %s (newest first)", i, tk.ID(), want.ID())
		}
		if tk.Status() != domain.TaskFailed || tk.ErrorCode() != "E_FLASH" || tk.RolloutID() != o.Rollout.ID() {
			t.Errorf("failure %d: %s %q of rollout %s", i, tk.Status(), tk.ErrorCode(), tk.RolloutID())
		}
	}
	all, err := s.Fleet.RecentFailures(t.Context(), o.Rollout.ID(), 50)
	if err != nil || len(all) != 5 {
		t.Errorf("limit 50: %d failures (%v), want 5", len(all), err)
	}
	for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
		none, err := s.Fleet.RecentFailures(t.Context(), asUUID(id), 50)
		if err != nil || len(none) != 0 || none == nil {
			t.Errorf("rollout %q: %v, %v; want an empty, non-nil list", id, none, err)
		}
	}
}
