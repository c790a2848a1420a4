package contract

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/google/uuid"
)

func (s *repoSuite) tasks(t *testing.T) {
	ctx := t.Context()

	t.Run("Counters", s.counters)

	t.Run("GetActiveMissing", func(t *testing.T) {
		for _, id := range []string{uuid.NewString(), "not-a-uuid", ""} {
			_, err := s.Tasks.Get(ctx, asUUID(id))
			repoIsNotFound(t, "get "+id, err)
		}
		_, err := s.Tasks.Active(ctx, asDeviceID(repoName("dev")))
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
		first, created, err := application.ReplaceActive(ctx, s.Tasks, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			if active != nil {
				t.Errorf("a device without tasks has active task %s", active.ID())
			}
			return &t1, nil
		}), nil)
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
		reused, created, err := application.ReplaceActive(ctx, s.Tasks, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			if active == nil {
				t.Fatal("fn did not get the active task")
			}
			repoSameTask(t, *active, want1)
			return nil, nil
		}), nil)
		repoNoErr(t, "reuse", err)
		if created {
			t.Error("created = true when fn inserted nothing")
		}
		repoSameTask(t, reused, want1)

		// Supersede: fn cancels the pending task and inserts the new one.
		t2 := s.newTask(t, d.ID(), o2, 1, s.at(11))
		second, created, err := application.ReplaceActive(ctx, s.Tasks, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			if err := active.Cancel(domain.CodeSuperseded, "a newer firmware is rolled out", s.at(11)); err != nil {
				return nil, err
			}
			return &t2, nil
		}), nil)
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
		got, created, err := application.ReplaceActive(ctx, s.Tasks, d.ID(), onActive(func(*domain.Task) (*domain.Task, error) { return &t3, nil }), nil)
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
		got, created, err := application.ReplaceActive(ctx, s.Tasks, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			return nil, active.Cancel(domain.CodeFirmwareRevoked, "the firmware was revoked", s.at(14))
		}), nil)
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
		got, created, err := application.ReplaceActive(ctx, s.Tasks, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			if active != nil {
				t.Errorf("unexpected active task %s", active.ID())
			}
			return nil, nil
		}), nil)
		repoNoErr(t, "replace", err)
		if created || !got.ID().IsZero() {
			t.Errorf("got task %q created=%v, want the zero task", got.ID(), created)
		}
	})

	t.Run("ReplaceActiveFnErrorStoresNothing", func(t *testing.T) {
		model := repoName("model")
		d := s.device(t, model, "1.0.0")
		o := s.offer(t, model, "2.0.0")
		pending := s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10)))
		t2 := s.newTask(t, d.ID(), s.offer(t, model, "3.0.0"), 1, s.at(11))
		_, _, err := application.ReplaceActive(ctx, s.Tasks, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			if err := active.Cancel(domain.CodeSuperseded, "superseded", s.at(11)); err != nil {
				return nil, err
			}
			return &t2, errRepoBoom
		}), nil)
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
					deviceID = s.device(t, model, "1.0.0").ID().String()
					pending = s.insert(t, s.newTask(t, asDeviceID(deviceID), o, 1, s.at(5)))
				}
				tk := s.newTask(t, asDeviceID(deviceID), c.offer, 1, s.at(6))
				_, _, err := application.ReplaceActive(ctx, s.Tasks, asDeviceID(deviceID), onActive(func(active *domain.Task) (*domain.Task, error) {
					if active != nil {
						if err := active.Cancel(domain.CodeSuperseded, "superseded", s.at(6)); err != nil {
							return nil, err
						}
					}
					return &tk, nil
				}), nil)
				repoIsNotFound(t, "task with an unknown "+name, err)
				_, err = s.Tasks.Get(ctx, tk.ID())
				repoIsNotFound(t, "refused task", err)
				if !pending.ID().IsZero() { // the cancellation was rolled back with the insert
					got, err := s.Tasks.Active(ctx, asDeviceID(deviceID))
					repoNoErr(t, "active", err)
					repoSameTask(t, got, pending.Record())
				} else {
					_, err = s.Tasks.Active(ctx, asDeviceID(deviceID))
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
		got, created, err := application.ReplaceActive(ctx, s.Tasks, d.ID(), onActive(func(*domain.Task) (*domain.Task, error) { return &tk, nil }), nil)
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
		if _, _, err := application.ReplaceActive(ctx, s.Tasks, d.ID(), onActive(func(*domain.Task) (*domain.Task, error) { return &same, nil }), nil); err == nil {
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
		_, _, err := application.ReplaceActive(repoCancelled(t), s.Tasks, d.ID(), onActive(func(*domain.Task) (*domain.Task, error) {
			t.Error("fn called under a cancelled context")
			return &tk, nil
		}), nil)
		if err == nil {
			t.Error("replace with a cancelled context succeeded")
		}

		// The lock is lost while fn runs: the transaction must roll back.
		lost, cancel := context.WithCancel(ctx)
		_, _, err = application.ReplaceActive(lost, s.Tasks, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			if err := active.Cancel(domain.CodeSuperseded, "superseded", s.at(11)); err != nil {
				return nil, err
			}
			cancel()
			return &tk, nil
		}), nil)
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

		got, err := application.UpdateTask(ctx, s.Tasks, tk.ID(), func(x *domain.Task) error {
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

		_, err = application.UpdateTask(ctx, s.Tasks, tk.ID(), func(x *domain.Task) error {
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
		_, err = application.UpdateTask(lost, s.Tasks, tk.ID(), func(x *domain.Task) error {
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
			_, err = application.UpdateTask(ctx, s.Tasks, asUUID(id), func(*domain.Task) error {
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
	t.Run("SuccessRecordsTheInstalledVersion", func(t *testing.T) { s.successRecordsVersion(t) })

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
				_, err := application.ApplyEvent(ctx, s.Tasks, tk.ID(), ev, func(x *domain.Task, prior *domain.Event) (bool, error) {
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
	t.Run("RolloutStatsCountEachDeviceOnce", func(t *testing.T) { s.rolloutStatsEachDeviceOnce(t) })
	t.Run("FailedCounts", func(t *testing.T) { s.failedCounts(t) })
	t.Run("CheckView", func(t *testing.T) { s.checkView(t) })
	t.Run("ReplaceActiveState", func(t *testing.T) { s.replaceActiveState(t) })
	t.Run("LatestFinalHasAnOutcome", func(t *testing.T) { s.latestFinal(t) })
	t.Run("ReplaceActiveOfferWithdrawn", func(t *testing.T) { s.offerWithdrawn(t) })
	t.Run("InsertIfUnchanged", func(t *testing.T) { s.insertIfUnchanged(t) })
	t.Run("UpdateIfUnchanged", func(t *testing.T) { s.updateIfUnchanged(t) })
	t.Run("JudgeView", func(t *testing.T) { s.judgeView(t) })
	t.Run("ApplyEventEvaluatesRollout", func(t *testing.T) { s.applyEventRollout(t) })
	t.Run("FinalEventsRacingAcrossAThreshold", func(t *testing.T) { s.finalEventsAcrossAThreshold(t) })
	t.Run("SweepJudgesWhatAnEventLeft", func(t *testing.T) { s.sweepJudges(t) })
	t.Run("ReplaceActiveEvaluatesRollout", func(t *testing.T) { s.replaceActiveRollout(t) })
	t.Run("ReplaceActiveRolloutSwapRace", func(t *testing.T) { s.replaceActiveRolloutSwap(t) })
	t.Run("ReplaceActiveJudgesTheLockedRollout", func(t *testing.T) { s.replaceActiveJudgesLocked(t) })
	t.Run("ApplyEventUnchangedReturnsTheStoredTask", func(t *testing.T) { s.applyEventUnchanged(t) })
}

// applyEventUnchanged: when fn reports no change, whatever it did to its
// copy is dropped, and every store returns the task as stored (the memory
// store once returned fn's copy, Postgres the stored row).
func (s *repoSuite) applyEventUnchanged(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")
	o := s.offer(t, model, "2.0.0")
	d := s.device(t, model, "1.0.0")
	tk := s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10)))
	ev := repoEvent(t, "evt-unchanged", "downloading", repoInt(40))
	got, err := application.ApplyEvent(ctx, s.Tasks, tk.ID(), ev, func(x *domain.Task, prior *domain.Event) (bool, error) {
		if _, err := x.ApplyEvent(ev, prior, s.at(11)); err != nil {
			return false, err
		}
		return false, nil // changed its copy, but says it did not
	}, nil)
	repoNoErr(t, "apply unchanged", err)
	repoSameTask(t, got, tk.Record())
	stored, err := s.Tasks.Get(ctx, tk.ID())
	repoNoErr(t, "get", err)
	repoSameTask(t, stored, tk.Record())
	if evs, err := s.Tasks.Events(ctx, tk.ID(), 10); err != nil || len(evs) != 0 {
		t.Errorf("events after an unchanged apply: %v, %v; want none", evs, err)
	}
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
			got, created, err := application.ReplaceActive(ctx, s.Tasks, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
				if active != nil && !alwaysInsert {
					return nil, nil
				}
				return &mine[i], nil
			}), nil)
			results[i] = outcome{got, created, err}
		})
	}
	close(start)
	wg.Wait()

	winners := 0
	var winner domain.UUID
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
		got, err := application.ApplyEvent(ctx, s.Tasks, asUUID(id), ev, func(x *domain.Task, prior *domain.Event) (bool, error) {
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
	got, prior, err := apply(tk.ID().String(), ev1, s.at(11))
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
	got, prior, err = apply(tk.ID().String(), ev1, s.at(12))
	repoNoErr(t, "replay", err)
	if prior == nil || prior.ID() != ev1.ID() || !prior.SameBody(ev1) {
		t.Fatalf("replay: prior = %+v, want the recorded event", prior)
	}
	repoSameTask(t, got, want)

	// The same id with another body is a conflict, and changes nothing.
	ev1b := repoEvent(t, "evt-1", "downloading", repoInt(20))
	_, prior, err = apply(tk.ID().String(), ev1b, s.at(13))
	if !errors.Is(err, domain.ErrIdempotencyConflict) {
		t.Errorf("conflicting reuse: err = %v, want domain.ErrIdempotencyConflict", err)
	}
	if prior == nil || prior.SameBody(ev1b) {
		t.Errorf("conflicting reuse: prior = %+v, want the recorded, different event", prior)
	}
	stored, err = s.Tasks.Get(ctx, tk.ID())
	repoNoErr(t, "get", err)
	repoSameTask(t, stored, want)
	// The store itself refuses an event id already recorded for the task
	// (ports.TaskTx.StoreEvent), should a caller skip the lookup.
	if err := s.Tasks.InTaskTx(ctx, func(tx ports.TaskTx) error { return tx.StoreEvent(stored, ev1) }); err == nil {
		t.Error("storing a recorded event id again: no error")
	}

	// fn reporting no change stores neither the task nor the event.
	ev2 := repoEvent(t, "evt-2", "downloaded", nil)
	_, err = application.ApplyEvent(ctx, s.Tasks, tk.ID(), ev2, func(x *domain.Task, _ *domain.Event) (bool, error) {
		_, err := x.ApplyEvent(ev2, nil, s.at(14))
		return false, err
	}, nil)
	repoNoErr(t, "unchanged", err)
	stored, err = s.Tasks.Get(ctx, tk.ID())
	repoNoErr(t, "get", err)
	repoSameTask(t, stored, want)
	// fn failing stores nothing either.
	ev3 := repoEvent(t, "evt-3", "installing", nil)
	_, err = application.ApplyEvent(ctx, s.Tasks, tk.ID(), ev3, func(x *domain.Task, _ *domain.Event) (bool, error) {
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
	got, prior, err = apply(tk.ID().String(), ev2, s.at(16))
	repoNoErr(t, "event after no-change", err)
	if prior != nil {
		t.Error("an event fn reported unchanged was recorded")
	}
	want.Status, want.Progress, want.UpdatedAt = domain.TaskDownloaded, 0, s.at(16)
	repoSameTask(t, got, want)
	got, prior, err = apply(tk.ID().String(), ev3, s.at(17))
	repoNoErr(t, "event after failure", err)
	if prior != nil {
		t.Error("an event whose fn failed was recorded")
	}
	want.Status, want.UpdatedAt = domain.TaskInstalling, s.at(17)
	repoSameTask(t, got, want)

	// Event ids are scoped to their task.
	other := s.device(t, model, "1.0.0")
	otk := s.insert(t, s.newTask(t, other.ID(), o, 1, s.at(10)))
	_, prior, err = apply(otk.ID().String(), ev1, s.at(18))
	repoNoErr(t, "same event id on another task", err)
	if prior != nil {
		t.Error("another task's event was given as prior")
	}

	// A context that ends inside fn (a lost lock) stores nothing.
	ev4 := repoEvent(t, "evt-4", "succeeded", nil)
	lost, cancel := context.WithCancel(ctx)
	_, err = application.ApplyEvent(lost, s.Tasks, tk.ID(), ev4, func(x *domain.Task, prior *domain.Event) (bool, error) {
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
	got, prior, err = apply(tk.ID().String(), ev4, s.at(20))
	repoNoErr(t, "final event", err)
	if prior != nil {
		t.Error("an event applied under an ended context was recorded")
	}
	want.Status, want.Progress, want.UpdatedAt = domain.TaskSucceeded, 100, s.at(20)
	repoSameTask(t, got, want)
	_, err = s.Tasks.Active(ctx, d.ID())
	repoIsNotFound(t, "active after success", err)

	for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
		_, err = application.ApplyEvent(ctx, s.Tasks, asUUID(id), ev1, func(*domain.Task, *domain.Event) (bool, error) {
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
			ids = append(ids, tk.ID().String())
		}
	}
	r2ids := []string{
		s.insert(t, s.newTask(t, d4.ID(), o2, 1, s.at(100))).ID().String(),
		s.insert(t, s.newTask(t, d4.ID(), o2, 2, s.at(101))).ID().String(),
	}

	stored := map[string]domain.Task{}
	for _, id := range append(slices.Clone(ids), r2ids...) {
		tk, err := s.Tasks.Get(ctx, asUUID(id))
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
			repoSameTask(t, tk, stored[tk.ID().String()].Record())
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
			repoSameTask(t, tk, stored[tk.ID().String()].Record())
			walked = append(walked, tk.ID().String())
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
		After: &ports.TaskCursor{CreatedAt: stored[byRollout[6]].CreatedAt(), ID: asUUID(byRollout[6])}}, byRollout[7:11])
	// A cursor's time finer than the stored microseconds counts at
	// microseconds, as Postgres reads it: the tasks sharing the 7th's
	// created_at and after it by id are still listed.
	check("rollout, after the 7th, the cursor at nanoseconds", ports.TaskFilter{RolloutID: r1.ID(), Limit: 4,
		After: &ports.TaskCursor{CreatedAt: stored[byRollout[6]].CreatedAt().Add(400 * time.Nanosecond), ID: asUUID(byRollout[6])}}, byRollout[7:11])
	check("rollout, after the last", ports.TaskFilter{RolloutID: r1.ID(), Limit: 5,
		After: &ports.TaskCursor{CreatedAt: stored[byRollout[23]].CreatedAt(), ID: asUUID(byRollout[23])}}, []string{})
	check("other rollout", ports.TaskFilter{RolloutID: r2.ID(), Limit: 100}, order(r2ids))
	check("rollout without tasks", ports.TaskFilter{RolloutID: asUUID(uuid.NewString()), Limit: 100}, []string{})

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
		After: &ports.TaskCursor{CreatedAt: stored[dev0[1]].CreatedAt(), ID: asUUID(dev0[1])}}, dev0[2:4])
	check("other device", ports.TaskFilter{DeviceID: d4.ID(), Limit: 100}, order(r2ids))
	check("device and rollout", ports.TaskFilter{DeviceID: d4.ID(), RolloutID: r1.ID(), Limit: 100}, []string{})
	check("rollout and status", ports.TaskFilter{RolloutID: r1.ID(), Status: &pending, Limit: 100}, pendingIDs)
	check("device and status", ports.TaskFilter{DeviceID: devs[0].ID(), Status: &cancelled, Limit: 100}, dev0Cancelled)
	check("all three", ports.TaskFilter{DeviceID: devs[0].ID(), RolloutID: r1.ID(), Status: &pending, Limit: 100}, dev0[5:])
	check("other rollout, status", ports.TaskFilter{RolloutID: r2.ID(), Status: &cancelled, Limit: 100}, r2ids[:1])
	check("unknown device", ports.TaskFilter{DeviceID: asDeviceID(repoName("dev")), Limit: 100}, []string{})
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
		id   domain.UUID
		want domain.TaskStats
	}{
		{o.Rollout.ID(), domain.TaskStats{Pending: 1, Downloading: 2, Downloaded: 1, Installing: 1, Succeeded: 3, Failed: 2, Cancelled: 1}},
		{r2.ID(), domain.TaskStats{Pending: 1}},
		{empty.ID(), domain.TaskStats{}},
	} {
		got, err := s.Tasks.RolloutStatsSince(ctx, c.id, time.Time{})
		repoNoErr(t, "stats", err)
		if got != c.want {
			t.Errorf("stats of %s: got %+v, want %+v", c.id, got, c.want)
		}
	}
}

// rolloutStatsEachDeviceOnce: a device given the same rollout's firmware
// again (a retry after a failure, a reinstall, a success later
// contradicted) counts once — by its latest task with an outcome
// (succeeded or failed), else by its latest task (domain.CountsOver) — in
// the rollout's stats, in a stage's (among its tasks created since), and
// in what an evaluation counts in the transaction that ends a task.
func (s *repoSuite) rolloutStatsEachDeviceOnce(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")
	o := s.stagedOffer(t, model, "2.0.0", s.at(12))
	// Each device's tasks, oldest first, and the status each ends in.
	type step struct {
		at     int
		status domain.TaskStatus
	}
	devices := [][]step{
		{{10, domain.TaskFailed}, {12, domain.TaskSucceeded}},    // a retry that worked
		{{10, domain.TaskSucceeded}, {14, domain.TaskFailed}},    // a reinstall that failed
		{{10, domain.TaskFailed}, {15, domain.TaskPending}},      // a retry in flight: still failed
		{{10, domain.TaskFailed}, {11, domain.TaskFailed}},       // two failures, both before the stage
		{{16, domain.TaskSucceeded}},                             // one task
		{{10, domain.TaskCancelled}, {17, domain.TaskSucceeded}}, // offered again after a cancel
		{{12, domain.TaskFailed}, {13, domain.TaskSucceeded}},    // a retry within the stage
		{{10, domain.TaskSucceeded}, {11, domain.TaskCancelled}}, // a cancel undoes no outcome
		{{16, domain.TaskPending}},                               // no outcome yet
		{{21, domain.TaskFailed}, {21, domain.TaskSucceeded}},    // the same instant: the later inserted
	}
	for _, steps := range devices {
		d := s.device(t, model, "1.0.0")
		for _, st := range steps {
			tk := s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(st.at)))
			s.drive(t, tk.ID(), st.status, s.at(st.at))
		}
	}
	all := domain.TaskStats{Succeeded: 6, Failed: 3, Pending: 1}
	stage := domain.TaskStats{Succeeded: 5, Failed: 1, Pending: 2} // created at or after at(12): in the second stage
	got, err := s.Tasks.RolloutStatsSince(ctx, o.Rollout.ID(), time.Time{})
	repoNoErr(t, "stats", err)
	if got != all {
		t.Errorf("stats %+v, want %+v: one count per device (domain.CountsOver)", got, all)
	}
	got, err = s.Tasks.RolloutStatsSince(ctx, o.Rollout.ID(), s.at(12))
	repoNoErr(t, "stats since", err)
	if got != stage {
		t.Errorf("stats since %+v, want %+v: one count per device, among its tasks of the stage (domain.CountsOver)", got, stage)
	}

	// The evaluation's counts, with a retry ending in its transaction: the
	// device's earlier failure no longer counts, its success does.
	d := s.device(t, model, "1.0.0")
	s.drive(t, s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(18))).ID(), domain.TaskFailed, s.at(18))
	retry := s.insert(t, s.newTask(t, d.ID(), o, 2, s.at(19)))
	ev := repoEvent(t, "done", "succeeded", nil)
	calls := 0
	_, err = application.ApplyEvent(ctx, s.Tasks, retry.ID(), ev, func(tk *domain.Task, prior *domain.Event) (bool, error) {
		return tk.ApplyEvent(ev, prior, s.at(20))
	}, func(_ *domain.Rollout, stats func(time.Time) (domain.TaskStats, error)) (bool, error) {
		calls++
		for _, c := range []struct {
			since time.Time
			want  domain.TaskStats
		}{
			{time.Time{}, domain.TaskStats{Succeeded: all.Succeeded + 1, Failed: all.Failed, Pending: all.Pending}},
			{s.at(12), domain.TaskStats{Succeeded: stage.Succeeded + 1, Failed: stage.Failed, Pending: stage.Pending}},
		} {
			got, err := stats(c.since)
			if err != nil {
				return false, err
			}
			if got != c.want {
				t.Errorf("evaluation's stats since %v: %+v, want %+v", c.since, got, c.want)
			}
		}
		return false, nil
	})
	repoNoErr(t, "apply event", err)
	if calls != 1 {
		t.Fatalf("evaluation called %d times, want 1", calls)
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

	failed := func(id domain.DeviceID) map[string]int {
		v, err := s.Tasks.CheckViewOf(ctx, id)
		repoNoErr(t, "check view", err)
		return v.Tasks.Failed
	}
	want := map[string]int{oA.Firmware.ID().String(): 2, oB.Firmware.ID().String(): 1}
	if got := failed(d.ID()); !maps.Equal(got, want) {
		t.Errorf("failed counts %v, want %v", got, want)
	}
	if got, want := failed(other.ID()), map[string]int{oC.Firmware.ID().String(): 1}; !maps.Equal(got, want) {
		t.Errorf("the other device's failed counts %v, want %v", got, want)
	}
	if got := failed(s.device(t, model, "1.0.0").ID()); got == nil || len(got) != 0 {
		t.Errorf("a device without failures has %v, want an empty map", got)
	}
}

