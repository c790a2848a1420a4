package application_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// slowRelease is a locker whose first lock, once released, is slow to
// report so (Redis cut while releasing): the creation it made stands, but
// its flight stays open until release is closed.
type slowRelease struct {
	inner   ports.Locker
	mu      sync.Mutex
	calls   int
	created chan struct{} // closed when the first lock is released
	release chan struct{} // closing it lets the first WithLock return
	another chan struct{} // closed at the second WithLock call
}

func (l *slowRelease) WithLock(ctx context.Context, name string, fn func(context.Context) error) error {
	l.mu.Lock()
	l.calls++
	n := l.calls
	l.mu.Unlock()
	if n == 2 {
		close(l.another)
	}
	err := l.inner.WithLock(ctx, name, fn)
	if n == 1 {
		close(l.created)
		<-l.release
	}
	return err
}

// TestCheckDoesNotJoinAFlightOlderThanWhatItRead: concurrent creations
// for one device and firmware share one flight, but a check whose read saw
// the flight's task already ended (here failed, between the creation and
// the flight's answer) must not take that answer: it is planned on what
// it read — a new attempt — not handed the failed task as pending.
func TestCheckDoesNotJoinAFlightOlderThanWhatItRead(t *testing.T) {
	l := &slowRelease{inner: local.NewLocker(defaultWait, ports.NopLockMetrics{}), created: make(chan struct{}),
		release: make(chan struct{}), another: make(chan struct{})}
	e := newEnv(t, l)
	fw := e.firmware("2.0.0")
	e.rollout(fw, 100, func(s *domain.RolloutSpec) { s.MaxAttempts = new(3) })
	d := e.device("1.0.0")

	first := make(chan ports.CheckResult, 1)
	go func() { first <- e.check(d, "1.0.0") }()
	<-l.created
	tasks, err := e.deps.Tasks.List(e.ctx, ports.TaskFilter{DeviceID: asDeviceID(d)})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("the first check's task: %v %v", tasks, err)
	}
	failed := tasks[0]
	e.mustEvent(asDeviceID(d), failed.ID(), "fail-1", "failed")

	second := make(chan ports.CheckResult, 1)
	go func() { second <- e.check(d, "1.0.0") }()
	select {
	case <-l.another: // planned on its own read: a lock of its own
	case <-time.After(2 * time.Second): // joined the first flight: let it answer
	}
	close(l.release)
	got := <-second
	<-first
	if got.Task == nil || got.Task.Task.ID() == failed.ID() {
		t.Fatalf("a check that read the failure was answered with the failed task %s as %v", failed.ID(), got.Task)
	}
	if got.Task.Task.Attempt() != 2 {
		t.Errorf("the check after the failure: attempt %d, want 2", got.Task.Task.Attempt())
	}
}
