package main

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// sim drives the fleet against the service.
type sim struct {
	cfg   config
	cl    *client
	fleet *fleet
	fw    *published // the firmware published for this run, nil without -publish
	runID string     // makes event ids unique to the run

	// What the devices noticed. Each is reported; divergent breaks an
	// invariant.
	groups      atomic.Int64 // concurrent duplicate-check groups sent
	divergent   atomic.Int64 // groups whose answers named different tasks
	busyGroups  atomic.Int64 // groups where every check was refused SERVICE_BUSY
	reused      atomic.Int64 // checks that returned the task the device already had
	switched    atomic.Int64 // checks that returned another task while the device's was active
	vanished    atomic.Int64 // checks that returned no task while the device's was active
	finished    atomic.Int64 // events refused TASK_FINISHED (the device dropped the task)
	refused     atomic.Int64 // events refused otherwise (INVALID_TRANSITION, NOT_FOUND, …)
	succeeded   atomic.Int64 // tasks the device walked to succeeded
	failed      atomic.Int64 // tasks the device reported failed
	dispatchLag atomic.Int64 // -rate: steps dispatched late because every worker was busy
}

func newSim(cfg config, cl *client, f *fleet, fw *published, now time.Time) *sim {
	return &sim{cfg: cfg, cl: cl, fleet: f, fw: fw, runID: strconv.FormatInt(now.UnixNano(), 36)}
}

// run plays the configured mode until stop ends (the -duration deadline);
// burst also ends when every device has sent its checks. Requests run
// under req, which only a SIGINT cancels: at the deadline no new step
// starts, and the steps in flight finish (each bounded by -timeout), so
// the service never sees the run's end as a wave of aborted requests.
func (s *sim) run(stop, req context.Context) {
	if s.cfg.Mode == modeBurst {
		s.burst(stop, req)
		return
	}
	s.loop(stop, req)
}

// burst has every device send -dup concurrent checks, once, spread over the
// URLs: the creation burst.
func (s *sim) burst(stop, req context.Context) {
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(s.cfg.Concurrency, len(s.fleet.devices)) {
		wg.Go(func() {
			for stop.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(s.fleet.devices) {
					return
				}
				s.dupCheck(req, s.fleet.devices[i], s.cfg.Dup, i)
			}
		})
	}
	wg.Wait()
}

// loop runs the poll, walk and mixed modes: a dispatcher hands devices, in
// a fresh random order every round, to the workers; a device is never
// handed out while a worker still acts for it or while it honours a
// Retry-After. With -rate, steps are Poisson-spaced (the jitter of a real
// fleet); without, the workers go as fast as the service answers.
func (s *sim) loop(stop, req context.Context) {
	jobs := make(chan *device)
	var wg sync.WaitGroup
	for w := range s.cfg.Concurrency {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			for d := range jobs {
				s.step(req, rng, d)
				d.busy.Store(false)
			}
		})
	}
	s.dispatch(stop, jobs)
	close(jobs)
	wg.Wait()
}

func (s *sim) dispatch(ctx context.Context, jobs chan<- *device) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	n := len(s.fleet.devices)
	var interval float64 // mean seconds between steps
	if s.cfg.Rate > 0 {
		interval = 1 / s.cfg.Rate
	}
	due := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	for ctx.Err() == nil {
		sent, began, waited := 0, time.Now(), time.Duration(0) // waited: on the workers or -rate, not scanning
		rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
		now := began.UnixNano()
		for _, i := range order {
			d := s.fleet.devices[i]
			if now < d.notBefore.Load() || !d.busy.CompareAndSwap(false, true) {
				continue
			}
			t0 := time.Now()
			if interval > 0 {
				due = due.Add(time.Duration(rng.ExpFloat64() * interval * float64(time.Second)))
				if wait := time.Until(due); wait > 0 {
					timer.Reset(wait)
					select {
					case <-ctx.Done():
						d.busy.Store(false)
						return
					case <-timer.C:
					}
				}
			}
			select {
			case jobs <- d:
				sent++
				now = time.Now().UnixNano()
				waited += time.Duration(now - t0.UnixNano())
			case <-ctx.Done():
				d.busy.Store(false)
				return
			}
			if interval > 0 && time.Since(due) > 100*time.Millisecond {
				s.dispatchLag.Add(1)
				due = time.Now() // do not burst to catch up
			}
		}
		if sent == 0 || sent < n/64 {
			// Every device, or nearly, is busy or resting (a Retry-After,
			// -honour-poll): wait rather than spin. The wait is twenty
			// times the pass's own scanning (up to a second), so scanning
			// a million resting devices (some 25 ms a pass) takes a
			// twentieth of a core, not the whole of one.
			timer.Reset(min(time.Second, max(5*time.Millisecond, 20*(time.Since(began)-waited))))
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
	}
}

