package contract

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// updateIfUnchanged: an event's one statement stores the task's change,
// records the event, counts the change and, for a success, sets the
// device's version, only if the task is still as read, the event id is
// unrecorded and the device has no other task in the rollout; of events
// racing from one read exactly one stores. A store without the statement
// (memory) applies every event through ApplyEvent, which the other cases
// pin. (Its announcement: adapters/postgres, TestGuardedWriteAnnounces.)
func (s *repoSuite) updateIfUnchanged(t *testing.T) {
	up, ok := s.Tasks.(application.UnchangedUpdater)
	if !ok {
		t.Skip("this store has no one-statement progress event")
	}
	ctx := t.Context()
	// change is before with ev applied at at, as the events use case
	// applies it to the task it read.
	change := func(t *testing.T, before domain.Task, ev domain.Event, at time.Time) domain.Task {
		t.Helper()
		after := before
		if changed, err := after.ApplyEvent(ev, nil, at); err != nil || !changed {
			t.Fatalf("apply %s: changed %v, %v", ev.ID(), changed, err)
		}
		return after
	}
	// pending is a fresh device's pending task, the only one in a fresh
	// rollout (staged, when staged: counted in its stage too), and its offer.
	pending := func(t *testing.T, staged bool) (domain.Task, domain.Offer) {
		t.Helper()
		model := repoName("model")
		d := s.device(t, model, "1.0.0")
		var o domain.Offer
		if staged {
			o = s.stagedOffer(t, model, "2.0.0", s.at(5))
		} else {
			o = s.offer(t, model, "2.0.0")
		}
		return s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10))), o
	}
	stats := func(t *testing.T, tk domain.Task, since time.Time) domain.TaskStats {
		t.Helper()
		st, err := s.Tasks.RolloutStatsSince(ctx, tk.RolloutID(), since)
		repoNoErr(t, "stats", err)
		return st
	}
	// refused asserts that storing after over before stores nothing: the
	// task stays want, the event unrecorded, the counters as they were.
	refused := func(t *testing.T, before, after domain.Task, ev domain.Event, want domain.Task) {
		t.Helper()
		counted := stats(t, want, time.Time{})
		dev, err := s.Devices.Get(ctx, want.DeviceID())
		repoNoErr(t, "device", err)
		w := write(before, after, ev)
		v := domain.MustParseVersion("9.9.9")
		w.Installed = &v // as a success's would: refused, it must not be written either
		got, updated, err := up.UpdateIfUnchanged(ctx, w)
		repoNoErr(t, "update if unchanged", err)
		if updated || got.ID() != (domain.UUID{}) {
			t.Fatalf("stored %s (updated %v), want nothing", got.ID(), updated)
		}
		stored, err := s.Tasks.Get(ctx, want.ID())
		repoNoErr(t, "get", err)
		repoSameTask(t, stored, want.Record())
		if st := stats(t, want, time.Time{}); st != counted {
			t.Errorf("counters after a refused update: %+v, want %+v as before", st, counted)
		}
		if now, err := s.Devices.Get(ctx, want.DeviceID()); err != nil || now.CurrentVersion() != dev.CurrentVersion() {
			t.Errorf("the device runs %s (%v) after a refused update, want %s as before", now.CurrentVersion(), err, dev.CurrentVersion())
		}
	}
	// recorded reports whether ev is recorded for the task, as ApplyEvent
	// reads it on the locked task.
	recorded := func(t *testing.T, id domain.UUID, ev domain.Event) bool {
		t.Helper()
		var seen bool
		_, err := application.ApplyEvent(ctx, s.Tasks, id, ev, func(_ *domain.Task, prior *domain.Event) (bool, error) {
			seen = prior != nil
			return false, nil
		}, nil)
		repoNoErr(t, "read the event", err)
		return seen
	}

	for _, staged := range []bool{false, true} {
		name := map[bool]string{false: "unchanged: stored, recorded, counted", true: "unchanged, staged: counted in the stage too"}[staged]
		t.Run(name, func(t *testing.T) {
			before, _ := pending(t, staged)
			ev := repoEvent(t, "dl", "downloading", nil)
			after := change(t, before, ev, s.at(11))
			got, updated, err := up.UpdateIfUnchanged(ctx, write(before, after, ev))
			repoNoErr(t, "update if unchanged", err)
			if !updated {
				t.Fatal("not stored")
			}
			repoSameTask(t, got, after.Record())
			stored, err := s.Tasks.Get(ctx, before.ID())
			repoNoErr(t, "get", err)
			repoSameTask(t, stored, after.Record())
			if !recorded(t, before.ID(), ev) {
				t.Error("the event is not recorded: its resend would be applied again")
			}
			want := domain.TaskStats{Downloading: 1}
			if st := stats(t, before, time.Time{}); st != want {
				t.Errorf("the rollout's counters: %+v, want %+v", st, want)
			}
			if staged {
				if st := stats(t, before, before.Stage()); st != want {
					t.Errorf("the stage's counters: %+v, want %+v", st, want)
				}
			}
		})
	}
	for _, tc := range []struct {
		status  string
		version string // the device's after the event
		want    domain.TaskStats
	}{
		{status: "succeeded", version: "2.0.0", want: domain.TaskStats{Succeeded: 1}},
		{status: "failed", version: "1.0.0", want: domain.TaskStats{Failed: 1}},
	} {
		t.Run("a final event, "+tc.status+": stored, counted, the device's version "+tc.version, func(t *testing.T) {
			before, o := pending(t, true)
			bystander := s.device(t, o.Firmware.Model(), "1.0.0")
			ev := repoEvent(t, "end", tc.status, nil)
			after := change(t, before, ev, s.at(11))
			w := write(before, after, ev)
			if after.Installs(before) {
				v := o.Firmware.Version()
				w.Installed = &v
			}
			got, updated, err := up.UpdateIfUnchanged(ctx, w)
			repoNoErr(t, "update if unchanged", err)
			if !updated {
				t.Fatal("not stored")
			}
			repoSameTask(t, got, after.Record())
			if !recorded(t, before.ID(), ev) {
				t.Error("the final event is not recorded: its resend would be applied again")
			}
			for _, since := range []time.Time{{}, before.Stage()} {
				if st := stats(t, before, since); st != tc.want {
					t.Errorf("counters since %v: %+v, want %+v", since, st, tc.want)
				}
			}
			d, err := s.Devices.Get(ctx, before.DeviceID())
			repoNoErr(t, "device", err)
			if d.CurrentVersion().String() != tc.version {
				t.Errorf("the device runs %s, want %s", d.CurrentVersion(), tc.version)
			}
			if b, err := s.Devices.Get(ctx, bystander.ID()); err != nil || b.CurrentVersion().String() != "1.0.0" {
				t.Errorf("another device of the model runs %s (%v), want 1.0.0 as before", b.CurrentVersion(), err)
			}
			if tc.status == "succeeded" && d.LastSeenAt().Before(repoUs(s.at(11))) {
				t.Errorf("the device last seen %v, want at least the success's %v", d.LastSeenAt(), repoUs(s.at(11)))
			}
		})
	}
	t.Run("changed since it was read: refused", func(t *testing.T) {
		before, _ := pending(t, false)
		driven := s.drive(t, before.ID(), domain.TaskDownloading, s.at(12)) // another event, committed first
		ev := repoEvent(t, "dl", "downloading", nil)
		refused(t, before, change(t, before, ev, s.at(11)), ev, driven)
		if recorded(t, before.ID(), ev) {
			t.Error("the refused event is recorded")
		}
	})
	t.Run("the event id recorded already: refused", func(t *testing.T) {
		before, _ := pending(t, false)
		first := repoEvent(t, "dl", "downloading", nil)
		stored, err := application.ApplyEvent(ctx, s.Tasks, before.ID(), first, func(tk *domain.Task, prior *domain.Event) (bool, error) {
			return tk.ApplyEvent(first, prior, s.at(11))
		}, nil)
		repoNoErr(t, "first event", err)
		// The same id again, read as unrecorded: a resend with another body.
		again := repoEvent(t, "dl", "downloaded", nil)
		refused(t, stored, change(t, stored, again, s.at(12)), again, stored)
	})
	t.Run("another task of the device in the rollout: refused", func(t *testing.T) {
		// The counted task decides what the change adds: the
		// transaction's work (ApplyEvent), not this statement's.
		first, o := pending(t, false)
		s.drive(t, first.ID(), domain.TaskFailed, s.at(11))
		before := s.insert(t, s.newTask(t, first.DeviceID(), o, 2, s.at(12)))
		ev := repoEvent(t, "dl", "downloading", nil)
		refused(t, before, change(t, before, ev, s.at(13)), ev, before)
	})
	t.Run("events racing from one read: one stores", func(t *testing.T) {
		before, _ := pending(t, false)
		const n = 8
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			stored []domain.Task
		)
		for i := range n {
			wg.Go(func() {
				ev := repoEvent(t, uuid.NewString(), "downloading", new(i*10))
				after := change(t, before, ev, s.at(11+i))
				got, updated, err := up.UpdateIfUnchanged(ctx, write(before, after, ev))
				if err != nil {
					t.Errorf("update if unchanged: %v", err)
				}
				if updated {
					mu.Lock()
					stored = append(stored, got)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(stored) != 1 {
			t.Fatalf("%d of %d racing updates stored, want exactly one", len(stored), n)
		}
		got, err := s.Tasks.Get(ctx, before.ID())
		repoNoErr(t, "get", err)
		repoSameTask(t, got, stored[0].Record())
		if st := stats(t, before, time.Time{}); st != (domain.TaskStats{Downloading: 1}) {
			t.Errorf("counters after the race: %+v, want one downloading device", st)
		}
		history, err := s.Tasks.Events(ctx, before.ID(), 100)
		repoNoErr(t, "events", err)
		if len(history) != 1 {
			t.Errorf("%d events recorded, want the one stored", len(history))
		}
	})
}

// write is the statement's write of ev changing before to after, with
// what it adds to the counters (soleCounts): no version, no announcement.
func write(before, after domain.Task, ev domain.Event) ports.GuardedTaskWrite {
	return ports.GuardedTaskWrite{Before: before, After: after, Event: ev, Counts: soleCounts(before, after)}
}

// soleCounts is what changing a task from before to after adds to the
// counters of its rollout and, when it has one, its stage, when it is its
// device's only task in the rollout (domain.Recount of it).
func soleCounts(before, after domain.Task) []domain.CountChange {
	d := domain.Recount(&before, after)
	out := []domain.CountChange{{Rollout: before.RolloutID(), Delta: d}}
	if !before.Stage().IsZero() {
		out = append(out, domain.CountChange{Rollout: before.RolloutID(), Stage: before.Stage(), Delta: d})
	}
	return out
}
