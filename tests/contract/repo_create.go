package contract

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// insertIfUnchanged: the creation's one statement stores its task only if
// what the caller's plan read still holds — no active task, the failed
// count of the task's firmware, the offer's statuses — and a revoke or a
// pause in progress is waited for and wins; of racing inserts exactly one
// stores its task. A store without the statement (memory) creates every
// task through ReplaceActive, which the other cases pin.
func (s *repoSuite) insertIfUnchanged(t *testing.T) {
	ins, ok := s.Tasks.(application.UnchangedInserter)
	if !ok {
		t.Skip("this store has no one-statement creation")
	}
	ctx := t.Context()
	// fresh is a device of a new model with one offer, nothing stored yet.
	fresh := func(t *testing.T) (domain.Device, domain.Offer) {
		model := repoName("model")
		return s.device(t, model, "1.0.0"), s.offer(t, model, "2.0.0")
	}
	// guard is what a plan read of a fresh device: offer o, failed tasks
	// of its firmware, the device at 1.0.0 reporting it.
	guard := func(o domain.Offer, failed int) ports.GuardedInsert {
		return ports.GuardedInsert{Offer: o, Failed: failed, Versions: []domain.Version{domain.MustParseVersion("1.0.0")}}
	}
	// refused asserts that inserting tk with the guard (seen, failed)
	// stores nothing and leaves the device's active task as want (nil: none).
	refused := func(t *testing.T, tk domain.Task, seen domain.Offer, failed int, want *domain.Task) {
		t.Helper()
		got, created, err := ins.InsertIfUnchanged(ctx, tk, guard(seen, failed), firstCounts(tk)) // counted only if stored
		repoNoErr(t, "insert if unchanged", err)
		if created || got.ID() != (domain.UUID{}) {
			t.Fatalf("insert stored %s (created %v), want nothing", got.ID(), created)
		}
		_, err = s.Tasks.Get(ctx, tk.ID())
		repoIsNotFound(t, "the refused task", err)
		active, err := s.Tasks.Active(ctx, tk.DeviceID())
		if want == nil {
			repoIsNotFound(t, "active task after a refused insert", err)
			return
		}
		repoNoErr(t, "active", err)
		repoSameTask(t, active, want.Record())
	}

	t.Run("unchanged: inserted, and counted", func(t *testing.T) {
		d, o := fresh(t)
		tk := s.newTask(t, d.ID(), o, 1, s.at(20))
		got, created, err := ins.InsertIfUnchanged(ctx, tk, guard(o, 0), firstCounts(tk))
		repoNoErr(t, "insert if unchanged", err)
		if !created || got.ActionID() <= 0 {
			t.Fatalf("created %v, action id %d: want the task stored with an action id", created, got.ActionID())
		}
		want := tk.Record()
		want.ActionID = got.ActionID()
		repoSameTask(t, got, want)
		active, err := s.Tasks.Active(ctx, d.ID())
		repoNoErr(t, "active", err)
		repoSameTask(t, active, want)
		st, err := s.Tasks.RolloutStatsSince(ctx, o.Rollout.ID(), time.Time{})
		repoNoErr(t, "stats", err)
		if st != (domain.TaskStats{Pending: 1}) {
			t.Errorf("the rollout's counters after the insert: %+v, want one pending device", st)
		}
	})
	t.Run("the device's version moved since it was read: refused", func(t *testing.T) {
		// A success committed since the read (here its version written as
		// an event's transaction writes it) may move the plan.
		d, o := fresh(t)
		repoNoErr(t, "install", s.Tasks.InTaskTx(ctx, func(tx ports.TaskTx) error {
			return tx.SetDeviceVersion(d.ID(), domain.MustParseVersion("3.0.0"), s.at(10))
		}))
		refused(t, s.newTask(t, d.ID(), o, 1, s.at(20)), o, 0, nil)
		// Among the versions under which the plan stands (the one it
		// reported, say), it stores the task.
		moved := ports.GuardedInsert{Offer: o, Versions: []domain.Version{domain.MustParseVersion("1.0.0"), domain.MustParseVersion("3.0.0")}}
		if _, created, err := ins.InsertIfUnchanged(ctx, s.newTask(t, d.ID(), o, 1, s.at(21)), moved, nil); err != nil || !created {
			t.Fatalf("insert with the stored version among the guard's: created %v, %v", created, err)
		}
	})
	t.Run("a device with no version stored: compared as the zero version", func(t *testing.T) {
		d := s.device(t, repoName("model"), "")
		o := s.offer(t, d.Model(), "2.0.0")
		refused(t, s.newTask(t, d.ID(), o, 1, s.at(20)), o, 0, nil) // guard's 1.0.0
		none := ports.GuardedInsert{Offer: o, Versions: []domain.Version{{}}}
		if _, created, err := ins.InsertIfUnchanged(ctx, s.newTask(t, d.ID(), o, 1, s.at(21)), none, nil); err != nil || !created {
			t.Fatalf("insert for a device with no version, the guard's the zero one: created %v, %v", created, err)
		}
	})
	t.Run("a task in the rollout already: refused", func(t *testing.T) {
		// Its counted task decides what a new one adds: the transaction's
		// work (ReplaceActive), not this statement's.
		d, o := fresh(t)
		done := s.drive(t, s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10))).ID(), domain.TaskCancelled, s.at(11))
		refused(t, s.newTask(t, d.ID(), o, 1, s.at(20)), o, 0, nil)
		st, err := s.Tasks.RolloutStatsSince(ctx, o.Rollout.ID(), time.Time{})
		repoNoErr(t, "stats", err)
		if st != (domain.TaskStats{Cancelled: 1}) {
			t.Errorf("counters after the refused insert: %+v, want the cancelled task %s alone", st, done.ID())
		}
	})
	t.Run("the rollout changed since it was read: refused", func(t *testing.T) {
		d, o := fresh(t)
		_, err := application.UpdateRollout(ctx, s.Tasks, o.Rollout.ID(), func(r *domain.Rollout, _ domain.Firmware) error {
			return r.SetPercentage(100, s.at(15)) // same status, another version of the row
		}, nil)
		repoNoErr(t, "change", err)
		refused(t, s.newTask(t, d.ID(), o, 1, s.at(20)), o, 0, nil)
	})
	t.Run("an ended context (a lost lock): nothing stored", func(t *testing.T) {
		d, o := fresh(t)
		tk := s.newTask(t, d.ID(), o, 1, s.at(20))
		ended, cancel := context.WithCancel(ctx)
		cancel()
		if _, created, err := ins.InsertIfUnchanged(ended, tk, guard(o, 0), nil); err == nil || created {
			t.Fatalf("insert under an ended context: created %v, err %v; want an error and nothing stored", created, err)
		}
		_, err := s.Tasks.Get(ctx, tk.ID())
		repoIsNotFound(t, "the task inserted after the context ended", err)
	})
	t.Run("an active task: refused", func(t *testing.T) {
		d, o := fresh(t)
		old := s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10)))
		refused(t, s.newTask(t, d.ID(), o, 1, s.at(20)), o, 0, &old)
	})
	t.Run("another failed count: refused", func(t *testing.T) {
		d, o := fresh(t)
		failed := s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10)))
		s.drive(t, failed.ID(), domain.TaskFailed, s.at(11))
		refused(t, s.newTask(t, d.ID(), o, 1, s.at(20)), o, 0, nil) // the plan saw no failure
		// A second rollout of the firmware: the device has no task in it.
		o2 := domain.Offer{Firmware: o.Firmware, Rollout: s.rollout(t, o.Firmware, domain.RolloutSpec{Percentage: 100}, s.at(12), true)}
		tk := s.newTask(t, d.ID(), o2, 2, s.at(21))
		if _, created, err := ins.InsertIfUnchanged(ctx, tk, guard(o2, 1), firstCounts(tk)); err != nil || !created {
			t.Fatalf("insert with the failed count as stored: created %v, %v", created, err)
		}
	})
	t.Run("another firmware's failures: inserted", func(t *testing.T) {
		d, o := fresh(t)
		other := s.offer(t, d.Model(), "1.5.0")
		failed := s.insert(t, s.newTask(t, d.ID(), other, 1, s.at(10)))
		s.drive(t, failed.ID(), domain.TaskFailed, s.at(11))
		if _, created, err := ins.InsertIfUnchanged(ctx, s.newTask(t, d.ID(), o, 1, s.at(20)), guard(o, 0), nil); err != nil || !created {
			t.Fatalf("created %v, %v; the guard counts the task's own firmware only", created, err)
		}
	})
	for _, tc := range []struct {
		name     string
		withdraw func(t *testing.T, o domain.Offer)
	}{
		{"firmware revoked", func(t *testing.T, o domain.Offer) {
			_, err := s.Firmwares.Update(ctx, o.Firmware.ID(), func(f *domain.Firmware) error { f.Revoke(s.at(15)); return nil }, nil)
			repoNoErr(t, "revoke", err)
		}},
		{"rollout paused", func(t *testing.T, o domain.Offer) {
			_, err := application.UpdateRollout(ctx, s.Tasks, o.Rollout.ID(), func(r *domain.Rollout, fw domain.Firmware) error {
				return r.ChangeStatus(domain.RolloutPaused, fw, s.at(15))
			}, nil)
			repoNoErr(t, "pause", err)
		}},
	} {
		t.Run(tc.name+": refused", func(t *testing.T) {
			d, o := fresh(t)
			tc.withdraw(t, o) // after the plan judged o (its copy is stale)
			refused(t, s.newTask(t, d.ID(), o, 1, s.at(20)), o, 0, nil)
		})
		t.Run(tc.name+" in progress: waited for, and refused", func(t *testing.T) {
			d, o := fresh(t)
			// The change holds its row in an open transaction (or the
			// memory store's lock) until released.
			inside, release, changed := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			hold := func() { close(inside); <-release }
			go func() {
				var err error
				if tc.name == "firmware revoked" {
					_, err = s.Firmwares.Update(ctx, o.Firmware.ID(), func(f *domain.Firmware) error { f.Revoke(s.at(15)); hold(); return nil }, nil)
				} else {
					_, err = application.UpdateRollout(ctx, s.Tasks, o.Rollout.ID(), func(r *domain.Rollout, fw domain.Firmware) error {
						hold()
						return r.ChangeStatus(domain.RolloutPaused, fw, s.at(15))
					}, nil)
				}
				changed <- err
			}()
			<-inside
			tk := s.newTask(t, d.ID(), o, 1, s.at(20))
			inserted := make(chan bool, 1)
			go func() {
				_, created, err := ins.InsertIfUnchanged(ctx, tk, guard(o, 0), nil)
				if err != nil {
					t.Errorf("insert if unchanged: %v", err)
				}
				inserted <- created
			}()
			select {
			case created := <-inserted:
				t.Fatalf("the insert did not wait for the change in progress (created %v)", created)
			case <-time.After(200 * time.Millisecond):
			}
			close(release)
			repoNoErr(t, "change", <-changed)
			if <-inserted {
				t.Fatal("the insert stored its task for an offer withdrawn before it committed")
			}
			_, err := s.Tasks.Active(ctx, d.ID())
			repoIsNotFound(t, "active task after the refused insert", err)
		})
	}
	t.Run("a task failing while the insert waits: refused", func(t *testing.T) {
		// A task of the firmware, active when the insert starts, fails in
		// an event's transaction that holds its rollout (judged) until
		// released: the insert must not count failures as they were
		// before it waited, nor find the unique index free after.
		d, o := fresh(t)
		active := s.insert(t, s.newTask(t, d.ID(), o, 1, s.at(10)))
		inside, release, failed := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		ev := repoEvent(t, "fail", "failed", nil)
		go func() {
			_, err := application.ApplyEvent(ctx, s.Tasks, active.ID(), ev, func(x *domain.Task, prior *domain.Event) (bool, error) {
				close(inside)
				<-release
				return x.ApplyEvent(ev, prior, s.at(11))
			}, func(*domain.Rollout, func(time.Time) (domain.TaskStats, error)) (bool, error) { return false, nil })
			failed <- err
		}()
		<-inside
		tk := s.newTask(t, d.ID(), o, 1, s.at(20))
		inserted := make(chan bool, 1)
		go func() {
			_, created, err := ins.InsertIfUnchanged(ctx, tk, guard(o, 0), nil) // the plan saw no failure
			if err != nil {
				t.Errorf("insert if unchanged: %v", err)
			}
			inserted <- created
		}()
		time.Sleep(200 * time.Millisecond) // the insert reaches its wait, if it waits
		close(release)
		repoNoErr(t, "fail the task", <-failed)
		if <-inserted {
			t.Fatal("the insert stored attempt 1 of a firmware that failed once: it counted the failures as they were before the wait")
		}
		_, err := s.Tasks.Active(ctx, d.ID())
		repoIsNotFound(t, "active task after the refused insert", err)
	})
	t.Run("rollout of another firmware: refused", func(t *testing.T) {
		d, o := fresh(t)
		other := s.offer(t, d.Model(), "3.0.0")
		mixed := domain.Offer{Firmware: o.Firmware, Rollout: other.Rollout}
		tk := s.newTask(t, d.ID(), o, 1, s.at(20))
		rec := tk.Record()
		rec.RolloutID = other.Rollout.ID().String()
		refused(t, domain.RehydrateTask(rec), mixed, 0, nil)
	})
	t.Run("racing inserts: one stored", func(t *testing.T) {
		d, o := fresh(t)
		const n = 64
		created := make([]bool, n)
		mine := make([]domain.Task, n)
		for i := range mine {
			mine[i] = s.newTask(t, d.ID(), o, 1, s.at(20+i))
		}
		// The race is forced: an update of the rollout that changes
		// nothing holds it while every insert, having found no active
		// task, waits for it; then they meet the unique index together.
		inside, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			_, err := application.UpdateRollout(ctx, s.Tasks, o.Rollout.ID(), func(*domain.Rollout, domain.Firmware) error {
				close(inside)
				<-release
				return nil
			}, nil)
			held <- err
		}()
		<-inside
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				var err error
				if _, created[i], err = ins.InsertIfUnchanged(ctx, mine[i], guard(o, 0), nil); err != nil {
					t.Errorf("insert %d: %v", i, err)
				}
			})
		}
		time.Sleep(200 * time.Millisecond) // the inserts reach the rollout's lock
		close(release)
		repoNoErr(t, "hold the rollout", <-held)
		wg.Wait()
		winners := 0
		for _, c := range created {
			if c {
				winners++
			}
		}
		all, err := s.Tasks.List(ctx, ports.TaskFilter{DeviceID: d.ID(), Limit: 10 * n})
		repoNoErr(t, "list", err)
		if winners != 1 || len(all) != 1 {
			t.Fatalf("%d inserts stored their task, the device has %d tasks: want exactly 1", winners, len(all))
		}
	})
}

// firstCounts is what a device's first task of an unstaged rollout adds to
// its counters (domain.Recount over none).
func firstCounts(tk domain.Task) []domain.CountChange {
	return []domain.CountChange{{Rollout: tk.RolloutID(), Delta: domain.Recount(nil, tk)}}
}
