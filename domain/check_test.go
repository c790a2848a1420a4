package domain_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// selectFixture is a small catalogue for one device (cam-0001, model
// cam-x1). Each firmware has its own 100% rollout unless a case says otherwise.
type selectFixture struct {
	t   *testing.T
	fws map[string]domain.Firmware
}

func newSelectFixture(t *testing.T) *selectFixture {
	f := &selectFixture{t: t, fws: map[string]domain.Firmware{}}
	f.fws["fw-110"] = mustFirmware(t, "fw-110", "cam-x1", "1.1.0", "")
	f.fws["fw-120"] = mustFirmware(t, "fw-120", "cam-x1", "1.2.0", "")
	f.fws["fw-130"] = mustFirmware(t, "fw-130", "cam-x1", "1.3.0", "")
	f.fws["fw-130-min"] = mustFirmware(t, "fw-130-min", "cam-x1", "1.3.0", "1.1.0")
	f.fws["fw-200-other"] = mustFirmware(t, "fw-200-other", "cam-x2", "2.0.0", "")
	return f
}

// offer pairs firmware fwID with a rollout rid of it at pct%, created at
// created, optionally moved to status.
func (f *selectFixture) offer(fwID, rid string, spec domain.RolloutSpec, created time.Time, status domain.RolloutStatus) domain.Offer {
	f.t.Helper()
	fw := f.fws[fwID]
	r := mustRollout(f.t, rid, fw, spec, created)
	if status != domain.RolloutActive {
		if err := r.ChangeStatus(status, fw, created); err != nil {
			f.t.Fatal(err)
		}
	}
	return domain.Offer{Firmware: fw, Rollout: r}
}

func (f *selectFixture) full(fwID, rid string) domain.Offer {
	return f.offer(fwID, rid, domain.RolloutSpec{Percentage: 100}, t0, domain.RolloutActive)
}

