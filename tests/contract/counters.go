package contract

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// counters: a rollout's counters, kept by the task transactions
// (application.ReplaceActive, ApplyEvent, UpdateTask), equal a recount of
// its tasks — each device once, by domain.CountsOver, in the whole rollout
// and in each stage its tasks joined — after every kind of task change.
func (s *repoSuite) counters(t *testing.T) {
	ctx := t.Context()

	t.Run("MatchRecount", func(t *testing.T) {
		model := repoName("model")
		// Two stages whose gates never fail: the first holds on one
		// finished task, with no soak, so the first final event judged
		// advances the rollout.
		fw := s.firmware(t, repoSpec(model, "2.0.0"), s.at(1), true)
		threshold := 90
		staged := domain.Offer{Firmware: fw, Rollout: s.rollout(t, fw, domain.RolloutSpec{FailureThresholdPercent: &threshold, MinSample: new(100),
			Stages: []domain.StageRequest{{Percentage: new(50), MinFinished: new(1), SuccessPercent: new(0)}, {Percentage: new(100), SuccessPercent: new(0)}}}, s.at(2), true)}
		other := s.offer(t, model, "3.0.0")
		judge := func(at time.Time) application.RolloutEvaluation {
			return func(r *domain.Rollout, stats func(time.Time) (domain.TaskStats, error)) (bool, error) {
				total, err := stats(time.Time{})
				if err != nil {
					return false, err
				}
				stage, err := stats(r.StageSince())
				if err != nil {
					return false, err
				}
				return r.Evaluate(total, stage, at), nil
			}
		}
		check := func(step string) {
			t.Helper()
			s.countersMatch(t, step, staged.Rollout.ID(), other.Rollout.ID())
		}
		event := func(id domain.UUID, status string, at int) domain.Task {
			t.Helper()
			ev := repoEvent(t, uuid.NewString(), status, nil)
			got, err := application.ApplyEvent(ctx, s.Tasks, id, ev, func(tk *domain.Task, prior *domain.Event) (bool, error) {
				return tk.ApplyEvent(ev, prior, s.at(at))
			}, judge(s.at(at)))
			repoNoErr(t, "event "+status, err)
			return got
		}

		// Inserts: five devices, pending in the first stage.
		var devs []domain.Device
		var tasks []domain.Task
		for i := range 5 {
			devs = append(devs, s.device(t, model, "1.0.0"))
			tasks = append(tasks, s.insert(t, s.newTask(t, devs[i].ID(), staged, 1, s.at(10+i))))
		}
		check("inserts")
		// Progress, then a failure, which passes the first gate and
		// advances the rollout; a retry, in the second stage, succeeds.
		event(tasks[0].ID(), "downloading", 20)
		event(tasks[1].ID(), "failed", 21)
		r, err := s.Rollouts.Get(ctx, staged.Rollout.ID())
		repoNoErr(t, "get rollout", err)
		if r.Record().Stage != 1 {
			t.Fatalf("the first gate did not advance the rollout: %+v", r.Record())
		}
		staged.Rollout = r
		check("failure, stage advance")
		retry := s.insert(t, s.newTask(t, devs[1].ID(), staged, 2, s.at(22)))
		check("retry inserted")
		event(retry.ID(), "succeeded", 23)
		check("retry succeeded")
		// A task of the second stage, for a device that had one in the first.
		event(tasks[2].ID(), "failed", 24)
		second := s.insert(t, s.newTask(t, devs[2].ID(), staged, 2, s.at(25)))
		if !second.Stage().Equal(r.StageSince()) || second.Stage().Equal(tasks[2].Stage()) {
			t.Fatalf("the retry joined stage %v, want the second, %v", second.Stage(), r.StageSince())
		}
		check("second stage")
		// Supersede: a pending task cancelled for another rollout's, in one transaction.
		s.insert(t, s.newTask(t, devs[3].ID(), other, 1, s.at(26)))
		check("supersede")
		// Cancel (a protocol's stop before install).
		s.drive(t, tasks[4].ID(), domain.TaskCancelled, s.at(27))
		check("cancel")
		// A time-out, judged, by a check that then hands out a retry.
		late := s.at(25).Add(domain.DefaultTaskTimeout + time.Hour)
		_, created, err := application.ReplaceActive(ctx, s.Tasks, devs[2].ID(), func(st application.TaskState) (*domain.Task, error) {
			if st.Active == nil || !st.Active.Task.Settle(domain.MustParseVersion("1.0.0"), st.Active.Firmware, st.Active.Rollout, domain.DeviceFacts{}, late) {
				return nil, fmt.Errorf("no time-out: %+v", st.Active)
			}
			next := s.newTask(t, devs[2].ID(), staged, 3, late)
			return &next, nil
		}, judge(late))
		repoNoErr(t, "time-out", err)
		if !created {
			t.Fatal("no retry after the time-out")
		}
		check("time-out")
		// A success contradicted: the device reports the old version.
		_, _, err = application.ReplaceActive(ctx, s.Tasks, devs[1].ID(), func(st application.TaskState) (*domain.Task, error) {
			last, err := st.Latest()
			if err != nil || last == nil || !last.Task.Revert(last.Firmware.Version(), domain.MustParseVersion("1.0.0"), last.Firmware, last.Rollout, s.at(30)) {
				return nil, fmt.Errorf("no success to revert: %+v %v", last, err)
			}
			return nil, nil
		}, judge(s.at(30)))
		repoNoErr(t, "revert", err)
		check("revert")
	})

	t.Run("RaceOfFinalEvents", func(t *testing.T) {
		model := repoName("model")
		plain, watched := s.offer(t, model, "2.0.0"), s.watchedOffer(t, model, "3.0.0")
		const devices = 24
		var ids []domain.UUID
		for i := range devices {
			o := plain
			if i%2 == 1 {
				o = watched
			}
			d := s.device(t, model, "1.0.0")
			ids = append(ids, s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10))).ID())
		}
		var wg sync.WaitGroup
		errs := make(chan error, devices)
		for i, id := range ids {
			wg.Go(func() {
				end := "succeeded"
				if i%3 == 0 {
					end = "failed"
				}
				for k, status := range []string{"downloading", end} {
					ev, err := domain.NewEvent(fmt.Sprintf("e%d", k), status, nil, "", "")
					if err != nil {
						errs <- err
						return
					}
					var eval application.RolloutEvaluation
					if status == end {
						eval = evaluateAt(s.at(20))
					}
					if _, err := application.ApplyEvent(ctx, s.Tasks, id, ev, func(tk *domain.Task, prior *domain.Event) (bool, error) {
						return tk.ApplyEvent(ev, prior, s.at(11+k))
					}, eval); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("event: %v", err)
		}
		s.countersMatch(t, "after the race", plain.Rollout.ID(), watched.Rollout.ID())
		got, err := s.Tasks.RolloutStatsSince(ctx, plain.Rollout.ID(), time.Time{})
		repoNoErr(t, "stats", err)
		if want := (domain.TaskStats{Succeeded: 8, Failed: 4}); got != want {
			t.Errorf("plain rollout after the race: %+v, want %+v", got, want)
		}
	})
}

