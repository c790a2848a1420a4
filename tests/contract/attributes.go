package contract

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ai-device/ota/application/ddi"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// DDIRepos is one adapter's storage ports with what hawkBit's DDI adds:
// device attributes and task actions (lookup by action id, cancel notices).
type DDIRepos struct {
	Repos
	Attributes ports.DeviceAttributes
	Actions    ddi.TaskActions
}

// RunDDIStores runs the contract of ports.DeviceAttributes and
// ddi.TaskActions against the repositories newRepos returns (which may
// share one store with other suites: the data is uniquely named).
func RunDDIStores(t *testing.T, newRepos func(t *testing.T) DDIRepos) {
	t.Run("Attributes", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		attributesContract(t, newRepoSuite(r.Repos), r.Attributes)
	})
	t.Run("TaskActions", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		taskActionsContract(t, newRepoSuite(r.Repos), r.Actions)
	})
}

func attributesContract(t *testing.T, s *repoSuite, attrs ports.DeviceAttributes) {
	ctx := t.Context()
	dev := s.device(t, repoName("m"), "1.0.0")

	a, err := attrs.Get(ctx, dev.ID())
	if err != nil || a.Known() || len(a.Values()) != 0 {
		t.Fatalf("a device that never reported: known=%v values=%v err=%v", a.Known(), a.Values(), err)
	}
	if a, err := attrs.Get(ctx, asDeviceID(repoName("nobody"))); err != nil || a.Known() {
		t.Fatalf("unknown device: known=%v err=%v", a.Known(), err)
	}
	if _, err := attrs.Update(ctx, asDeviceID(repoName("nobody")), func(a *domain.DeviceAttributes) error {
		return a.Apply(domain.AttributesMerge, map[string]string{"k": "v"}, s.at(1))
	}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("update of an unknown device: %v, want not found", err)
	}

	// fn's failure stores nothing: the device is still unknown.
	if _, err := attrs.Update(ctx, dev.ID(), func(a *domain.DeviceAttributes) error {
		if err := a.Apply(domain.AttributesMerge, map[string]string{"k": "v"}, s.at(1)); err != nil {
			return err
		}
		return errRepoBoom
	}); !errors.Is(err, errRepoBoom) {
		t.Fatalf("fn error: %v", err)
	}
	if a, _ := attrs.Get(ctx, dev.ID()); a.Known() {
		t.Fatal("a failed update left attributes behind")
	}

	got, err := attrs.Update(ctx, dev.ID(), func(a *domain.DeviceAttributes) error {
		return a.Apply(domain.AttributesMerge, map[string]string{"hw": "rev2", "sw_version": "1.0.0", "ünï": "cödé"}, s.at(2))
	})
	if err != nil {
		t.Fatal(err)
	}
	read, err := attrs.Get(ctx, dev.ID())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []domain.DeviceAttributes{got, read} {
		if !a.Known() || !a.UpdatedAt().Equal(repoUs(s.at(2))) || fmt.Sprint(a.Values()) != "map[hw:rev2 sw_version:1.0.0 ünï:cödé]" {
			t.Fatalf("stored attributes: known=%v at=%v values=%v", a.Known(), a.UpdatedAt(), a.Values())
		}
	}
	if _, err := attrs.Update(ctx, dev.ID(), func(a *domain.DeviceAttributes) error {
		return a.Apply(domain.AttributesReplace, map[string]string{"only": "1"}, s.at(3))
	}); err != nil {
		t.Fatal(err)
	}
	if read, _ := attrs.Get(ctx, dev.ID()); fmt.Sprint(read.Values()) != "map[only:1]" {
		t.Fatalf("after replace: %v", read.Values())
	}

	// Concurrent merges of distinct keys all survive: updates are serialised.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := attrs.Update(ctx, dev.ID(), func(a *domain.DeviceAttributes) error {
				return a.Apply(domain.AttributesMerge, map[string]string{fmt.Sprintf("k%02d", i): "v"}, s.at(4))
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if read, _ := attrs.Get(ctx, dev.ID()); len(read.Values()) != 17 {
		t.Fatalf("concurrent merges lost updates: %d attributes, want 17", len(read.Values()))
	}
}

