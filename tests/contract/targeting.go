package contract

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// TargetingRepos is one adapter's storage ports with what hands-off rollouts add:
// device tags and listing, beside the attributes the check reads.
type TargetingRepos struct {
	Repos
	Attributes ports.DeviceAttributes
	Directory  application.DeviceDirectory
}

// RunTargetingStores runs the contract of hands-off rollouts' storage: a rollout's
// policy round-trips through Create, Get, Offers and Update; tags are
// changed all or nothing; the check view carries tags and attributes; the
// device listing filters and pages; stage counts count from a time.
func RunTargetingStores(t *testing.T, newRepos func(t *testing.T) TargetingRepos) {
	t.Run("RolloutPolicy", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		rolloutPolicyContract(t, newRepoSuite(r.Repos))
	})
	t.Run("Tags", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		tagsContract(t, newRepoSuite(r.Repos), r)
	})
	t.Run("StageStats", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		stageStatsContract(t, newRepoSuite(r.Repos))
	})
}

func rolloutPolicyContract(t *testing.T, s *repoSuite) {
	ctx := t.Context()
	model := repoName("m")
	fw := s.firmware(t, repoSpec(model, "2.0.0"), s.at(1), true)
	timeout, starts := 2*time.Hour, s.at(100)
	spec := domain.RolloutSpec{
		Selector: domain.SelectorSpec{TagsAll: []string{"eu"}, TagsAny: []string{"a", "b"}, Attributes: map[string]string{"hw": "rev2"}, Versions: ">=1.0.0 <2.0.0"},
		Stages:   []domain.StageRequest{{Percentage: new(1), MinFinished: new(2), SuccessPercent: new(90), Soak: time.Minute}, {Percentage: new(10), MinFinished: new(1), SuccessPercent: new(95)}, {Percentage: new(100)}},
		StartsAt: &starts, Window: &domain.WindowSpec{Daily: "02:00-04:00", TimeZone: "Europe/Berlin"}, TaskTimeout: &timeout, AllowDowngrade: true,
	}
	r := s.rollout(t, fw, spec, s.at(2), true)
	want := r.Record()
	want.CreatedAt, want.UpdatedAt = repoUs(want.CreatedAt), repoUs(want.UpdatedAt)
	for i := range want.History {
		want.History[i].StartedAt = repoUs(want.History[i].StartedAt)
	}
	want.StartsAt = repoUs(want.StartsAt)
	got, err := s.Rollouts.Get(ctx, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !got.Record().Equal(want) {
		t.Fatalf("Get:\n got %+v\nwant %+v", got.Record(), want)
	}
	offers, err := s.Rollouts.Offers(ctx, model)
	if err != nil || len(offers) != 1 || !offers[0].Rollout.Record().Equal(want) {
		t.Fatalf("Offers carry the policy: %v %+v", err, offers)
	}
	// The progress of a plan is stored by Update (the gate holds, the
	// soak has passed: the rollout advances).
	updated, err := application.UpdateRollout(ctx, s.Tasks, r.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
		ro.Evaluate(domain.TaskStats{Succeeded: 2}, domain.TaskStats{Succeeded: 2}, s.at(3))
		if !ro.Evaluate(domain.TaskStats{Succeeded: 2}, domain.TaskStats{Succeeded: 2}, s.at(200)) {
			return errors.New("the rollout did not advance")
		}
		ro.AcceptFailures(domain.TaskStats{Failed: 3}) // kept too: a resume's accepted failures
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err = s.Rollouts.Get(ctx, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got.Stage() != 1 || got.Percentage() != 10 || len(got.History()) != 2 || !got.Record().Equal(updated.Record()) || got.Record().FailedAtResume != 3 {
		t.Fatalf("after the advance: stage %d pct %d history %+v", got.Stage(), got.Percentage(), got.History())
	}
	if h := got.History(); h[0].Outcome != domain.StageAdvanced || h[0].Reason == "" || !h[1].StartedAt.Equal(repoUs(s.at(3).Add(time.Minute))) {
		t.Fatalf("history %+v", h)
	}
	// A plain rollout stays plain.
	plain := s.rollout(t, fw, domain.RolloutSpec{Percentage: 5}, s.at(4), true)
	got, err = s.Rollouts.Get(ctx, plain.ID())
	if err != nil || !got.Selector().IsZero() || got.Stages() != nil || got.Window() != nil || got.TaskTimeout() != domain.DefaultTaskTimeout || got.AllowDowngrade() {
		t.Fatalf("plain rollout: %+v %v", got.Record(), err)
	}
}

func tagsContract(t *testing.T, s *repoSuite, r TargetingRepos) {
	ctx := t.Context()
	model := repoName("m")
	a := s.device(t, model, "1.0.0")
	b := s.device(t, model, "1.0.0")
	c := s.device(t, model, "1.0.0")
	s.device(t, repoName("m"), "1.0.0") // of another model: the model filter leaves it out
	set := func(tags ...string) func(domain.DeviceID, []string) ([]string, error) {
		return func(domain.DeviceID, []string) ([]string, error) { return tags, nil }
	}
	out, err := r.Directory.UpdateTags(ctx, []domain.DeviceID{a.ID(), b.ID()}, set("eu", "lab"), domain.AuditRecord{})
	if err != nil || fmt.Sprint(out[a.ID()]) != "[eu lab]" || fmt.Sprint(out[b.ID()]) != "[eu lab]" {
		t.Fatalf("UpdateTags: %v %v", out, err)
	}
	// fn sees the current tags.
	if _, err := r.Directory.UpdateTags(ctx, []domain.DeviceID{b.ID()}, func(_ domain.DeviceID, cur []string) ([]string, error) {
		if fmt.Sprint(cur) != "[eu lab]" {
			return nil, fmt.Errorf("fn got %v", cur)
		}
		return []string{"eu"}, nil
	}, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	// All or nothing: an unknown id, or fn failing on one device, writes nothing.
	if _, err := r.Directory.UpdateTags(ctx, []domain.DeviceID{a.ID(), asDeviceID(repoName("nobody"))}, set("x"), domain.AuditRecord{}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown device: %v", err)
	}
	if _, err := r.Directory.UpdateTags(ctx, []domain.DeviceID{a.ID(), c.ID()}, func(id domain.DeviceID, _ []string) ([]string, error) {
		if id == c.ID() {
			return nil, errRepoBoom
		}
		return []string{"x"}, nil
	}, domain.AuditRecord{}); !errors.Is(err, errRepoBoom) {
		t.Fatalf("fn failure: %v", err)
	}
	if tags, err := r.Directory.Tags(ctx, a.ID()); err != nil || fmt.Sprint(tags) != "[eu lab]" {
		t.Fatalf("tags of a after refused changes: %v %v", tags, err)
	}
	if tags, err := r.Directory.Tags(ctx, c.ID()); err != nil || tags == nil || len(tags) != 0 {
		t.Fatalf("an untagged device: %#v %v", tags, err)
	}
	// The check view carries tags and stored attributes.
	if _, err := r.Attributes.Update(ctx, a.ID(), func(at *domain.DeviceAttributes) error {
		return at.Apply(domain.AttributesMerge, map[string]string{"hw": "rev2"}, s.at(1))
	}); err != nil {
		t.Fatal(err)
	}
	v, err := s.Tasks.CheckViewOf(ctx, a.ID())
	if err != nil || fmt.Sprint(v.Tasks.Facts.Tags) != "[eu lab]" || v.Tasks.Facts.Attributes["hw"] != "rev2" {
		t.Fatalf("check view facts: %+v %v", v.Tasks.Facts, err)
	}
	v, err = s.Tasks.CheckView(ctx, c.TokenHash())
	if err != nil || len(v.Tasks.Facts.Tags) != 0 || v.Tasks.Facts.Attributes != nil {
		t.Fatalf("check view of a device with no facts: %+v %v", v.Tasks.Facts, err)
	}
	// The listing filters by model, tags and attributes, in id order, paged.
	ids := func(l []ports.DeviceListing) []string {
		out := []string{}
		for _, x := range l {
			out = append(out, x.Device.ID().String())
		}
		return out
	}
	all := []string{a.ID().String(), b.ID().String(), c.ID().String()}
	slices.Sort(all)
	l, err := r.Directory.List(ctx, ports.DeviceFilter{Model: model, Limit: 10})
	if err != nil || !slices.Equal(ids(l), all) {
		t.Fatalf("by model: %v %v, want %v", ids(l), err, all)
	}
	l, err = r.Directory.List(ctx, ports.DeviceFilter{Model: model, Tags: []string{"eu"}, Limit: 10})
	want := []string{a.ID().String(), b.ID().String()}
	slices.Sort(want)
	if err != nil || !slices.Equal(ids(l), want) {
		t.Fatalf("by tag: %v %v, want %v", ids(l), err, want)
	}
	l, err = r.Directory.List(ctx, ports.DeviceFilter{Model: model, Tags: []string{"eu", "lab"}, Attributes: map[string]string{"hw": "rev2"}, Limit: 10})
	if err != nil || !slices.Equal(ids(l), []string{a.ID().String()}) || l[0].Attributes.Values()["hw"] != "rev2" || fmt.Sprint(l[0].Tags) != "[eu lab]" {
		t.Fatalf("by tags and attribute: %+v %v", l, err)
	}
	l, err = r.Directory.List(ctx, ports.DeviceFilter{Model: model, Limit: 2, After: asDeviceID(all[0])})
	if err != nil || !slices.Equal(ids(l), all[1:]) {
		t.Fatalf("after %s: %v %v", all[0], ids(l), err)
	}
	l, err = r.Directory.List(ctx, ports.DeviceFilter{Model: model, Attributes: map[string]string{"hw": "rev3"}})
	if err != nil || len(l) != 0 || l == nil {
		t.Fatalf("no match: %#v %v", l, err)
	}
	// By version (build metadata aside) and by last seen: a reports
	// 2.0.0+b7 at 10 s, b 1.0.0 at 20 s; c was never seen.
	if err := s.Devices.RecordSeen(ctx, a, domain.MustParseVersion("2.0.0+b7"), s.at(10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Devices.RecordSeen(ctx, b, domain.MustParseVersion("1.0.0"), s.at(20)); err != nil {
		t.Fatal(err)
	}
	l, err = r.Directory.List(ctx, ports.DeviceFilter{Model: model, Version: domain.MustParseVersion("2.0.0")})
	if err != nil || !slices.Equal(ids(l), []string{a.ID().String()}) {
		t.Fatalf("by version 2.0.0: %v %v, want %v", ids(l), err, a.ID())
	}
	want = []string{b.ID().String(), c.ID().String()}
	slices.Sort(want)
	l, err = r.Directory.List(ctx, ports.DeviceFilter{Model: model, Version: domain.MustParseVersion("1.0.0")})
	if err != nil || !slices.Equal(ids(l), want) {
		t.Fatalf("by version 1.0.0: %v %v, want %v", ids(l), err, want)
	}
	// Seen before 15 s: a (at 10 s) and c (never); b, seen at 20 s, is not.
	want = []string{a.ID().String(), c.ID().String()}
	slices.Sort(want)
	l, err = r.Directory.List(ctx, ports.DeviceFilter{Model: model, SeenBefore: s.at(15)})
	if err != nil || !slices.Equal(ids(l), want) {
		t.Fatalf("seen before 15 s: %v %v, want %v", ids(l), err, want)
	}
	l, err = r.Directory.List(ctx, ports.DeviceFilter{Model: model, SeenBefore: s.at(25), Version: domain.MustParseVersion("1.0.0")})
	want = []string{b.ID().String(), c.ID().String()}
	slices.Sort(want)
	if err != nil || !slices.Equal(ids(l), want) {
		t.Fatalf("seen before 25 s on 1.0.0: %v %v, want %v", ids(l), err, want)
	}
}

func stageStatsContract(t *testing.T, s *repoSuite) {
	ctx := t.Context()
	o := s.stagedOffer(t, repoName("m"), "2.0.0", s.at(10))
	for i := range 3 {
		d := s.device(t, o.Firmware.Model(), "1.0.0")
		tk := s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10*i)))
		if i < 2 {
			s.drive(t, tk.ID(), domain.TaskSucceeded, s.at(10*i+1))
		}
	}
	all, err := s.Tasks.RolloutStatsSince(ctx, o.Rollout.ID(), time.Time{})
	if err != nil || all.Succeeded != 2 || all.Pending != 1 {
		t.Fatalf("since zero: %+v %v", all, err)
	}
	late, err := s.Tasks.RolloutStatsSince(ctx, o.Rollout.ID(), s.at(10))
	if err != nil || late.Succeeded != 1 || late.Pending != 1 {
		t.Fatalf("since step 10: %+v %v", late, err)
	}
	// The event transaction's count takes the same since.
	d := s.device(t, o.Firmware.Model(), "1.0.0")
	tk := s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(30)))
	ev, err := domain.NewEvent("e1", "failed", nil, "E", "")
	if err != nil {
		t.Fatal(err)
	}
	var inTx domain.TaskStats
	if _, err := application.ApplyEvent(ctx, s.Tasks, tk.ID(), ev, func(t *domain.Task, prior *domain.Event) (bool, error) {
		return t.ApplyEvent(ev, prior, s.at(31))
	}, func(_ *domain.Rollout, stats func(time.Time) (domain.TaskStats, error)) (bool, error) {
		var err error
		inTx, err = stats(s.at(10))
		return false, err
	}); err != nil {
		t.Fatal(err)
	}
	if inTx.Failed != 1 || inTx.Pending != 1 || inTx.Succeeded != 1 {
		t.Fatalf("stage count in the event transaction: %+v", inTx)
	}
}
