package contract

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// judgeView: a store's one-statement read for a judgement without the
// rollout's lock (application.JudgeReader) gives the offer as stored and
// the rollout's counters in every scope as RolloutStatsSince reads them —
// the whole rollout's and each stage's, several devices of a status summed
// — none for a rollout without tasks; unknown ids are not found. A store
// without it (memory) judges in a transaction, which the judgement cases
// pin.
func (s *repoSuite) judgeView(t *testing.T) {
	jr, ok := s.Tasks.(application.JudgeReader)
	if !ok {
		t.Skip("this store judges in a read-only transaction")
	}
	ctx := t.Context()
	model := repoName("model")
	next := s.at(20)
	o := s.stagedOffer(t, model, "2.0.0", next)
	view := func(t *testing.T) []ports.RolloutCount {
		t.Helper()
		got, counts, err := jr.JudgeView(ctx, o.Firmware.ID(), o.Rollout.ID())
		repoNoErr(t, "judge view", err)
		if got.Firmware.ID() != o.Firmware.ID() || got.Rollout.ID() != o.Rollout.ID() || !got.Rollout.StageSince().Equal(o.Rollout.StageSince()) {
			t.Fatalf("judge view read %s/%s since %s, want %s/%s since %s", got.Firmware.ID(), got.Rollout.ID(), got.Rollout.StageSince(),
				o.Firmware.ID(), o.Rollout.ID(), o.Rollout.StageSince())
		}
		return counts
	}
	if counts := view(t); len(counts) != 0 {
		t.Fatalf("a rollout without tasks has counters %+v", counts)
	}

	// Three devices in the first stage (two succeeded, one failed), two in
	// the second (one downloading, one pending).
	for i, st := range []domain.TaskStatus{domain.TaskSucceeded, domain.TaskSucceeded, domain.TaskFailed, domain.TaskDownloading, domain.TaskPending} {
		at := s.at(10 + i)
		if i >= 3 {
			at = s.at(30 + i)
		}
		tk := s.insert(t, s.newTask(t, s.device(t, model, "1.0.0").ID(), o, 1, at))
		if st != domain.TaskPending {
			s.drive(t, tk.ID(), st, at.Add(time.Second))
		}
	}
	first := o.Rollout.StageSince()
	counts := view(t)
	if len(counts) != 3 {
		t.Errorf("judge view read %d scopes (%+v), want 3: the whole rollout and two stages", len(counts), counts)
	}
	for _, since := range []time.Time{{}, first, next.Truncate(time.Microsecond)} {
		want, err := s.Tasks.RolloutStatsSince(ctx, o.Rollout.ID(), since)
		repoNoErr(t, "stats", err)
		var got *ports.RolloutCount
		for i := range counts {
			if counts[i].Stage.Equal(since) {
				got = &counts[i]
			}
		}
		if got == nil || got.Stats != want || got.Rollout != o.Rollout.ID() {
			t.Errorf("scope since %s: judge view %+v, want %+v", since, got, want)
		}
	}
	if want := (domain.TaskStats{Succeeded: 2, Failed: 1, Downloading: 1, Pending: 1}); !hasScope(counts, time.Time{}, want) {
		t.Errorf("the whole rollout's counts: %+v, want %+v", counts, want)
	}

	for _, ids := range [][2]domain.UUID{{o.Firmware.ID(), asUUID(uuid.NewString())}, {{}, o.Rollout.ID()}} {
		if _, _, err := jr.JudgeView(ctx, ids[0], ids[1]); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("judge view of %s/%s: %v, want not found", ids[0], ids[1], err)
		}
	}
}

// hasScope reports whether counts has the scope since with stats want.
func hasScope(counts []ports.RolloutCount, since time.Time, want domain.TaskStats) bool {
	for _, c := range counts {
		if c.Stage.Equal(since) {
			return c.Stats == want
		}
	}
	return false
}
