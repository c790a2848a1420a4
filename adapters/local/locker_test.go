package local

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/contract"
)

func TestLockerContract(t *testing.T) {
	// Not parallel with other top-level tests, so goroutines present now
	// (other tests' parked ones) are all there is to ignore.
	ignore := goleak.IgnoreCurrent()
	var lockers []*Locker
	var mu sync.Mutex
	t.Cleanup(func() {
		goleak.VerifyNone(t, ignore)
		for _, l := range lockers {
			if n := l.inUse(); n != 0 {
				t.Errorf("%d lock names still tracked after every caller left", n)
			}
		}
	})
	contract.RunLocker(t, func(t *testing.T, wait time.Duration) (ports.Locker, ports.Locker) {
		l := NewLocker(wait, nil)
		mu.Lock()
		lockers = append(lockers, l)
		mu.Unlock()
		return l, l
	})
}

func TestLockerMetrics(t *testing.T) {
	t.Parallel()
	m := &lockMetricsRecorder{}
	l := NewLocker(50*time.Millisecond, m)
	release := make(chan struct{})
	held := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- l.WithLock(context.Background(), "n", func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	err := l.WithLock(context.Background(), "n", func(context.Context) error { return nil })
	if !errors.Is(err, domain.ErrServiceBusy) {
		t.Fatalf("err = %v, want SERVICE_BUSY", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.acquired != 1 || len(m.failed) != 1 || m.failed[0] != ports.LockTimeout {
		t.Fatalf("metrics: acquired %d, failed %v; want 1 and [timeout]", m.acquired, m.failed)
	}
	if n := l.inUse(); n != 0 {
		t.Fatalf("%d names still tracked", n)
	}
}

func TestAlwaysGrantLockerExcludesNobody(t *testing.T) {
	t.Parallel()
	var l ports.Locker = AlwaysGrantLocker{}
	inner := make(chan error, 1)
	err := l.WithLock(context.Background(), "n", func(ctx context.Context) error {
		// A second caller on the same name gets in while the first is inside.
		inner <- l.WithLock(ctx, "n", func(context.Context) error { return nil })
		return errors.New("outer")
	})
	if err == nil || err.Error() != "outer" {
		t.Fatalf("err = %v, want fn's error", err)
	}
	if err := <-inner; err != nil {
		t.Fatalf("inner WithLock: %v", err)
	}
}

// inUse counts the names the Locker still keeps state for.
func (l *Locker) inUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.names)
}

type lockMetricsRecorder struct {
	mu       sync.Mutex
	acquired int
	failed   []string
}

func (m *lockMetricsRecorder) LockAcquired(time.Duration) {
	m.mu.Lock()
	m.acquired++
	m.mu.Unlock()
}

func (m *lockMetricsRecorder) LockFailed(reason string) {
	m.mu.Lock()
	m.failed = append(m.failed, reason)
	m.mu.Unlock()
}