// checkView: the device by token hash or id with its active task and
// failed counts, as Get and Active see them.
func (s *repoSuite) checkView(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")
	o1, o2 := s.offer(t, model, "2.0.0"), s.offer(t, model, "3.0.0")
	idle := s.device(t, model, "1.0.0")
	busy := s.device(t, model, "1.0.0")
	s.drive(t, s.insert(t, s.newTask(t, busy.ID(), o1, 1, s.at(10))).ID(), domain.TaskFailed, s.at(11))
	s.drive(t, s.insert(t, s.newTask(t, busy.ID(), o1, 2, s.at(12))).ID(), domain.TaskFailed, s.at(13))
	active := s.insert(t, s.newTask(t, busy.ID(), o2, 1, s.at(14)))

	for _, tc := range []struct {
		d      domain.Device
		active *domain.Task
		failed map[string]int
	}{
		{d: idle, failed: map[string]int{}},
		{d: busy, active: &active, failed: map[string]int{o1.Firmware.ID().String(): 2}},
	} {
		byToken, err := s.Tasks.CheckView(ctx, tc.d.TokenHash())
		repoNoErr(t, "check view by token", err)
		byID, err := s.Tasks.CheckViewOf(ctx, tc.d.ID())
		repoNoErr(t, "check view by id", err)
		for _, v := range []ports.CheckView{byToken, byID} {
			repoSameDevice(t, v.Device, tc.d)
			if v.Tasks.Failed == nil || !maps.Equal(v.Tasks.Failed, tc.failed) {
				t.Errorf("%s: failed %v, want %v", tc.d.ID(), v.Tasks.Failed, tc.failed)
			}
			switch {
			case tc.active == nil && v.Tasks.Active != nil:
				t.Errorf("%s: active %s, want none", tc.d.ID(), v.Tasks.Active.ID())
			case tc.active != nil && v.Tasks.Active == nil:
				t.Errorf("%s: no active task, want %s", tc.d.ID(), tc.active.ID())
			case tc.active != nil:
				repoSameTask(t, *v.Tasks.Active, tc.active.Record())
			}
		}
	}
	_, err := s.Tasks.CheckView(ctx, s.hash(t))
	repoIsNotFound(t, "check view of an unknown token", err)
	for _, id := range []string{repoName("dev"), "", "bad\x00id", strings.Repeat("x", 65)} {
		_, err := s.Tasks.CheckViewOf(ctx, asDeviceID(id))
		repoIsNotFound(t, "check view of "+id, err)
	}
	_, err = s.Tasks.CheckViewOf(repoCancelled(t), busy.ID())
	if err == nil {
		t.Error("check view with a cancelled context succeeded")
	}
}