func TestSelectTarget(t *testing.T) {
	const dev = "cam-0001"
	bucketC := referenceBucket(rolloutC, dev)
	tests := []struct {
		name        string
		current     string
		offers      func(f *selectFixture) []domain.Offer
		failed      map[string]int
		wantFW      string // "" for no target
		wantRollout string // checked when set
	}{
		{"no offers", "1.0.0", func(*selectFixture) []domain.Offer { return nil }, nil, "", ""},
		{"single eligible", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-110", rolloutA)}
		}, nil, "fw-110", rolloutA},
		{"highest version wins", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-110", rolloutA), f.full("fw-130", rolloutC), f.full("fw-120", rolloutB)}
		}, nil, "fw-130", rolloutC},
		{"highest not admitted (percentage = bucket)", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{
				f.full("fw-120", rolloutB),
				f.offer("fw-130", rolloutC, domain.RolloutSpec{Percentage: bucketC}, t0, domain.RolloutActive),
			}
		}, nil, "fw-120", rolloutB},
		{"highest admitted (percentage = bucket+1)", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{
				f.full("fw-120", rolloutB),
				f.offer("fw-130", rolloutC, domain.RolloutSpec{Percentage: bucketC + 1}, t0, domain.RolloutActive),
			}
		}, nil, "fw-130", rolloutC},
		{"0% rollout admits nobody", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.offer("fw-130", rolloutC, domain.RolloutSpec{Percentage: 0}, t0, domain.RolloutActive)}
		}, nil, "", ""},
		{"paused rollout skipped", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{
				f.full("fw-120", rolloutB),
				f.offer("fw-130", rolloutC, domain.RolloutSpec{Percentage: 100}, t0, domain.RolloutPaused),
			}
		}, nil, "fw-120", rolloutB},
		{"cancelled rollout skipped", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{
				f.full("fw-120", rolloutB),
				f.offer("fw-130", rolloutC, domain.RolloutSpec{Percentage: 100}, t0, domain.RolloutCancelled),
			}
		}, nil, "fw-120", rolloutB},
		{"revoked firmware skipped", "1.0.0", func(f *selectFixture) []domain.Offer {
			o := f.full("fw-130", rolloutC)
			o.Firmware = revoked(o.Firmware)
			return []domain.Offer{f.full("fw-120", rolloutB), o}
		}, nil, "fw-120", rolloutB},
		{"other model skipped", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-120", rolloutB), f.full("fw-200-other", rolloutD)}
		}, nil, "fw-120", rolloutB},
		{"below min_source_version skipped", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-120", rolloutB), f.full("fw-130-min", rolloutC)}
		}, nil, "fw-120", rolloutB},
		{"at min_source_version offered", "1.1.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-120", rolloutB), f.full("fw-130-min", rolloutC)}
		}, nil, "fw-130-min", rolloutC},
		{"current version not offered again", "1.3.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-110", rolloutA), f.full("fw-130", rolloutC)}
		}, nil, "", ""},
		{"current version with other build not offered", "1.3.0+local", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-130", rolloutC)}
		}, nil, "", ""},
		{"downgrade never offered", "1.2.5", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-110", rolloutA), f.full("fw-120", rolloutB)}
		}, nil, "", ""},
		{"prerelease device gets the release", "1.3.0-rc.2", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-120", rolloutB), f.full("fw-130", rolloutC)}
		}, nil, "fw-130", rolloutC},
		{"failed max_attempts times: next lower chosen", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-110", rolloutA), f.full("fw-120", rolloutB), f.full("fw-130", rolloutC)}
		}, map[string]int{"fw-130": 3}, "fw-120", rolloutB},
		{"failed more than max_attempts", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-120", rolloutB), f.full("fw-130", rolloutC)}
		}, map[string]int{"fw-130": 7}, "fw-120", rolloutB},
		{"failed below max_attempts still offered", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-120", rolloutB), f.full("fw-130", rolloutC)}
		}, map[string]int{"fw-130": 2}, "fw-130", rolloutC},
		{"custom max_attempts 1", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{
				f.full("fw-120", rolloutB),
				f.offer("fw-130", rolloutC, domain.RolloutSpec{Percentage: 100, MaxAttempts: intp(1)}, t0, domain.RolloutActive),
			}
		}, map[string]int{"fw-130": 1}, "fw-120", rolloutB},
		{"custom max_attempts 5", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{
				f.full("fw-120", rolloutB),
				f.offer("fw-130", rolloutC, domain.RolloutSpec{Percentage: 100, MaxAttempts: intp(5)}, t0, domain.RolloutActive),
			}
		}, map[string]int{"fw-130": 4}, "fw-130", rolloutC},
		{"two exhausted: third chosen", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-110", rolloutA), f.full("fw-120", rolloutB), f.full("fw-130", rolloutC)}
		}, map[string]int{"fw-130": 3, "fw-120": 3}, "fw-110", rolloutA},
		{"all exhausted: none", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-120", rolloutB), f.full("fw-130", rolloutC)}
		}, map[string]int{"fw-130": 3, "fw-120": 3}, "", ""},
		{"failures of other firmware irrelevant", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-120", rolloutB), f.full("fw-130", rolloutC)}
		}, map[string]int{"fw-120": 99, "fw-110": 99}, "fw-130", rolloutC},
		{"rollout of another firmware ignored", "1.0.0", func(f *selectFixture) []domain.Offer {
			mismatched := domain.Offer{Firmware: f.fws["fw-130"], Rollout: f.full("fw-120", rolloutC).Rollout}
			return []domain.Offer{f.full("fw-110", rolloutA), mismatched}
		}, nil, "fw-110", rolloutA},
		{"two rollouts of the winner: oldest used", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{
				f.offer("fw-130", rolloutA, domain.RolloutSpec{Percentage: 100}, t1, domain.RolloutActive),
				f.offer("fw-130", rolloutD, domain.RolloutSpec{Percentage: 100}, t0, domain.RolloutActive),
			}
		}, nil, "fw-130", rolloutD},
		{"two rollouts, same age: lowest id used", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{f.full("fw-130", rolloutD), f.full("fw-130", rolloutA)}
		}, nil, "fw-130", rolloutA},
		{"older rollout paused: newer used", "1.0.0", func(f *selectFixture) []domain.Offer {
			return []domain.Offer{
				f.offer("fw-130", rolloutA, domain.RolloutSpec{Percentage: 100}, t1, domain.RolloutActive),
				f.offer("fw-130", rolloutD, domain.RolloutSpec{Percentage: 100}, t0, domain.RolloutPaused),
			}
		}, nil, "fw-130", rolloutA},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSelectFixture(t)
			d := mustDevice(t, dev, "cam-x1", "0.0.1")
			cur := domain.MustParseVersion(tt.current)
			offers := tt.offers(f)
			// The answer must not depend on the order offers arrive in.
			orders := [][]domain.Offer{offers, slices.Clone(offers)}
			slices.Reverse(orders[1])
			for i, in := range orders {
				got, found, _ := domain.SelectTarget(domain.CheckInput{Device: d, Reported: cur, Offers: in, Failed: byLabel(tt.failed), Now: t1})
				if found != (tt.wantFW != "") {
					t.Fatalf("order %d: found = %v (%s), want %q", i, found, got.Firmware.ID(), tt.wantFW)
				}
				if !found {
					continue
				}
				if got.Firmware.ID() != idOf(tt.wantFW) {
					t.Fatalf("order %d: target %s, want %s", i, got.Firmware.ID(), tt.wantFW)
				}
				if tt.wantRollout != "" && got.Rollout.ID() != idOf(tt.wantRollout) {
					t.Fatalf("order %d: rollout %s, want %s", i, got.Rollout.ID(), tt.wantRollout)
				}
			}
		})
	}
}

