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
				got, found := domain.SelectTarget(d, cur, in, tt.failed)
				if found != (tt.wantFW != "") {
					t.Fatalf("order %d: found = %v (%s), want %q", i, found, got.Firmware.ID(), tt.wantFW)
				}
				if !found {
					continue
				}
				if got.Firmware.ID() != tt.wantFW {
					t.Fatalf("order %d: target %s, want %s", i, got.Firmware.ID(), tt.wantFW)
				}
				if tt.wantRollout != "" && got.Rollout.ID() != tt.wantRollout {
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
	got, found := domain.SelectTarget(d, domain.MustParseVersion("1.0.0"), []domain.Offer{f.full("fw-120", rolloutB)}, nil)
	if !found || got.Firmware.ID() != "fw-120" {
		t.Fatalf("target = %v/%s, want fw-120", found, got.Firmware.ID())
	}
}

func TestSelectTargetRespectsPartialRolloutAcrossFleet(t *testing.T) {
	f := newSelectFixture(t)
	o := f.offer("fw-130", rolloutC, domain.RolloutSpec{Percentage: 30}, t0, domain.RolloutActive)
	for i := 0; i < 300; i++ {
		d := mustDevice(t, fmt.Sprintf("fleet-%03d", i), "cam-x1", "1.0.0")
		_, found := domain.SelectTarget(d, domain.MustParseVersion("1.0.0"), []domain.Offer{o}, nil)
		if want := referenceBucket(rolloutC, d.ID()) < 30; found != want {
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
	domain.SortOffers(offers)
	var got []string
	for _, o := range offers {
		got = append(got, o.Firmware.ID()+"/"+o.Rollout.ID())
	}
	want := []string{"fw-130/" + rolloutD, "fw-130/" + rolloutB, "fw-120/" + rolloutC, "fw-110/" + rolloutA}
	if !slices.Equal(got, want) {
		t.Fatalf("SortOffers = %v, want %v", got, want)
	}
}

func TestDecide(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	target := &domain.Offer{Firmware: fw, Rollout: mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100}, t0)}
	taskFor := func(fwID string, st domain.TaskStatus) *domain.Task {
		tk := domain.RehydrateTask(domain.TaskRecord{ID: "t", DeviceID: "d", FirmwareID: fwID, Status: st, Attempt: 1})
		return &tk
	}
	tests := []struct {
		name   string
		active *domain.Task
		target *domain.Offer
		want   domain.Plan
	}{
		{"nothing at all", nil, nil, domain.PlanNone},
		{"target, no task", nil, target, domain.PlanCreate},
		{"pending task for target", taskFor("fw-1", domain.TaskPending), target, domain.PlanReuse},
		{"downloading task for target", taskFor("fw-1", domain.TaskDownloading), target, domain.PlanReuse},
		{"installing task for target", taskFor("fw-1", domain.TaskInstalling), target, domain.PlanReuse},
		{"pending task for other firmware: supersede", taskFor("fw-2", domain.TaskPending), target, domain.PlanCreate},
		{"downloading task for other firmware: keep", taskFor("fw-2", domain.TaskDownloading), target, domain.PlanKeep},
		{"downloaded task for other firmware: keep", taskFor("fw-2", domain.TaskDownloaded), target, domain.PlanKeep},
		{"installing task for other firmware: keep", taskFor("fw-2", domain.TaskInstalling), target, domain.PlanKeep},
		{"pending task, no target: keep", taskFor("fw-2", domain.TaskPending), nil, domain.PlanKeep},
		{"installing task, no target: keep", taskFor("fw-2", domain.TaskInstalling), nil, domain.PlanKeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := domain.Decide(tt.active, tt.target); got != tt.want {
				t.Fatalf("Decide = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPlanString(t *testing.T) {
	tests := map[domain.Plan]string{
		domain.PlanNone:   "none",
		domain.PlanKeep:   "keep",
		domain.PlanReuse:  "reuse",
		domain.PlanCreate: "create",
	}
	for p, want := range tests {
		if got := p.String(); got != want {
			t.Errorf("Plan(%d).String() = %q, want %q", int(p), got, want)
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
		target, found := domain.SelectTarget(d, cur, []domain.Offer{o}, failed)
		if !found {
			break
		}
		if domain.Decide(nil, &target) != domain.PlanCreate {
			t.Fatal("no active task and a target must create")
		}
		task, err := domain.NewTask("t", d.ID(), target, domain.NextAttempt(failed[target.Firmware.ID()]), t1)
		if err != nil {
			t.Fatal(err)
		}
		attempts = append(attempts, task.Attempt())
		if _, err := task.ApplyEvent(mustEvent(t, "e", "failed", nil, "E", ""), nil, t1); err != nil {
			t.Fatal(err)
		}
		failed[task.FirmwareID()]++
	}
	if !slices.Equal(attempts, []int{1, 2}) {
		t.Fatalf("attempts = %v, want [1 2]", attempts)
	}
}