// replaceActiveState: fn sees the active task with its firmware and
// rollout as stored, and the failed counts, in the transaction.
func (s *repoSuite) replaceActiveState(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")
	o1, o2 := s.offer(t, model, "2.0.0"), s.offer(t, model, "3.0.0")
	d := s.device(t, model, "1.0.0")
	s.drive(t, s.insert(t, s.newTask(t, d.ID(), o2, 1, s.at(10))).ID(), domain.TaskFailed, s.at(11))
	active := s.insert(t, s.newTask(t, d.ID(), o1, 1, s.at(12)))
	// The rollout changes after the task was created: fn sees it as stored.
	paused, err := application.UpdateRollout(ctx, s.Tasks, o1.Rollout.ID(), func(r *domain.Rollout, fw domain.Firmware) error {
		return r.ChangeStatus(domain.RolloutPaused, fw, s.at(13))
	}, nil)
	repoNoErr(t, "pause", err)
	calls := 0
	_, _, err = application.ReplaceActive(ctx, s.Tasks, d.ID(), func(st application.TaskState) (*domain.Task, error) {
		calls++
		if st.Active == nil {
			t.Fatal("no active task in the state")
		}
		repoSameTask(t, st.Active.Task, active.Record())
		repoSameFirmware(t, st.Active.Firmware, o1.Firmware)
		repoSameRollout(t, st.Active.Rollout, paused)
		if want := map[string]int{o2.Firmware.ID().String(): 1}; !maps.Equal(st.Failed, want) {
			t.Errorf("failed %v, want %v", st.Failed, want)
		}
		return nil, nil
	}, nil)
	repoNoErr(t, "replace active", err)
	if calls != 1 {
		t.Errorf("fn called %d times", calls)
	}
	fresh := s.device(t, model, "1.0.0")
	_, _, err = application.ReplaceActive(ctx, s.Tasks, fresh.ID(), func(st application.TaskState) (*domain.Task, error) {
		if st.Active != nil || st.Failed == nil || len(st.Failed) != 0 {
			t.Errorf("state of a device without tasks: %+v", st)
		}
		return nil, nil
	}, nil)
	repoNoErr(t, "replace active without tasks", err)
}