func taskActionsContract(t *testing.T, s *repoSuite, actions ddi.TaskActions) {
	ctx := t.Context()
	model := repoName("m")
	dev := s.device(t, model, "1.0.0")
	other := s.device(t, model, "1.0.0")
	o1 := s.offer(t, model, "1.1.0")
	o2 := s.offer(t, model, "1.2.0")

	if n, err := actions.PendingCancel(ctx, dev.ID()); err != nil || n != nil {
		t.Fatalf("no tasks, no pending cancel: %v %v", n, err)
	}
	byAction := func(deviceID domain.DeviceID, actionID int64) (domain.Task, error) {
		n, err := actions.Cancel(ctx, deviceID, actionID)
		return n.Task(), err
	}
	first := s.insert(t, s.newTask(t, dev.ID(), o1, 1, s.at(3)))
	got, err := byAction(dev.ID(), first.ActionID())
	if err != nil || got.ID() != first.ID() {
		t.Fatalf("by action: %v %v", got.ID(), err)
	}
	if _, err := byAction(other.ID(), first.ActionID()); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("another device's action: %v, want not found", err)
	}
	if _, err := byAction(dev.ID(), first.ActionID()+1_000_000); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown action: %v, want not found", err)
	}
	if n, _ := actions.PendingCancel(ctx, dev.ID()); n != nil {
		t.Fatal("an active task is no pending cancel")
	}
	if _, err := actions.UpdateCancel(ctx, dev.ID(), first.ActionID(), func(n *domain.CancelNotice) error {
		_, err := n.Confirm(s.at(4))
		return err
	}); !errors.Is(err, domain.ErrInvalidTransition) {
		t.Fatalf("confirming an active task's cancel: %v", err)
	}

	// Superseding cancels the first task: it is pending until confirmed.
	second := s.insert(t, s.newTask(t, dev.ID(), o2, 1, s.at(5)))
	n, err := actions.PendingCancel(ctx, dev.ID())
	if err != nil || n == nil || n.Task().ID() != first.ID() || !n.Pending() {
		t.Fatalf("pending cancel after supersede: %+v %v", n, err)
	}
	if n, _ := actions.PendingCancel(ctx, other.ID()); n != nil {
		t.Fatal("another device sees this device's cancel")
	}
	// fn's failure stores nothing.
	if _, err := actions.UpdateCancel(ctx, dev.ID(), first.ActionID(), func(n *domain.CancelNotice) error {
		if _, err := n.Confirm(s.at(6)); err != nil {
			return err
		}
		return errRepoBoom
	}); !errors.Is(err, errRepoBoom) {
		t.Fatalf("fn error: %v", err)
	}
	if n, _ := actions.PendingCancel(ctx, dev.ID()); n == nil {
		t.Fatal("a failed confirmation was stored")
	}
	confirmed, err := actions.UpdateCancel(ctx, dev.ID(), first.ActionID(), func(n *domain.CancelNotice) error {
		_, err := n.Confirm(s.at(6))
		return err
	})
	if err != nil || confirmed.Pending() || !confirmed.ConfirmedAt().Equal(repoUs(s.at(6))) {
		t.Fatalf("confirm: pending=%v at=%v err=%v", confirmed.Pending(), confirmed.ConfirmedAt(), err)
	}
	read, err := actions.Cancel(ctx, dev.ID(), first.ActionID())
	if err != nil || read.Pending() || !read.ConfirmedAt().Equal(repoUs(s.at(6))) || read.Task().Status() != domain.TaskCancelled {
		t.Fatalf("read back: %+v %v", read, err)
	}
	if n, _ := actions.PendingCancel(ctx, dev.ID()); n != nil {
		t.Fatalf("a confirmed cancel is still pending: %v", n.Task().ID())
	}
	// The active task is untouched by all this.
	if got, err := byAction(dev.ID(), second.ActionID()); err != nil || got.Status() != domain.TaskPending {
		t.Fatalf("second task: %v %v", got.Status(), err)
	}
}
