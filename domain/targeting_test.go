package domain_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

func TestParseVersionRange(t *testing.T) {
	tests := []struct {
		in      string
		canon   string
		in_, ex []string // versions inside / outside
		bad     bool
	}{
		{in: "", canon: "", in_: []string{"0.0.1", "9.9.9"}},
		{in: ">=1.2.0 <2.0.0", canon: ">=1.2.0 <2.0.0", in_: []string{"1.2.0", "1.9.9", "1.5.0-rc.1+b", "2.0.0-rc.1"}, ex: []string{"1.1.9", "2.0.0", "1.2.0-rc.1"}},
		{in: ">1.0.0,<=1.1.0", canon: ">1.0.0 <=1.1.0", in_: []string{"1.0.1", "1.1.0"}, ex: []string{"1.0.0", "1.1.1"}},
		{in: "1.2.3", canon: "=1.2.3", in_: []string{"1.2.3", "1.2.3+x"}, ex: []string{"1.2.4"}},
		{in: "=1.2.3", canon: "=1.2.3", in_: []string{"1.2.3"}, ex: []string{"1.2.2"}},
		{in: "!=1.2.3", canon: "!=1.2.3", in_: []string{"1.2.4"}, ex: []string{"1.2.3"}},
		{in: " ", bad: true}, // given, but no comparison: not "every version"
		{in: ",", bad: true},
		{in: " ,\t", bad: true},
		{in: ">=1.2", bad: true},
		{in: "~1.2.0", bad: true},
		{in: ">= 1.2.0", bad: true}, // the operator and the version are one word
		{in: ">=1.0.0 >=1.0.0 >=1.0.0 >=1.0.0 >=1.0.0 >=1.0.0 >=1.0.0 >=1.0.0 >=1.0.0", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := domain.ParseVersionRange("selector.versions", tt.in)
			if tt.bad {
				wantValidation(t, err, "selector.versions")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.String() != tt.canon {
				t.Fatalf("canonical %q, want %q", r.String(), tt.canon)
			}
			for _, v := range tt.in_ {
				if !r.Contains(domain.MustParseVersion(v)) {
					t.Errorf("%q should contain %s", tt.in, v)
				}
			}
			for _, v := range tt.ex {
				if r.Contains(domain.MustParseVersion(v)) {
					t.Errorf("%q should not contain %s", tt.in, v)
				}
			}
			if !r.IsZero() && r.Contains(domain.Version{}) {
				t.Errorf("%q contains the unreported version", tt.in)
			}
		})
	}
}

func TestValidateTags(t *testing.T) {
	got, err := domain.ValidateTags("tags", []string{"b", "a", "b"})
	if err != nil || fmt.Sprint(got) != "[a b]" {
		t.Fatalf("got %v %v, want [a b]", got, err)
	}
	for _, bad := range [][]string{{""}, {"has space"}, {string(make([]byte, 65))}} {
		_, err := domain.ValidateTags("tags", bad)
		wantValidation(t, err, "tags")
	}
	many := make([]string, domain.MaxTags+1)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	_, err = domain.ValidateTags("tags", many)
	wantValidation(t, err, "tags")
}