// latestFinal: ports.TaskTx.LatestFinal is the device's latest task with
// an outcome (succeeded or failed), passing over cancelled ones, which say
// nothing about the device (check rule 4): the success a later report may
// contradict (event rule 7) is found behind a task withdrawn since. A
// device with an active task, or with no task with an outcome, has none.
func (s *repoSuite) latestFinal(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")
	o1, o2, o3 := s.offer(t, model, "2.0.0"), s.offer(t, model, "3.0.0"), s.offer(t, model, "4.0.0")
	d := s.device(t, model, "1.0.0")
	latest := func(what string) *domain.ActiveTask {
		t.Helper()
		var got *domain.ActiveTask
		repoNoErr(t, what, s.Tasks.InTaskTx(ctx, func(tx ports.TaskTx) error {
			var err error
			got, err = tx.LatestFinal(d.ID())
			return err
		}))
		return got
	}
	if got := latest("no task"); got != nil {
		t.Fatalf("a device without tasks: latest %+v", got.Task.Record())
	}
	withdrawn := s.insert(t, s.newTask(t, d.ID(), o1, 1, s.at(10)))
	s.drive(t, withdrawn.ID(), domain.TaskCancelled, s.at(11))
	if got := latest("only cancelled"); got != nil {
		t.Fatalf("a device whose only task was cancelled: latest %+v", got.Task.Record())
	}
	failed := s.drive(t, s.insert(t, s.newTask(t, d.ID(), o1, 1, s.at(12))).ID(), domain.TaskFailed, s.at(13))
	if got := latest("failed"); got == nil || got.Task.ID() != failed.ID() {
		t.Fatalf("latest %+v, want the failed task %s", got, failed.ID())
	}
	success := s.drive(t, s.insert(t, s.newTask(t, d.ID(), o2, 1, s.at(14))).ID(), domain.TaskSucceeded, s.at(15))
	// Withdrawn since the success: superseded, then cancelled with its rollout.
	s.insert(t, s.newTask(t, d.ID(), o3, 1, s.at(16))) // superseded by the next insert
	cancelled := s.insert(t, s.newTask(t, d.ID(), o2, 2, s.at(17)))
	if got := latest("behind an active task"); got != nil {
		t.Fatalf("a device with an active task: latest %+v", got.Task.Record())
	}
	s.drive(t, cancelled.ID(), domain.TaskCancelled, s.at(18))
	got := latest("behind cancelled tasks")
	if got == nil {
		t.Fatalf("no latest task: want the success %s behind two cancelled ones", success.ID())
	}
	repoSameTask(t, got.Task, success.Record())
	repoSameFirmware(t, got.Firmware, o2.Firmware)
	if got.Rollout.ID() != o2.Rollout.ID() {
		t.Errorf("latest task's rollout %s, want %s", got.Rollout.ID(), o2.Rollout.ID())
	}
}