// step is one action of one device, by mode.
func (s *sim) step(ctx context.Context, rng *rand.Rand, d *device) {
	d.mu.Lock()
	hasTask := d.task != nil
	d.mu.Unlock()
	base := s.cfg.URLs[rng.IntN(len(s.cfg.URLs))]
	switch s.cfg.Mode {
	case modePoll:
		s.check(ctx, rng, d, base)
	case modeWalk:
		if hasTask {
			s.event(ctx, d, base)
		} else {
			s.check(ctx, rng, d, base)
		}
	case modeMixed:
		switch r := rng.Float64(); {
		case hasTask && r < 0.25:
			s.check(ctx, rng, d, base) // a poll while busy: must be the same task
		case hasTask:
			s.event(ctx, d, base)
		case s.cfg.Dup > 1 && r < 0.2:
			s.dupCheck(ctx, d, s.cfg.Dup, rng.IntN(len(s.cfg.URLs)))
		default:
			s.check(ctx, rng, d, base)
		}
	}
}

// backoff honours a Retry-After for the device.
func backoff(d *device, a answer) {
	if a.RetryAfter > 0 {
		d.notBefore.Store(time.Now().Add(a.RetryAfter).UnixNano())
	}
}

// check polls once and adopts what it is handed.
func (s *sim) check(ctx context.Context, rng *rand.Rand, d *device, base string) {
	d.mu.Lock()
	version := d.version
	d.mu.Unlock()
	out, a, err := s.cl.check(ctx, base, d, s.fleet.model, version)
	if err != nil {
		return
	}
	if !a.ok() || a.Code != "" {
		backoff(d, a)
		return
	}
	s.adopt(rng, d, out)
}

// dupCheck sends n concurrent checks for one device, spread over the URLs
// from offset on, and checks they agree on the task.
func (s *sim) dupCheck(ctx context.Context, d *device, n, offset int) {
	d.mu.Lock()
	version := d.version
	d.mu.Unlock()
	type result struct {
		out checkWire
		a   answer
		err error
	}
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for k := range n {
		base := s.cfg.URLs[(offset+k)%len(s.cfg.URLs)]
		wg.Go(func() {
			<-start
			out, a, err := s.cl.check(ctx, base, d, s.fleet.model, version)
			results[k] = result{out, a, err}
		})
	}
	close(start)
	wg.Wait()

	ids := map[string]bool{}
	busy, answered := 0, 0
	for _, r := range results {
		if r.err != nil {
			continue
		}
		answered++
		switch {
		case r.a.busy():
			busy++
		case r.a.ok() && r.a.Code == "" && r.out.Task != nil:
			ids[r.out.Task.ID] = true
		}
	}
	if answered < n {
		return // the run ended mid-group: nothing to judge
	}
	s.groups.Add(1)
	if len(ids) > 1 {
		s.divergent.Add(1)
	}
	if busy == n {
		s.busyGroups.Add(1)
	}
	rng := rand.New(rand.NewPCG(uint64(offset), uint64(time.Now().UnixNano())))
	for _, r := range results {
		switch {
		case r.a.ok() && r.a.Code == "" && r.out.Task == nil && len(ids) > 0:
			// A check of the group that saw no task ran before the one
			// that created it (on a replica whose view of the rollout had
			// not yet widened, say): the later state is the task, whatever
			// order the answers arrived in.
		case r.a.ok() && r.a.Code == "":
			s.adopt(rng, d, r.out)
		default:
			backoff(d, r.a)
		}
	}
}