func TestSelectTargetUsesGivenCurrentVersion(t *testing.T) {
	// The version the device reports now counts, not the one registered.
	f := newSelectFixture(t)
	d := mustDevice(t, "cam-0001", "cam-x1", "1.3.0")
	got, found, _ := domain.SelectTarget(domain.CheckInput{Device: d, Reported: domain.MustParseVersion("1.0.0"), Offers: []domain.Offer{f.full("fw-120", rolloutB)}, Now: t1})
	if !found || got.Firmware.ID() != idOf("fw-120") {
		t.Fatalf("target = %v/%s, want fw-120", found, got.Firmware.ID())
	}
}

func TestSelectTargetRespectsPartialRolloutAcrossFleet(t *testing.T) {
	f := newSelectFixture(t)
	o := f.offer("fw-130", rolloutC, domain.RolloutSpec{Percentage: 30}, t0, domain.RolloutActive)
	for i := 0; i < 300; i++ {
		d := mustDevice(t, fmt.Sprintf("fleet-%03d", i), "cam-x1", "1.0.0")
		_, found, _ := domain.SelectTarget(domain.CheckInput{Device: d, Reported: domain.MustParseVersion("1.0.0"), Offers: []domain.Offer{o}, Now: t1})
		if want := referenceBucket(rolloutC, d.ID().String()) < 30; found != want {
			t.Fatalf("%s: offered = %v, want %v", d.ID(), found, want)
		}
	}
}

func TestSortOffers(t *testing.T) {
	f := newSelectFixture(t)
	offers := []domain.Offer{
		f.full("fw-110", rolloutA),
		f.offer("fw-130", rolloutB, domain.RolloutSpec{Percentage: 100}, t1, domain.RolloutActive),
		f.full("fw-120", rolloutC),
		f.offer("fw-130", rolloutD, domain.RolloutSpec{Percentage: 100}, t0, domain.RolloutActive),
	}
	fw130, fw120, fw110 := idOf("fw-130").String(), idOf("fw-120").String(), idOf("fw-110").String()
	want := []string{fw130 + "/" + rolloutD, fw130 + "/" + rolloutB, fw120 + "/" + rolloutC, fw110 + "/" + rolloutA}
	// Whatever order they come in: equal versions by their rollouts' age.
	reversed := slices.Clone(offers)
	slices.Reverse(reversed)
	for _, in := range [][]domain.Offer{offers, reversed} {
		domain.SortOffers(in)
		var got []string
		for _, o := range in {
			got = append(got, o.Firmware.ID().String()+"/"+o.Rollout.ID().String())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("SortOffers = %v, want %v", got, want)
		}
	}
}

// planFixture is one device (cam-0001, model cam-x1) and a catalogue of
// firmware 1.1.0, 1.2.0 and 1.3.0, each with a 100% rollout.
type planFixture struct {
	t   *testing.T
	dev domain.Device
	fw  map[string]domain.Firmware
	ro  map[string]domain.Rollout
}

func newPlanFixture(t *testing.T) *planFixture {
	f := &planFixture{t: t, dev: mustDevice(t, "cam-0001", "cam-x1", "1.0.0"), fw: map[string]domain.Firmware{}, ro: map[string]domain.Rollout{}}
	for v, rid := range map[string]string{"1.1.0": rolloutA, "1.2.0": rolloutB, "1.3.0": rolloutC} {
		fw := mustFirmware(t, "fw-"+v, "cam-x1", v, "")
		f.fw[v] = fw
		f.ro[v] = mustRollout(t, rid, fw, domain.RolloutSpec{Percentage: 100}, t0)
	}
	return f
}