// offerWithdrawn: a task is inserted only if, at commit, its firmware is
// released and its rollout active; otherwise nothing fn did is stored. A
// revoke in progress is waited for, not read around.
func (s *repoSuite) offerWithdrawn(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name     string
		withdraw func(t *testing.T, o domain.Offer)
	}{
		{"firmware revoked", func(t *testing.T, o domain.Offer) {
			_, err := s.Firmwares.Update(ctx, o.Firmware.ID(), func(f *domain.Firmware) error { f.Revoke(s.at(20)); return nil }, nil)
			repoNoErr(t, "revoke", err)
		}},
		{"rollout paused", func(t *testing.T, o domain.Offer) {
			_, err := application.UpdateRollout(ctx, s.Tasks, o.Rollout.ID(), func(r *domain.Rollout, fw domain.Firmware) error {
				return r.ChangeStatus(domain.RolloutPaused, fw, s.at(20))
			}, nil)
			repoNoErr(t, "pause", err)
		}},
		{"rollout cancelled", func(t *testing.T, o domain.Offer) {
			_, err := application.UpdateRollout(ctx, s.Tasks, o.Rollout.ID(), func(r *domain.Rollout, fw domain.Firmware) error {
				return r.ChangeStatus(domain.RolloutCancelled, fw, s.at(20))
			}, nil)
			repoNoErr(t, "cancel", err)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := repoName("model")
			o1, o2 := s.offer(t, model, "2.0.0"), s.offer(t, model, "3.0.0")
			d := s.device(t, model, "1.0.0")
			old := s.insert(t, s.newTask(t, d.ID(), o1, 1, s.at(10)))
			tc.withdraw(t, o2) // after the caller chose o2 (its copy is stale)
			next := s.newTask(t, d.ID(), o2, 1, s.at(21))
			_, created, err := application.ReplaceActive(ctx, s.Tasks, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
				if err := active.Cancel(domain.CodeSuperseded, "superseded", s.at(21)); err != nil {
					return nil, err
				}
				return &next, nil
			}), nil)
			if !errors.Is(err, domain.ErrOfferWithdrawn) || created {
				t.Fatalf("insert for a withdrawn offer: created=%v err=%v, want ErrOfferWithdrawn", created, err)
			}
			got, err := s.Tasks.Active(ctx, d.ID())
			repoNoErr(t, "active", err)
			repoSameTask(t, got, old.Record()) // the supersede was not stored either
			_, err = s.Tasks.Get(ctx, next.ID())
			repoIsNotFound(t, "the refused task", err)
		})
	}

	t.Run("revoke in progress is waited for", func(t *testing.T) {
		model := repoName("model")
		o := s.offer(t, model, "2.0.0")
		d := s.device(t, model, "1.0.0")
		inside, release := make(chan struct{}), make(chan struct{})
		revoked := make(chan error, 1)
		go func() {
			_, err := s.Firmwares.Update(ctx, o.Firmware.ID(), func(f *domain.Firmware) error {
				f.Revoke(s.at(20))
				close(inside)
				<-release // the revoke's transaction stays open, holding the row
				return nil
			}, nil)
			revoked <- err
		}()
		<-inside
		inserted := make(chan error, 1)
		tk := s.newTask(t, d.ID(), o, 1, s.at(21))
		go func() {
			_, _, err := application.ReplaceActive(ctx, s.Tasks, d.ID(), func(application.TaskState) (*domain.Task, error) { return &tk, nil }, nil)
			inserted <- err
		}()
		select {
		case err := <-inserted:
			t.Fatalf("the insert did not wait for the revoke in progress: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		close(release)
		repoNoErr(t, "revoke", <-revoked)
		if err := <-inserted; !errors.Is(err, domain.ErrOfferWithdrawn) {
			t.Fatalf("insert after the revoke committed: %v, want ErrOfferWithdrawn", err)
		}
		_, err := s.Tasks.Active(ctx, d.ID())
		repoIsNotFound(t, "active task after the refused insert", err)
	})
}

// applyEventRollout: onRollout judges the ended task's rollout after the
// event's commit, on counters that include the change: first a copy, and,
// only when that judgement changes it, the rollout locked, whose change is
// stored. A failed judgement leaves the event stored and is made again by
// a replay of the final report.
func (s *repoSuite) applyEventRollout(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")
	o := s.offer(t, model, "2.0.0")
	d1, d2 := s.device(t, model, "1.0.0"), s.device(t, model, "1.0.0")
	s.drive(t, s.insert(t, s.newTask(t, d1.ID(), o, 1, s.at(10))).ID(), domain.TaskSucceeded, s.at(11))
	tk := s.insert(t, s.newTask(t, d2.ID(), o, 1, s.at(12)))
	fail := func(t *domain.Task, prior *domain.Event) (bool, error) {
		ev, _ := domain.NewEvent("end", "failed", nil, "E", "")
		return t.ApplyEvent(ev, prior, s.at(13))
	}
	ev, err := domain.NewEvent("end", "failed", nil, "E", "")
	repoNoErr(t, "event", err)

	// A failing judgement fails the call as busy (the device resends),
	// but the event is stored: it was committed before the judgement.
	_, err = application.ApplyEvent(ctx, s.Tasks, tk.ID(), ev, fail, func(*domain.Rollout, func(time.Time) (domain.TaskStats, error)) (bool, error) {
		return false, errRepoBoom
	})
	if !errors.Is(err, errRepoBoom) || !errors.Is(err, domain.ErrServiceBusy) {
		t.Fatalf("failing evaluation: %v, want busy with its cause", err)
	}
	if got, _ := s.Tasks.Get(ctx, tk.ID()); got.Status() != domain.TaskFailed {
		t.Fatalf("task %s after a failed judgement, want the event stored (failed)", got.Status())
	}

	// The replay judges again: the copy, then the rollout locked, each
	// on the counters with the failure.
	calls := 0
	got, err := application.ApplyEvent(ctx, s.Tasks, tk.ID(), ev, fail, func(r *domain.Rollout, stats func(time.Time) (domain.TaskStats, error)) (bool, error) {
		calls++
		if r.ID() != o.Rollout.ID() || r.Status() != domain.RolloutActive {
			t.Errorf("rollout %s (%s), want %s active", r.ID(), r.Status(), o.Rollout.ID())
		}
		st, err := stats(time.Time{})
		if err != nil {
			return false, err
		}
		if st.Succeeded != 1 || st.Failed != 1 || st.Pending != 0 {
			t.Errorf("stats %+v, want 1 succeeded and this task failed", st)
		}
		return true, r.ChangeStatus(domain.RolloutPaused, o.Firmware, s.at(13))
	})
	repoNoErr(t, "replay", err)
	if got.Status() != domain.TaskFailed || calls != 2 {
		t.Fatalf("task %s, evaluation called %d times, want the copy's and the locked rollout's", got.Status(), calls)
	}
	r, err := s.Rollouts.Get(ctx, o.Rollout.ID())
	repoNoErr(t, "rollout", err)
	if r.Status() != domain.RolloutPaused || !r.UpdatedAt().Equal(repoUs(s.at(13))) {
		t.Fatalf("rollout %s updated %v, want paused at %v", r.Status(), r.UpdatedAt(), s.at(13))
	}
	if offers, _ := s.Rollouts.Offers(ctx, model); len(offers) != 0 {
		t.Fatalf("a paused rollout is still offered: %d offers", len(offers))
	}

	// A judgement that would change nothing is made on the copy only:
	// what it did to the copy is not stored.
	calls = 0
	_, err = application.ApplyEvent(ctx, s.Tasks, tk.ID(), ev, fail, func(r *domain.Rollout, _ func(time.Time) (domain.TaskStats, error)) (bool, error) {
		calls++
		return false, r.ChangeStatus(domain.RolloutCancelled, o.Firmware, s.at(14))
	})
	repoNoErr(t, "replay judged unchanged", err)
	if r, _ := s.Rollouts.Get(ctx, o.Rollout.ID()); calls != 1 || r.Status() != domain.RolloutPaused {
		t.Fatalf("evaluation called %d times, rollout %s; want one call on the copy, the rollout still paused", calls, r.Status())
	}
	// A progress event (not final) is not judged.
	d3 := s.device(t, model, "1.0.0")
	o2 := s.offer(t, model, "2.1.0")
	tk3 := s.insert(t, s.newTask(t, d3.ID(), o2, 1, s.at(15)))
	prog, err := domain.NewEvent("p", "downloading", nil, "", "")
	repoNoErr(t, "progress event", err)
	_, err = application.ApplyEvent(ctx, s.Tasks, tk3.ID(), prog, func(x *domain.Task, prior *domain.Event) (bool, error) {
		return x.ApplyEvent(prog, prior, s.at(16))
	}, func(*domain.Rollout, func(time.Time) (domain.TaskStats, error)) (bool, error) {
		t.Error("a task still active judged its rollout")
		return false, nil
	})
	repoNoErr(t, "progress", err)
}

// replaceActiveRollout: when fn ends the active task, onRollout judges that
// task's rollout in the same transaction, counting the ended task, and
// what it changes is stored with the task — or nothing is. A judgement
// that pauses the rollout the new task belongs to withdraws the insert.
func (s *repoSuite) replaceActiveRollout(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")
	o := s.watchedOffer(t, model, "2.0.0")
	d1, d2 := s.device(t, model, "1.0.0"), s.device(t, model, "1.0.0")
	s.drive(t, s.insert(t, s.newTask(t, d1.ID(), o, 1, s.at(10))).ID(), domain.TaskSucceeded, s.at(11))
	tk := s.insert(t, s.newTask(t, d2.ID(), o, 1, s.at(12)))
	succeed := onActive(func(active *domain.Task) (*domain.Task, error) {
		return nil, active.Succeed(s.at(13))
	})
	pause := func(r *domain.Rollout, _ func(time.Time) (domain.TaskStats, error)) (bool, error) {
		return true, r.ChangeStatus(domain.RolloutPaused, o.Firmware, s.at(13))
	}

	// A rollout with nothing to judge (no threshold, no stages) is neither
	// locked nor judged when its task ends.
	plain := s.offer(t, model, "1.5.0")
	d0 := s.device(t, model, "1.0.0")
	s.insert(t, s.newTask(t, d0.ID(), plain, 1, s.at(12)))
	if _, _, err := application.ReplaceActive(ctx, s.Tasks, d0.ID(), succeed, func(*domain.Rollout, func(time.Time) (domain.TaskStats, error)) (bool, error) {
		t.Error("a plain rollout was judged")
		return false, nil
	}); err != nil {
		t.Fatalf("ending a plain rollout's task: %v", err)
	}

	// fn leaves the active task active: nothing to judge.
	_, _, err := application.ReplaceActive(ctx, s.Tasks, d2.ID(), onActive(func(*domain.Task) (*domain.Task, error) { return nil, nil }),
		func(*domain.Rollout, func(time.Time) (domain.TaskStats, error)) (bool, error) {
			t.Error("rollout judged though no task ended")
			return false, nil
		})
	repoNoErr(t, "no change", err)

	// A failing judgement stores nothing.
	_, _, err = application.ReplaceActive(ctx, s.Tasks, d2.ID(), succeed, func(*domain.Rollout, func(time.Time) (domain.TaskStats, error)) (bool, error) {
		return false, errRepoBoom
	})
	if !errors.Is(err, errRepoBoom) {
		t.Fatalf("failing judgement: %v", err)
	}
	if got, _ := s.Tasks.Get(ctx, tk.ID()); got.Status() != domain.TaskPending {
		t.Fatalf("task stored despite the failed judgement: %s", got.Status())
	}

	calls := 0
	got, created, err := application.ReplaceActive(ctx, s.Tasks, d2.ID(), succeed, func(r *domain.Rollout, stats func(time.Time) (domain.TaskStats, error)) (bool, error) {
		calls++
		if r.ID() != o.Rollout.ID() || r.Status() != domain.RolloutActive {
			t.Errorf("rollout %s (%s), want %s active", r.ID(), r.Status(), o.Rollout.ID())
		}
		st, err := stats(time.Time{})
		if err != nil {
			return false, err
		}
		if st.Succeeded != 2 || st.Pending != 0 {
			t.Errorf("stats %+v, want both tasks succeeded (this one counted as ended)", st)
		}
		return pause(r, stats)
	})
	repoNoErr(t, "settle", err)
	if created || got.Status() != domain.TaskSucceeded || calls != 1 {
		t.Fatalf("task %s (created %v), judged %d times", got.Status(), created, calls)
	}
	r, err := s.Rollouts.Get(ctx, o.Rollout.ID())
	repoNoErr(t, "rollout", err)
	if r.Status() != domain.RolloutPaused || !r.UpdatedAt().Equal(repoUs(s.at(13))) {
		t.Fatalf("rollout %s updated %v, want paused at %v", r.Status(), r.UpdatedAt(), s.at(13))
	}

	// Ending a task and retrying in the same rollout: a judgement that
	// pauses the rollout withdraws the retry, and stores nothing at all.
	o2 := s.watchedOffer(t, model, "3.0.0")
	d3 := s.device(t, model, "1.0.0")
	first := s.insert(t, s.newTask(t, d3.ID(), o2, 1, s.at(20)))
	retry := s.newTask(t, d3.ID(), o2, 2, s.at(21))
	endAndRetry := onActive(func(active *domain.Task) (*domain.Task, error) {
		if err := active.Cancel(domain.CodeSuperseded, "retried", s.at(21)); err != nil {
			return nil, err
		}
		return &retry, nil
	})
	_, _, err = application.ReplaceActive(ctx, s.Tasks, d3.ID(), endAndRetry, func(r *domain.Rollout, _ func(time.Time) (domain.TaskStats, error)) (bool, error) {
		return true, r.ChangeStatus(domain.RolloutPaused, o2.Firmware, s.at(21))
	})
	if !errors.Is(err, domain.ErrOfferWithdrawn) {
		t.Fatalf("retry into the rollout its judgement paused: %v, want ErrOfferWithdrawn", err)
	}
	active, err := s.Tasks.Active(ctx, d3.ID())
	repoNoErr(t, "active after the withdrawn retry", err)
	repoSameTask(t, active, first.Record())
	if r, _ := s.Rollouts.Get(ctx, o2.Rollout.ID()); r.Status() != domain.RolloutActive {
		t.Fatalf("rollout %s after a rolled-back judgement, want active", r.Status())
	}
	// A judgement that leaves it active lets the retry in.
	got, created, err = application.ReplaceActive(ctx, s.Tasks, d3.ID(), endAndRetry, func(*domain.Rollout, func(time.Time) (domain.TaskStats, error)) (bool, error) {
		return false, nil
	})
	repoNoErr(t, "retry", err)
	if !created || got.ID() != retry.ID() {
		t.Fatalf("retry: created %v, task %s, want %s", created, got.ID(), retry.ID())
	}
}

// replaceActiveJudgesLocked: whether a task's end is judged depends on the
// rollout as locked, not as read with the task. A rollout resumed between
// the read and the lock is judged (as it now is: active); one paused in
// between is handed over as it now is (paused), for the evaluation to
// leave alone. A store whose transaction excludes every other write (the
// memory one) lets no change in between: the change waits for the commit,
// and the rollout is judged as read.
func (s *repoSuite) replaceActiveJudgesLocked(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")
	setStatus := func(o domain.Offer, to domain.RolloutStatus, at time.Time) {
		t.Helper()
		_, err := application.UpdateRollout(ctx, s.Tasks, o.Rollout.ID(), func(r *domain.Rollout, fw domain.Firmware) error {
			return r.ChangeStatus(to, fw, at)
		}, nil)
		repoNoErr(t, "change rollout status", err)
	}
	for _, c := range []struct {
		name, version string
		read, lock    domain.RolloutStatus
	}{
		{"resumed after the read", "2.0.0", domain.RolloutPaused, domain.RolloutActive},
		{"paused after the read", "3.0.0", domain.RolloutActive, domain.RolloutPaused},
	} {
		o := s.watchedOffer(t, model, c.version)
		d := s.device(t, model, "1.0.0")
		s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10)))
		if c.read != domain.RolloutActive {
			setStatus(o, c.read, s.at(11))
		}
		var judged []domain.RolloutStatus
		changed := make(chan error, 1)
		want := c.read // a store whose transaction excludes every write makes the change wait for it
		_, _, err := application.ReplaceActive(ctx, s.Tasks, d.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
			go func() { // between this transaction's read and its lock, if the store lets it in
				_, err := application.UpdateRollout(ctx, s.Tasks, o.Rollout.ID(), func(r *domain.Rollout, fw domain.Firmware) error {
					return r.ChangeStatus(c.lock, fw, s.at(12))
				}, nil)
				changed <- err
			}()
			select {
			case err := <-changed:
				repoNoErr(t, "change rollout status", err)
				want = c.lock
			case <-time.After(500 * time.Millisecond):
			}
			return nil, active.Succeed(s.at(13))
		}), func(r *domain.Rollout, _ func(time.Time) (domain.TaskStats, error)) (bool, error) {
			judged = append(judged, r.Status())
			return false, nil
		})
		repoNoErr(t, c.name, err)
		if want == c.read {
			repoNoErr(t, "change rollout status after the transaction", <-changed)
		}
		if len(judged) != 1 || judged[0] != want {
			t.Errorf("%s: judged as %v, want once, as locked (%s)", c.name, judged, want)
		}
	}
}