// adopt takes what a check answered into the device's state.
func (s *sim) adopt(rng *rand.Rand, d *device, out checkWire) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := out.Task
	if t == nil {
		d.noUpdate = true
		if s.cfg.HonourPoll && out.PollAfterSeconds > 0 {
			d.notBefore.Store(time.Now().Add(d.rest(time.Duration(out.PollAfterSeconds) * time.Second)).UnixNano())
		}
		if d.task != nil {
			s.vanished.Add(1)
			d.task = nil
		}
		return
	}
	seen := false
	for _, h := range d.handed {
		if h.id == t.ID {
			seen = true
			break
		}
	}
	if !seen {
		d.handed = append(d.handed, handout{id: t.ID, firmwareID: t.Firmware.ID})
	}
	if d.task != nil {
		if d.task.id == t.ID {
			s.reused.Add(1)
			return
		}
		s.switched.Add(1)
	}
	if seen && d.task == nil {
		// A task the device already finished or dropped: do not walk it
		// again (the service has moved it on, or will refuse).
		s.reused.Add(1)
		return
	}
	failAt := -1
	if rng.Float64() < s.cfg.FailRate {
		failAt = resumeStep(t.Status) + rng.IntN(len(walkSteps)-resumeStep(t.Status))
	}
	d.task = &simTask{id: t.ID, firmwareID: t.Firmware.ID, version: t.Firmware.Version,
		step: resumeStep(t.Status), failAt: failAt}
}

// event reports the next step of the device's task. A refused or lost
// event is sent again, with the same event id, at the device's next step.
func (s *sim) event(ctx context.Context, d *device, base string) {
	d.mu.Lock()
	t := d.task
	if t == nil {
		d.mu.Unlock()
		return
	}
	taskID, step, failAt := t.id, t.step, t.failAt
	d.mu.Unlock()

	ev := eventWire{EventID: "sim-" + s.runID + "-" + strconv.Itoa(step)}
	if step == failAt {
		ev.EventID += "-failed"
		ev.Status, ev.ErrorCode = "failed", "SIM_INSTALL_FAILED"
	} else {
		w := walkSteps[step]
		p := w.progress
		ev.Status, ev.Progress = w.status, &p
	}
	out, a, err := s.cl.event(ctx, base, d, taskID, ev)
	if err != nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.task == nil || d.task.id != taskID {
		return // a concurrent check moved the device on
	}
	switch {
	case a.ok() && a.Code == "":
		d.task.step++
		if out.Status == "succeeded" || out.Status == "failed" {
			s.final(d, taskID, out.Status)
			if out.Status == "succeeded" {
				d.version = d.task.version
				s.succeeded.Add(1)
			} else {
				s.failed.Add(1)
			}
			d.task = nil
		} else if d.task.step >= len(walkSteps) {
			d.task = nil // cannot happen: the last step is final
		}
	case a.Status == 409 && a.Code == "TASK_FINISHED":
		s.finished.Add(1)
		d.task = nil
	case a.Status >= 400 && a.Status < 500 && a.Status != 429:
		s.refused.Add(1)
		d.task = nil
	default:
		backoff(d, a) // 429, 503, 5xx, transport: try the same event again later
	}
}

// final records the final status the service confirmed for a task.
func (s *sim) final(d *device, taskID, status string) {
	for i := range d.handed {
		if d.handed[i].id == taskID {
			d.handed[i].final = status
			return
		}
	}
}

// rate is n per second over elapsed.
func rate(n int64, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return math.Round(float64(n)/elapsed.Seconds()*10) / 10
}