func TestSelectorMatches(t *testing.T) {
	facts := domain.DeviceFacts{Tags: []string{"eu", "lab"}, Attributes: map[string]string{"hw": "rev2", "region": "north"}}
	v := domain.MustParseVersion("1.5.0")
	tests := []struct {
		name string
		spec domain.SelectorSpec
		want bool
	}{
		{"zero selects all", domain.SelectorSpec{}, true},
		{"all of, present", domain.SelectorSpec{TagsAll: []string{"eu", "lab"}}, true},
		{"all of, one missing", domain.SelectorSpec{TagsAll: []string{"eu", "us"}}, false},
		{"any of, one present", domain.SelectorSpec{TagsAny: []string{"us", "lab"}}, true},
		{"any of, none present", domain.SelectorSpec{TagsAny: []string{"us", "asia"}}, false},
		{"attribute equal", domain.SelectorSpec{Attributes: map[string]string{"hw": "rev2"}}, true},
		{"attribute differs", domain.SelectorSpec{Attributes: map[string]string{"hw": "rev3"}}, false},
		{"attribute absent", domain.SelectorSpec{Attributes: map[string]string{"color": ""}}, false},
		{"version inside", domain.SelectorSpec{Versions: ">=1.2.0 <2.0.0"}, true},
		{"version outside", domain.SelectorSpec{Versions: ">=2.0.0"}, false},
		{"everything", domain.SelectorSpec{TagsAll: []string{"eu"}, TagsAny: []string{"lab", "x"}, Attributes: map[string]string{"region": "north"}, Versions: "<2.0.0"}, true},
		{"everything but version", domain.SelectorSpec{TagsAll: []string{"eu"}, Attributes: map[string]string{"region": "north"}, Versions: "<1.5.0"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := domain.NewSelector(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Matches(facts, v); got != tt.want {
				t.Fatalf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
	_, err := domain.NewSelector(domain.SelectorSpec{TagsAny: []string{"bad tag"}})
	wantValidation(t, err, "selector.tags_any")
	_, err = domain.NewSelector(domain.SelectorSpec{Attributes: map[string]string{"": "x"}})
	wantValidation(t, err, "selector.attributes")
}

// A selector and a percentage: the bucket rule applies inside the selected
// set, so a 50% rollout of the "eu" devices reaches about half of them and
// none of the others.
func TestSelectorAndPercentage(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 50, Selector: domain.SelectorSpec{TagsAll: []string{"eu"}}}, t0)
	o := domain.Offer{Firmware: fw, Rollout: r}
	eu, others := 0, 0
	for i := range 400 {
		d := mustDevice(t, fmt.Sprintf("dev-%03d", i), "cam-x1", "1.0.0")
		facts := domain.DeviceFacts{}
		if i%2 == 0 {
			facts.Tags = []string{"eu"}
		}
		_, found, _ := domain.SelectTarget(domain.CheckInput{Device: d, Reported: domain.MustParseVersion("1.0.0"), Offers: []domain.Offer{o}, Facts: facts, Now: t1})
		want := i%2 == 0 && domain.Bucket(rolloutA, d.ID().String()) < 50
		if found != want {
			t.Fatalf("%s: offered %v, want %v", d.ID(), found, want)
		}
		if found && i%2 == 0 {
			eu++
		}
		if found && i%2 != 0 {
			others++
		}
	}
	if eu < 70 || eu > 130 || others != 0 {
		t.Fatalf("admitted %d of 200 eu devices and %d others", eu, others)
	}
}

// Attributes the device reports in this poll count (the application lays
// them over the stored ones before planning).
func TestPlanCheckTargetsReportedAttributes(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100, Selector: domain.SelectorSpec{Attributes: map[string]string{"hw": "rev2"}}}, t0)
	d := mustDevice(t, "cam-0001", "cam-x1", "1.0.0")
	in := domain.CheckInput{Device: d, Reported: domain.MustParseVersion("1.0.0"), Offers: []domain.Offer{{Firmware: fw, Rollout: r}}, Now: t1}
	if p := domain.PlanCheck(in); p.Action != domain.CheckNoUpdate {
		t.Fatalf("without the attribute: %s, want no_update", p.Action)
	}
	in.Facts = domain.DeviceFacts{Attributes: map[string]string{"hw": "rev2"}}
	if p := domain.PlanCheck(in); p.Action != domain.CheckCreate {
		t.Fatalf("with the attribute: %s, want create", p.Action)
	}
}

func TestRollback(t *testing.T) {
	good := mustFirmware(t, "fw-19", "cam-x1", "1.9.0", "")
	bad := mustFirmware(t, "fw-20", "cam-x1", "2.0.0", "")
	_, err := domain.NewRollout(idOf(rolloutA), good, domain.RolloutSpec{Percentage: 100, AllowDowngrade: true}, t0)
	wantValidation(t, err, "allow_downgrade")

	back := mustRollout(t, rolloutA, good, domain.RolloutSpec{Percentage: 100, AllowDowngrade: true, Selector: domain.SelectorSpec{Versions: "=2.0.0"}}, t0)
	plain := mustRollout(t, rolloutB, good, domain.RolloutSpec{Percentage: 100}, t0)
	d := mustDevice(t, "cam-0001", "cam-x1", "2.0.0")
	tests := []struct {
		name     string
		reported string
		offers   []domain.Offer
		want     domain.CheckAction
	}{
		{"rollback offers the lower version to the selected", "2.0.0", []domain.Offer{{Firmware: good, Rollout: back}}, domain.CheckCreate},
		{"never to versions outside its range", "2.1.0", []domain.Offer{{Firmware: good, Rollout: back}}, domain.CheckNoUpdate},
		{"a plain rollout never downgrades", "2.0.0", []domain.Offer{{Firmware: good, Rollout: plain}}, domain.CheckNoUpdate},
		{"nothing to undo at the version itself", "1.9.0", []domain.Offer{{Firmware: good, Rollout: back}}, domain.CheckNoUpdate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := domain.PlanCheck(domain.CheckInput{Device: d, Reported: domain.MustParseVersion(tt.reported), Offers: tt.offers, Now: t1})
			if p.Action != tt.want {
				t.Fatalf("action %s, want %s", p.Action, tt.want)
			}
		})
	}
	// A pending rollback task is not cancelled as "a downgrade", and the
	// device reporting its version succeeds it.
	task, err := domain.NewTask(asUUID("5c0c6f3e-4a5b-4c53-9d3e-4f1d7f9e0a11"), asDeviceID("cam-0001"), domain.Offer{Firmware: good, Rollout: back}, 1, t1)
	if err != nil {
		t.Fatal(err)
	}
	active := &domain.ActiveTask{Task: task, Firmware: good, Rollout: back}
	p := domain.PlanCheck(domain.CheckInput{Device: d, Reported: domain.MustParseVersion("2.0.0"), Active: active,
		Offers: []domain.Offer{{Firmware: good, Rollout: back}, {Firmware: bad, Rollout: plain}}, Now: t1.Add(time.Minute)})
	if p.Action != domain.CheckReuse || p.Ended != nil {
		t.Fatalf("pending rollback task: %s ended=%v, want reuse", p.Action, p.Ended != nil)
	}
	p = domain.PlanCheck(domain.CheckInput{Device: d, Reported: domain.MustParseVersion("1.9.0"), Active: active, Now: t1.Add(time.Minute)})
	if p.Ended == nil || p.Ended.Status() != domain.TaskSucceeded {
		t.Fatalf("reporting 1.9.0 should succeed the rollback task, got %+v", p)
	}
}