// replaceActiveRolloutSwap: devices that end a task of one rollout and
// start one of another, while others go the opposite way, each judging the
// rollout they leave, lock the two rollouts in one order: none waits for
// another forever (memory) or is chosen as a deadlock victim (Postgres).
func (s *repoSuite) replaceActiveRolloutSwap(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	model := repoName("model")
	a, b := s.watchedOffer(t, model, "2.0.0"), s.watchedOffer(t, model, "3.0.0")
	const pairs = 12
	type move struct {
		dev      domain.Device
		from, to domain.Offer
	}
	var moves []move
	for i := 0; i < pairs; i++ {
		x, y := s.device(t, model, "1.0.0"), s.device(t, model, "1.0.0")
		s.insert(t, s.newTask(t, x.ID(), a, 1, s.at(10)))
		s.insert(t, s.newTask(t, y.ID(), b, 1, s.at(10)))
		moves = append(moves, move{x, a, b}, move{y, b, a})
	}
	judge := func(_ *domain.Rollout, stats func(time.Time) (domain.TaskStats, error)) (bool, error) {
		_, err := stats(time.Time{})
		return false, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(moves))
	for _, m := range moves {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := s.newTask(t, m.dev.ID(), m.to, 1, s.at(11))
			_, created, err := application.ReplaceActive(ctx, s.Tasks, m.dev.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
				if active == nil || active.RolloutID() != m.from.Rollout.ID() {
					return nil, errors.New("the device's active task is not the one it had")
				}
				if err := active.Cancel(domain.CodeSuperseded, "moved", s.at(11)); err != nil {
					return nil, err
				}
				return &next, nil
			}), judge)
			if err == nil && !created {
				err = errors.New("the move created no task")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("move: %v", err)
		}
	}
}

