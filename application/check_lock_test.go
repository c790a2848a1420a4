package application_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// recordingLocker wraps a locker and notes, for every task that appears in
// the store while a lock is held, the name of that lock: a task that
// appears outside every lock is not noted at all.
type recordingLocker struct {
	inner ports.Locker
	tasks func() map[domain.UUID]bool // the ids stored now

	mu    sync.Mutex
	under map[domain.UUID]string
}

func (l *recordingLocker) WithLock(ctx context.Context, name string, fn func(context.Context) error) error {
	return l.inner.WithLock(ctx, name, func(ctx context.Context) error {
		before := l.tasks()
		err := fn(ctx)
		l.mu.Lock()
		defer l.mu.Unlock()
		for id := range l.tasks() {
			if !before[id] {
				l.under[id] = name
			}
		}
		return err
	})
}

// Check rule 7 when the plan moves: the lock-free read (stale) wants the
// higher firmware, but the writing transaction sees that the device has
// used up its attempts at it and wants the lower one instead. The task
// of the lower firmware is created, under that firmware's lock — never
// under the lock taken for the first plan, never with none.
func TestCheckWhosePlanMovedCreatesUnderTheNewFirmwaresLock(t *testing.T) {
	t.Parallel()
	for name, newDeps := range map[string]func(t *testing.T) application.Deps{
		"memory": func(t *testing.T) application.Deps { return testenv.NewMemoryService(t, testenv.MemoryOptions{}).Deps },
		"postgres": func(t *testing.T) application.Deps {
			db, _ := testenv.PostgresDB(t)
			repos, err := postgres.NewRepositories(db)
			if err != nil {
				t.Fatal(err)
			}
			return application.Deps{Devices: repos.Devices, Firmwares: repos.Firmwares, Rollouts: repos.Rollouts, Tasks: repos.Tasks,
				Attributes: repos.Attributes, Directory: repos.Directory, Clock: local.NewClock(), IDs: local.NewUUIDs(), Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			deps := newDeps(t)
			dev := asDeviceID("dev-moved")
			locker := &recordingLocker{inner: local.NewLocker(defaultWait, ports.NopLockMetrics{}), under: map[domain.UUID]string{},
				tasks: func() map[domain.UUID]bool {
					ts, err := deps.Tasks.List(ctx, ports.TaskFilter{DeviceID: dev, Limit: 1000})
					if err != nil {
						t.Error(err)
					}
					ids := map[domain.UUID]bool{}
					for _, task := range ts {
						ids[task.ID()] = true
					}
					return ids
				}}
			deps.Locker = locker
			devices, admin := testenv.UseCases(t, deps, time.Hour)
			publish := func(version string, maxAttempts int) domain.Firmware {
				fw, err := admin.PublishFirmware(ctx, testActor, domain.FirmwareSpec{Model: model, Version: version,
					URL: "https://files.example/" + version + ".bin", SizeBytes: 1024, SHA256: strings.Repeat("ab", 32)})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := admin.StartRollout(ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(),
					Spec: domain.RolloutSpec{Percentage: 100, MaxAttempts: intp(maxAttempts)}}); err != nil {
					t.Fatal(err)
				}
				return fw
			}
			lower, higher := publish("1.1.0", 3), publish("1.2.0", 1)
			if _, err := admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: dev.String(), Model: model, CurrentVersion: "1.0.0"}); err != nil {
				t.Fatal(err)
			}
			identify := func() ports.CheckRequest {
				a, err := devices.IdentifyDevice(ctx, dev)
				if err != nil {
					t.Fatal(err)
				}
				return ports.CheckRequest{Device: a, Model: model, CurrentVersion: "1.0.0"}
			}
			stale := identify() // no task yet, nothing failed
			first, err := devices.Check(ctx, identify())
			if err != nil || first.Task == nil || first.Task.Firmware.ID() != higher.ID() {
				t.Fatalf("first check: %+v %v, want a task of %s", first, err, higher.Version())
			}
			if _, err := devices.ReportEvent(ctx, dev, first.Task.Task.ID(), ports.EventRequest{EventID: "e1", Status: "failed"}); err != nil {
				t.Fatal(err)
			}
			// The stale view still offers the higher firmware: its plan
			// takes that lock, and the transaction's plan moves.
			res, err := devices.Check(ctx, stale)
			if err != nil || res.Task == nil || res.Task.Firmware.ID() != lower.ID() || res.Outcome != ports.CheckCreated {
				t.Fatalf("check on a stale view: %+v %v, want a created task of %s", res, err, lower.Version())
			}
			locker.mu.Lock()
			defer locker.mu.Unlock()
			for id, want := range map[domain.UUID]string{
				first.Task.Task.ID(): dev.String() + ":" + higher.ID().String(),
				res.Task.Task.ID():   dev.String() + ":" + lower.ID().String(),
			} {
				if got, ok := locker.under[id]; !ok || got != want {
					t.Errorf("task %s created under lock %q (held: %v), want %q", id, got, ok, want)
				}
			}
		})
	}
}

// heldLocker holds the first lock taken once it is armed until released:
// the checks that plan the same creation meanwhile join its flight.
type heldLocker struct {
	inner   ports.Locker
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (l *heldLocker) WithLock(ctx context.Context, name string, fn func(context.Context) error) error {
	return l.inner.WithLock(ctx, name, func(ctx context.Context) error {
		if l.armed.Load() {
			l.once.Do(func() { close(l.entered); <-l.release })
		}
		return fn(ctx)
	})
}

// Concurrent checks of one device that plan the same creation share one
// flight, and one task; exactly one of them reports the creation (or the
// supersede), the others a reuse, so that counting outcomes counts tasks.
func TestJoinedChecksReportOneCreation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		pending bool // the device has a pending task of another firmware, which the creation supersedes
		want    string
	}{
		{"created", false, ports.CheckCreated},
		{"superseded", true, ports.CheckSuperseded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gate := &heldLocker{inner: local.NewLocker(defaultWait, ports.NopLockMetrics{}), entered: make(chan struct{}), release: make(chan struct{})}
			e := newEnv(t, gate)
			d := e.device("1.0.0")
			if tc.pending {
				e.rollout(e.firmware("1.1.0"), 100)
				e.check(d, "1.0.0")
			}
			e.rollout(e.firmware("1.2.0"), 100)
			gate.armed.Store(true)
			const callers = 8
			results := make([]ports.CheckResult, callers)
			errs := make([]error, callers)
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() { results[i], errs[i] = e.devices.Check(e.ctx, e.req(d, model, "1.0.0")) })
			}
			<-gate.entered
			time.Sleep(200 * time.Millisecond) // the other callers plan the same creation and join its flight
			close(gate.release)
			wg.Wait()
			counts := map[string]int{}
			for i, res := range results {
				if errs[i] != nil || res.Task == nil || res.Task.Task.ID() != results[0].Task.Task.ID() {
					t.Fatalf("caller %d: %+v, %v; want the task caller 0 got", i, res, errs[i])
				}
				counts[res.Outcome]++
			}
			if counts[tc.want] != 1 || counts[ports.CheckReused] != callers-1 {
				t.Fatalf("outcomes %v: want one %s and %d reused", counts, tc.want, callers-1)
			}
		})
	}
}