func (f *planFixture) offers(versions ...string) []domain.Offer {
	var out []domain.Offer
	for _, v := range versions {
		out = append(out, domain.Offer{Firmware: f.fw[v], Rollout: f.ro[v]})
	}
	return out
}

// active is a task for version v in status st; edit changes its firmware
// or rollout (revoked, cancelled) before it is judged.
func (f *planFixture) active(v string, st domain.TaskStatus, edit ...func(*domain.ActiveTask)) *domain.ActiveTask {
	tk := domain.RehydrateTask(domain.TaskRecord{ID: "task-" + v, DeviceID: f.dev.ID().String(), FirmwareID: f.fw[v].ID().String(),
		RolloutID: f.ro[v].ID().String(), Status: st, Attempt: 1, CreatedAt: t0, UpdatedAt: t0})
	a := &domain.ActiveTask{Task: tk, Firmware: f.fw[v], Rollout: f.ro[v]}
	for _, e := range edit {
		e(a)
	}
	return a
}

func TestPlanCheck(t *testing.T) {
	revokeFW := func(a *domain.ActiveTask) { a.Firmware = revoked(a.Firmware) }
	cancelRollout := func(a *domain.ActiveTask) {
		if err := a.Rollout.ChangeStatus(domain.RolloutCancelled, a.Firmware, t1); err != nil {
			panic(err)
		}
	}
	pauseRollout := func(a *domain.ActiveTask) {
		if err := a.Rollout.ChangeStatus(domain.RolloutPaused, a.Firmware, t1); err != nil {
			panic(err)
		}
	}
	autoPause := func(a *domain.ActiveTask) {
		rec := a.Rollout.Record()
		rec.Status, rec.PausedReason = domain.RolloutPaused, domain.PausedAuto
		a.Rollout = domain.RehydrateRollout(rec)
	}
	tests := []struct {
		name     string
		reported string
		active   func(f *planFixture) *domain.ActiveTask
		offers   []string
		failed   map[string]int
		// want
		action    domain.CheckAction
		task      string // the task handed back (keep, reuse)
		ended     string // status:code of the ended active task, "" if none
		create    string // version of the created task
		attempt   int
		supersede bool
	}{
		// Rule 6: nothing to offer, nothing active.
		{name: "no offers, no task", reported: "1.0.0", action: domain.CheckNoUpdate},
		// Rule 4: the highest eligible version is created, attempt 1.
		{name: "create the highest", reported: "1.0.0", offers: []string{"1.1.0", "1.3.0", "1.2.0"},
			action: domain.CheckCreate, create: "1.3.0", attempt: 1},
		// Rule 4 + event rule 4: attempts count failures; exhausted firmware is skipped.
		{name: "attempt after failures", reported: "1.0.0", offers: []string{"1.3.0"}, failed: map[string]int{"fw-1.3.0": 2},
			action: domain.CheckCreate, create: "1.3.0", attempt: 3},
		{name: "exhausted target skipped", reported: "1.0.0", offers: []string{"1.2.0", "1.3.0"}, failed: map[string]int{"fw-1.3.0": 3},
			action: domain.CheckCreate, create: "1.2.0", attempt: 1},
		// Never a downgrade, never the running version.
		{name: "no downgrade offered", reported: "1.2.5", offers: []string{"1.1.0", "1.2.0"}, action: domain.CheckNoUpdate},
		{name: "running version not offered", reported: "1.3.0", offers: []string{"1.3.0"}, action: domain.CheckNoUpdate},
		// Rule 5: reuse.
		{name: "reuse pending for target", reported: "1.0.0", offers: []string{"1.3.0"},
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.3.0", domain.TaskPending) },
			action: domain.CheckReuse, task: "task-1.3.0"},
		{name: "reuse started for target", reported: "1.0.0", offers: []string{"1.3.0"},
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.3.0", domain.TaskInstalling) },
			action: domain.CheckReuse, task: "task-1.3.0"},
		// Rule 5: supersede a pending task by a higher target; keep a started one.
		{name: "supersede pending lower", reported: "1.0.0", offers: []string{"1.3.0"},
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.1.0", domain.TaskPending) },
			action: domain.CheckCreate, create: "1.3.0", attempt: 1, ended: "cancelled:SUPERSEDED", supersede: true},
		{name: "keep started", reported: "1.0.0", offers: []string{"1.3.0"},
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.1.0", domain.TaskDownloading) },
			action: domain.CheckKeep, task: "task-1.1.0"},
		// A stale view of the offers never replaces a pending task by a lower version.
		{name: "pending higher never superseded by lower", reported: "1.0.0", offers: []string{"1.2.0"},
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.3.0", domain.TaskPending) },
			action: domain.CheckKeep, task: "task-1.3.0"},
		{name: "pending kept while its rollout is paused", reported: "1.0.0", offers: []string{"1.2.0"},
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.3.0", domain.TaskPending, pauseRollout) },
			action: domain.CheckKeep, task: "task-1.3.0"},
		// Rule 5: a rollout that paused itself hands out no task not begun;
		// a begun one finishes.
		{name: "pending cancelled when its rollout paused itself", reported: "1.0.0",
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.3.0", domain.TaskPending, autoPause) },
			action: domain.CheckNoUpdate, ended: "cancelled:ROLLOUT_PAUSED"},
		{name: "pending of a self-paused rollout makes room for a lower target", reported: "1.0.0", offers: []string{"1.2.0"},
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.3.0", domain.TaskPending, autoPause) },
			action: domain.CheckCreate, create: "1.2.0", attempt: 1, ended: "cancelled:ROLLOUT_PAUSED"},
		{name: "started task of a self-paused rollout finishes", reported: "1.0.0",
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.3.0", domain.TaskDownloading, autoPause) },
			action: domain.CheckKeep, task: "task-1.3.0"},
		{name: "keep pending without target", reported: "1.0.0",
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.2.0", domain.TaskPending) },
			action: domain.CheckKeep, task: "task-1.2.0"},
		// Rule 3: reporting the task's version succeeds it (any active status).
		{name: "implicit success", reported: "1.3.0+build.9", offers: []string{"1.3.0"},
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.3.0", domain.TaskInstalling) },
			action: domain.CheckNoUpdate, ended: "succeeded:"},
		{name: "implicit success then next target", reported: "1.2.0", offers: []string{"1.3.0"},
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.2.0", domain.TaskPending) },
			action: domain.CheckCreate, create: "1.3.0", attempt: 1, ended: "succeeded:"},
		// Rule 5: a pending task of revoked firmware or a cancelled rollout is cancelled.
		{name: "revoked firmware cancels pending", reported: "1.0.0",
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.3.0", domain.TaskPending, revokeFW) },
			action: domain.CheckNoUpdate, ended: "cancelled:FIRMWARE_REVOKED"},
		{name: "revoked firmware: pending cancelled, lower offered", reported: "1.0.0", offers: []string{"1.2.0"},
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.3.0", domain.TaskPending, revokeFW) },
			action: domain.CheckCreate, create: "1.2.0", attempt: 1, ended: "cancelled:FIRMWARE_REVOKED"},
		{name: "revoked firmware: started task finishes", reported: "1.0.0",
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.3.0", domain.TaskDownloaded, revokeFW) },
			action: domain.CheckKeep, task: "task-1.3.0"},
		{name: "cancelled rollout cancels pending", reported: "1.0.0",
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.3.0", domain.TaskPending, cancelRollout) },
			action: domain.CheckNoUpdate, ended: "cancelled:ROLLOUT_CANCELLED"},
		// A pending task below what the device runs would be a downgrade.
		{name: "pending below reported cancelled", reported: "1.2.5",
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.2.0", domain.TaskPending) },
			action: domain.CheckNoUpdate, ended: "cancelled:SUPERSEDED"},
		// A finished task passed as active is ignored.
		{name: "finished task ignored", reported: "1.0.0", offers: []string{"1.3.0"},
			active: func(f *planFixture) *domain.ActiveTask { return f.active("1.3.0", domain.TaskFailed) },
			action: domain.CheckCreate, create: "1.3.0", attempt: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPlanFixture(t)
			in := domain.CheckInput{Device: f.dev, Reported: domain.MustParseVersion(tt.reported),
				Offers: f.offers(tt.offers...), Failed: byLabel(tt.failed), Now: t1}
			if tt.active != nil {
				in.Active = tt.active(f)
			}
			var before domain.TaskRecord
			if in.Active != nil {
				before = in.Active.Task.Record()
			}
			p := domain.PlanCheck(in)
			if in.Active != nil && in.Active.Task.Record() != before {
				t.Fatal("PlanCheck changed its input")
			}
			if p.Action != tt.action {
				t.Fatalf("action %s, want %s", p.Action, tt.action)
			}
			if got := taskID(p.Task); got != tt.task {
				t.Fatalf("task handed back %q, want %q", got, tt.task)
			}
			ended := ""
			if p.Ended != nil {
				ended = p.Ended.Status().String() + ":" + p.Ended.ErrorCode()
				if p.Ended.ID() != in.Active.Task.ID() || !p.Ended.UpdatedAt().Equal(t1.UTC()) {
					t.Fatalf("ended %+v", p.Ended.Record())
				}
			}
			if ended != tt.ended {
				t.Fatalf("ended %q, want %q", ended, tt.ended)
			}
			if p.Writes() != (tt.ended != "" || tt.create != "") {
				t.Fatalf("Writes() = %v", p.Writes())
			}
			if p.Superseded() != tt.supersede {
				t.Fatalf("Superseded() = %v, want %v", p.Superseded(), tt.supersede)
			}
			if tt.create == "" {
				return
			}
			if p.Offer.Firmware.Version().String() != tt.create || p.Attempt != tt.attempt {
				t.Fatalf("create %s attempt %d, want %s attempt %d", p.Offer.Firmware.Version(), p.Attempt, tt.create, tt.attempt)
			}
		})
	}
}