// successRecordsVersion: a success stores the device's version — the
// firmware's — in the transaction that stores it (domain.Task.Installs),
// whether a device's event (ApplyEvent) or a check (ReplaceActive) ends
// the task; a change that is not a success leaves the version alone.
func (s *repoSuite) successRecordsVersion(t *testing.T) {
	ctx := t.Context()
	model := repoName("model")
	o := s.offer(t, model, "2.0.0+b7")
	seenVersion := func(d domain.Device) (string, time.Time) {
		t.Helper()
		got, err := s.Devices.Get(ctx, d.ID())
		repoNoErr(t, "get device", err)
		return got.CurrentVersion().String(), got.LastSeenAt()
	}

	byEvent := s.device(t, model, "1.0.0")
	tk := s.insert(t, s.newTask(t, byEvent.ID(), o, 1, s.at(10)))
	step := func(id, status string, at time.Time) {
		t.Helper()
		ev := repoEvent(t, id, status, nil)
		_, err := application.ApplyEvent(ctx, s.Tasks, tk.ID(), ev, func(x *domain.Task, prior *domain.Event) (bool, error) {
			return x.ApplyEvent(ev, prior, at)
		}, nil)
		repoNoErr(t, status, err)
	}
	step("evt-1", "installing", s.at(11))
	if v, _ := seenVersion(byEvent); v != "1.0.0" {
		t.Errorf("after installing: version %q, want 1.0.0 still", v)
	}
	step("evt-2", "succeeded", s.at(12))
	if v, at := seenVersion(byEvent); v != "2.0.0+b7" || !at.Equal(repoUs(s.at(12))) {
		t.Errorf("after the success event: version %q seen %v, want 2.0.0+b7 at %v", v, at, repoUs(s.at(12)))
	}

	byCheck := s.device(t, model, "1.0.0")
	s.insert(t, s.newTask(t, byCheck.ID(), o, 1, s.at(20)))
	_, _, err := application.ReplaceActive(ctx, s.Tasks, byCheck.ID(), onActive(func(active *domain.Task) (*domain.Task, error) {
		return nil, active.Succeed(s.at(21))
	}), nil)
	repoNoErr(t, "implicit success", err)
	if v, at := seenVersion(byCheck); v != "2.0.0+b7" || !at.Equal(repoUs(s.at(21))) {
		t.Errorf("after a check's success: version %q seen %v, want 2.0.0+b7 at %v", v, at, repoUs(s.at(21)))
	}
}