// countersMatch recounts each rollout's tasks here, from its listing, and
// compares the store's counters of the whole rollout and of every stage
// its tasks joined; a store that audits its counters (ports.CounterAudit,
// otad rollouts verify) must find no drift either.
func (s *repoSuite) countersMatch(t *testing.T, step string, rollouts ...domain.UUID) {
	t.Helper()
	ctx := t.Context()
	for _, id := range rollouts {
		var all []domain.Task
		for f := (ports.TaskFilter{RolloutID: id, Limit: 100}); ; {
			page, err := s.Tasks.List(ctx, f)
			repoNoErr(t, "list", err)
			all = append(all, page...)
			if len(page) < f.Limit {
				break
			}
			last := page[len(page)-1]
			f.After = &ports.TaskCursor{CreatedAt: last.CreatedAt(), ID: last.ID()}
		}
		type scope struct {
			stage  time.Time
			device domain.DeviceID
		}
		counted := map[scope]domain.Task{}
		for _, tk := range all {
			for _, stage := range []time.Time{{}, tk.Stage()} {
				k := scope{stage, tk.DeviceID()}
				if c, ok := counted[k]; !ok || domain.CountsOver(tk, c) {
					counted[k] = tk
				}
				if tk.Stage().IsZero() {
					break
				}
			}
		}
		want := map[time.Time]domain.TaskStats{{}: {}}
		for k, tk := range counted {
			st := want[k.stage]
			st.Add(tk.Status(), 1)
			want[k.stage] = st
		}
		for stage, w := range want {
			got, err := s.Tasks.RolloutStatsSince(ctx, id, stage)
			repoNoErr(t, "stats", err)
			if got != w {
				t.Errorf("%s: rollout %s, stage %v: counters %+v, recount %+v", step, id, stage, got, w)
			}
		}
		if audit, ok := s.Tasks.(ports.CounterAudit); ok {
			_, drift, err := application.VerifyCounters(context.WithoutCancel(ctx), audit, id)
			repoNoErr(t, "verify", err)
			if len(drift) > 0 {
				t.Errorf("%s: rollout %s: the store's audit found drift: %+v", step, id, drift)
			}
		}
	}
}