func taskID(t *domain.Task) string {
	if t == nil {
		return ""
	}
	return t.ID().String()
}

func TestCheckActionString(t *testing.T) {
	tests := map[domain.CheckAction]string{
		domain.CheckNoUpdate: "no_update",
		domain.CheckKeep:     "keep",
		domain.CheckReuse:    "reuse",
		domain.CheckCreate:   "create",
	}
	for a, want := range tests {
		if got := a.String(); got != want {
			t.Errorf("CheckAction(%d).String() = %q, want %q", int(a), got, want)
		}
	}
}

func TestNextAttempt(t *testing.T) {
	tests := []struct{ failed, want int }{{0, 1}, {1, 2}, {2, 3}, {9, 10}}
	for _, tt := range tests {
		if got := domain.NextAttempt(tt.failed); got != tt.want {
			t.Errorf("NextAttempt(%d) = %d, want %d", tt.failed, got, tt.want)
		}
	}
}

func TestRetryCycleStopsAtMaxAttempts(t *testing.T) {
	// Event rule 4 with check rule 4: after each failure the next check makes
	// attempt+1, until max_attempts failures stop the offer.
	f := newSelectFixture(t)
	o := f.offer("fw-130", rolloutC, domain.RolloutSpec{Percentage: 100, MaxAttempts: intp(2)}, t0, domain.RolloutActive)
	d := mustDevice(t, "cam-0001", "cam-x1", "1.0.0")
	cur := domain.MustParseVersion("1.0.0")
	failed := map[string]int{}
	var attempts []int
	for range 5 {
		target, found, _ := domain.SelectTarget(domain.CheckInput{Device: d, Reported: cur, Offers: []domain.Offer{o}, Failed: failed, Now: t1})
		if !found {
			break
		}
		p := domain.PlanCheck(domain.CheckInput{Device: d, Reported: cur, Offers: []domain.Offer{target}, Failed: failed, Now: t1})
		if p.Action != domain.CheckCreate {
			t.Fatal("no active task and a target must create")
		}
		task, err := domain.NewTask(asUUID(taskA), d.ID(), p.Offer, p.Attempt, t1)
		if err != nil {
			t.Fatal(err)
		}
		attempts = append(attempts, task.Attempt())
		if _, err := task.ApplyEvent(mustEvent(t, "e", "failed", nil, "E", ""), nil, t1); err != nil {
			t.Fatal(err)
		}
		failed[task.FirmwareID().String()]++
	}
	if !slices.Equal(attempts, []int{1, 2}) {
		t.Fatalf("attempts = %v, want [1 2]", attempts)
	}
}

func TestOfferOpen(t *testing.T) {
	f := newPlanFixture(t)
	open := domain.Offer{Firmware: f.fw["1.2.0"], Rollout: f.ro["1.2.0"]}
	if !open.Open() {
		t.Fatal("a released firmware's active rollout is not open")
	}
	paused := open
	if err := paused.Rollout.ChangeStatus(domain.RolloutPaused, paused.Firmware, t1); err != nil {
		t.Fatal(err)
	}
	revoked := domain.Offer{Firmware: revoked(open.Firmware), Rollout: open.Rollout}
	mismatched := domain.Offer{Firmware: f.fw["1.3.0"], Rollout: open.Rollout}
	for name, o := range map[string]domain.Offer{"paused": paused, "revoked": revoked, "rollout of another firmware": mismatched} {
		if o.Open() {
			t.Errorf("%s: open", name)
		}
	}
}
