package application

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Devices implements ports.DeviceService: what a device can ask.
type Devices struct {
	deps      Deps
	pollAfter time.Duration
	// flights coalesces concurrent creations for the same device and
	// firmware within this process: a burst of duplicate polls takes the
	// lock once per replica instead of queueing every request behind it.
	flights singleflight.Group
	// authenticated remembers the devices that just authenticated, so the
	// check that follows in the same request does not load them again.
	authenticated *authMemo
}

var _ ports.DeviceService = (*Devices)(nil)

// NewDevices builds the device use cases.
func NewDevices(deps Deps, poll PollInterval) (*Devices, error) {
	if err := deps.validate(); err != nil {
		return nil, err
	}
	if poll <= 0 {
		return nil, errors.New("application: poll interval must be positive")
	}
	return &Devices{deps: deps, pollAfter: time.Duration(poll), authenticated: newAuthMemo(authMemoTTL, authMemoMax)}, nil
}

// How long, and how many, authenticated devices are remembered for the
// check that follows. An entry lives between one and two TTLs.
const (
	authMemoTTL = 2 * time.Second
	authMemoMax = 1 << 17
)

// authMemo remembers recently authenticated devices by id. The check reads
// only what never changes from it — the id and the model (fixed at
// registration; devices are never deleted) — so an entry's age cannot make
// a check wrong; the expiry only bounds its memory. The token is always
// checked against the store (a rotated token stops working at once).
type authMemo struct {
	mu        sync.Mutex
	ttl       time.Duration
	max       int
	rotated   time.Time
	cur, prev map[string]domain.Device
}

func newAuthMemo(ttl time.Duration, max int) *authMemo {
	return &authMemo{ttl: ttl, max: max, rotated: time.Now(), cur: map[string]domain.Device{}, prev: map[string]domain.Device{}}
}

func (m *authMemo) put(d domain.Device) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rotateLocked(time.Now())
	if len(m.cur) < m.max {
		m.cur[d.ID()] = d
	}
}

func (m *authMemo) get(id string) (domain.Device, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rotateLocked(time.Now())
	if d, ok := m.cur[id]; ok {
		return d, true
	}
	d, ok := m.prev[id]
	return d, ok
}

func (m *authMemo) rotateLocked(now time.Time) {
	age := now.Sub(m.rotated)
	if age < m.ttl {
		return
	}
	if age >= 2*m.ttl {
		clear(m.prev)
	} else {
		m.prev = m.cur
	}
	m.cur = make(map[string]domain.Device, len(m.prev))
	m.rotated = now
}

// AuthenticateDevice maps a bearer token to its device by the token's hash.
// Unknown tokens and token-less calls are indistinguishable to the caller.
func (s *Devices) AuthenticateDevice(ctx context.Context, token string) (string, error) {
	if token == "" || len(token) > 256 {
		return "", domain.ErrUnauthorized
	}
	h := domain.HashToken(token)
	d, err := s.deps.Devices.GetByTokenHash(ctx, h)
	if errors.Is(err, domain.ErrNotFound) {
		return "", domain.ErrUnauthorized
	}
	if err != nil {
		return "", fmt.Errorf("authenticating device: %w", err)
	}
	if !d.TokenHash().Matches(h) {
		return "", domain.ErrUnauthorized
	}
	s.authenticated.put(d)
	return d.ID(), nil
}

// device loads the device a check is for: the one that authenticated for
// this request when it did (only its id and model are used, which never
// change), else from the store.
func (s *Devices) device(ctx context.Context, id string) (domain.Device, error) {
	if d, ok := s.authenticated.get(id); ok {
		return d, nil
	}
	return s.deps.Devices.Get(ctx, id)
}

// Check answers a device's poll (check rules 1–7): settle its active task,
// choose its target, then reuse, keep, or create the task. Creation runs
// under the lock {device_id}:{firmware_id}, so that retries and replicas
// converge on one task; the store's one-active-task constraint backs the
// lock up.
func (s *Devices) Check(ctx context.Context, req ports.CheckRequest) (ports.CheckResult, error) {
	res, err := s.check(ctx, req)
	switch {
	case err == nil:
		res.PollAfter = s.pollAfter
	case errors.Is(err, domain.ErrServiceBusy):
		res.Outcome = ports.CheckBusy
	case errors.Is(err, domain.ErrRateLimited):
		res.Outcome = ports.CheckRateLimited
	case ctx.Err() != nil:
		res.Outcome = ports.CheckCancelled
	default:
		res.Outcome = ports.CheckError
	}
	s.deps.Metrics.CheckDone(res.Outcome)
	return res, err
}

func (s *Devices) check(ctx context.Context, req ports.CheckRequest) (ports.CheckResult, error) {
	if err := domain.ValidateIdentifier("model", req.Model); err != nil {
		return ports.CheckResult{}, err
	}
	current, err := domain.ParseVersion("current_version", req.CurrentVersion)
	if err != nil {
		return ports.CheckResult{}, err
	}
	d := s.deps
	if ok, wait := d.Limiter.Allow(req.DeviceID); !ok {
		return ports.CheckResult{}, &ports.RateLimitedError{Wait: wait}
	}
	dev, err := s.device(ctx, req.DeviceID)
	if err != nil {
		return ports.CheckResult{}, fmt.Errorf("loading device: %w", err)
	}
	if err := dev.CheckModel(req.Model); err != nil {
		return ports.CheckResult{}, err
	}
	now := d.Clock.Now()
	// Stores may write this behind, in batches: the check goes on with the
	// version the device reported, never with the stored one.
	if err := d.Devices.RecordSeen(ctx, dev.ID(), current, now); err != nil {
		return ports.CheckResult{}, fmt.Errorf("recording check: %w", err)
	}

	offers, err := d.Rollouts.Offers(ctx, dev.Model())
	if err != nil {
		return ports.CheckResult{}, fmt.Errorf("loading offers: %w", err)
	}
	fws := make(map[string]domain.Firmware, len(offers))
	rollouts := make(map[string]domain.Rollout, len(offers))
	for _, o := range offers {
		fws[o.Firmware.ID()] = o.Firmware
		rollouts[o.Rollout.ID()] = o.Rollout
	}

	// The target before failed attempts are known: an upper bound. Failed
	// attempts matter only when there is something to offer, so most polls
	// read the active task alone; the others read it with the failed
	// counts, in one round trip where the store can. (Settling the active
	// task below never changes failed counts: it only succeeds or cancels.)
	target, ok := domain.SelectTarget(dev, current, offers, nil)
	var (
		active *domain.Task
		failed map[string]int
	)
	if ok {
		active, failed, err = d.activeAndFailed(ctx, dev.ID())
	} else {
		active, err = d.activeTask(ctx, dev.ID())
	}
	if err != nil {
		return ports.CheckResult{}, fmt.Errorf("loading active task: %w", err)
	}
	if active != nil {
		if active, err = s.settle(ctx, *active, current, fws, rollouts); err != nil {
			return ports.CheckResult{}, err
		}
	}
	if ok {
		target, ok = domain.SelectTarget(dev, current, offers, failed)
	}
	var targetP *domain.Offer
	if ok {
		targetP = &target
	}

	switch domain.Decide(active, targetP) {
	case domain.PlanNone:
		return ports.CheckResult{Outcome: ports.CheckNoUpdate}, nil
	case domain.PlanKeep, domain.PlanReuse:
		v, err := d.view(ctx, fws, *active)
		if err != nil {
			return ports.CheckResult{}, err
		}
		return ports.CheckResult{Task: &v, Outcome: ports.CheckReused}, nil
	}
	return s.createOnce(ctx, dev, current, target, failed[target.Firmware.ID()], fws, rollouts)
}

// flightTimeout bounds one find-or-create, lock wait included.
const flightTimeout = 10 * time.Second

// flightResult is one creation's answer, shared by every caller that
// joined the flight; exactly one of them reports it as the creation.
type flightResult struct {
	res     ports.CheckResult
	claimed *atomic.Bool
}

// createOnce runs create at most once at a time per device and firmware in
// this process, and shares its answer with the callers that asked meanwhile.
func (s *Devices) createOnce(ctx context.Context, dev domain.Device, current domain.Version, target domain.Offer, failed int,
	fws map[string]domain.Firmware, rollouts map[string]domain.Rollout) (ports.CheckResult, error) {
	key := dev.ID() + ":" + target.Firmware.ID()
	ch := s.flights.DoChan(key, func() (any, error) {
		// The flight outlives any one caller's cancellation, since the
		// others still want its answer. The lock's wait bounds the wait;
		// flightTimeout bounds a database that stalls while the lock is
		// held, so neither the lock nor this goroutine is kept forever.
		flightCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flightTimeout)
		defer cancel()
		res, err := s.create(flightCtx, dev, current, target, failed, fws, rollouts)
		if err != nil && flightCtx.Err() != nil && !errors.Is(err, domain.ErrServiceBusy) {
			err = fmt.Errorf("%w: find-or-create ran out of time: %w", domain.ErrServiceBusy, err)
		}
		return flightResult{res: res, claimed: new(atomic.Bool)}, err
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return ports.CheckResult{}, r.Err
		}
		fr := r.Val.(flightResult)
		res := fr.res
		if (res.Outcome == ports.CheckCreated || res.Outcome == ports.CheckSuperseded) && !fr.claimed.CompareAndSwap(false, true) {
			res.Outcome = ports.CheckReused
		}
		return res, nil
	case <-ctx.Done():
		return ports.CheckResult{}, ctx.Err()
	}
}

// settle applies check rules 3 and 5 to the active task and stores the
// change; it returns the task if it is still active.
func (s *Devices) settle(ctx context.Context, t domain.Task, current domain.Version, fws map[string]domain.Firmware, rollouts map[string]domain.Rollout) (*domain.Task, error) {
	d := s.deps
	fw, err := d.firmwareOf(ctx, fws, t.FirmwareID())
	if err != nil {
		return nil, fmt.Errorf("loading task firmware: %w", err)
	}
	r, ok := rollouts[t.RolloutID()]
	if !ok {
		// Only rollouts that stopped admitting are missing from the offers.
		if r, err = d.Rollouts.Get(ctx, t.RolloutID()); err != nil {
			return nil, fmt.Errorf("loading task rollout: %w", err)
		}
		rollouts[r.ID()] = r
	}
	now := d.Clock.Now()
	probe := t
	if !probe.Settle(current, fw, r, now) {
		return &t, nil
	}
	settled, err := d.Tasks.Update(ctx, t.ID(), func(t *domain.Task) error {
		t.Settle(current, fw, r, now)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("settling task: %w", err)
	}
	d.Metrics.TaskTransition(settled.Status().String())
	if settled.Status().IsActive() {
		return &settled, nil
	}
	return nil, nil
}

// create is the critical section of check rule 7: under the lock, re-read
// the device's active task and reuse it, keep it, or replace it.
func (s *Devices) create(ctx context.Context, dev domain.Device, current domain.Version, target domain.Offer, failed int,
	fws map[string]domain.Firmware, rollouts map[string]domain.Rollout) (ports.CheckResult, error) {
	d := s.deps
	var (
		result     domain.Task
		created    bool
		superseded bool
	)
	lockName := dev.ID() + ":" + target.Firmware.ID()
	err := d.Locker.WithLock(ctx, lockName, func(ctx context.Context) error {
		var err error
		result, created, err = d.Tasks.ReplaceActive(ctx, dev.ID(), func(active *domain.Task) (*domain.Task, error) {
			superseded = false
			now := d.Clock.Now()
			if active != nil {
				if fw, ok := fws[active.FirmwareID()]; ok {
					if r, ok := rollouts[active.RolloutID()]; ok && active.Settle(current, fw, r, now) {
						d.Metrics.TaskTransition(active.Status().String())
					}
				}
				if !active.Status().IsActive() {
					active = nil
				}
			}
			switch domain.Decide(active, &target) {
			case domain.PlanReuse, domain.PlanKeep:
				return nil, nil
			}
			if active != nil {
				if err := active.Cancel(domain.CodeSuperseded, "superseded by firmware "+target.Firmware.Version().String(), now); err != nil {
					return nil, err
				}
				superseded = true
			}
			t, err := domain.NewTask(d.IDs.NewID(), dev.ID(), target, domain.NextAttempt(failed), now)
			if err != nil {
				return nil, err
			}
			return &t, nil
		})
		return err
	})
	if errors.Is(err, domain.ErrServiceBusy) {
		// Whoever held the lock may have created exactly the task we
		// wanted; handing it out needs no lock (check rule 7).
		if active, rerr := d.activeTask(ctx, dev.ID()); rerr == nil && active != nil && active.FirmwareID() == target.Firmware.ID() {
			v, verr := d.view(ctx, fws, *active)
			if verr == nil {
				return ports.CheckResult{Task: &v, Outcome: ports.CheckReused}, nil
			}
		}
	}
	if err != nil {
		return ports.CheckResult{}, fmt.Errorf("finding or creating task: %w", err)
	}
	outcome := ports.CheckReused
	if created {
		outcome = ports.CheckCreated
		if superseded {
			outcome = ports.CheckSuperseded
			d.Metrics.TaskTransition(domain.TaskCancelled.String())
		}
		d.Metrics.TaskTransition(domain.TaskPending.String())
	}
	if !result.Status().IsActive() {
		// The insert lost and the winner has already finished: nothing to hand out.
		return ports.CheckResult{Outcome: ports.CheckNoUpdate}, nil
	}
	v, err := d.view(ctx, fws, result)
	if err != nil {
		return ports.CheckResult{}, err
	}
	return ports.CheckResult{Task: &v, Outcome: outcome}, nil
}

// GetTask returns one of the device's own tasks; anyone else's is not found.
func (s *Devices) GetTask(ctx context.Context, deviceID, taskID string) (ports.TaskView, error) {
	t, err := s.deps.Tasks.Get(ctx, taskID)
	if err != nil {
		return ports.TaskView{}, fmt.Errorf("loading task: %w", err)
	}
	if t.DeviceID() != deviceID {
		return ports.TaskView{}, fmt.Errorf("task %s: %w", taskID, domain.ErrNotFound)
	}
	return s.deps.view(ctx, nil, t)
}

// ReportEvent applies a device's progress event once per event id (event
// rules 1–3) and, on a final status, lets the rollout pause itself when its
// failure threshold is reached (rule 5).
func (s *Devices) ReportEvent(ctx context.Context, deviceID, taskID string, req ports.EventRequest) (ports.TaskView, error) {
	ev, err := domain.NewEvent(req.EventID, req.Status, req.Progress, req.ErrorCode, req.ErrorMessage)
	if err != nil {
		return ports.TaskView{}, err
	}
	d := s.deps
	// A final status is never refused for rate reasons: it is the word
	// that lets the device stop, and losing it would leave the task open.
	if !ev.IsFinal() {
		if ok, wait := d.Limiter.Allow(deviceID); !ok {
			return ports.TaskView{}, &ports.RateLimitedError{Wait: wait}
		}
	}
	changed := false
	t, err := d.Tasks.ApplyEvent(ctx, taskID, ev, func(t *domain.Task, prior *domain.Event) (bool, error) {
		if t.DeviceID() != deviceID {
			return false, fmt.Errorf("task %s: %w", taskID, domain.ErrNotFound)
		}
		var err error
		changed, err = t.ApplyEvent(ev, prior, d.Clock.Now())
		return changed, err
	})
	if err != nil {
		return ports.TaskView{}, fmt.Errorf("applying event: %w", err)
	}
	if changed {
		d.Metrics.TaskTransition(t.Status().String())
		if t.Status() == domain.TaskFailed || t.Status() == domain.TaskSucceeded {
			if err := s.autoPause(ctx, t.RolloutID()); err != nil {
				// The event is stored; a missed evaluation is retried by the
				// next final event, so the device need not resend.
				return ports.TaskView{}, err
			}
		}
	}
	return d.view(ctx, nil, t)
}

// autoPause evaluates event rule 5 for a rollout.
func (s *Devices) autoPause(ctx context.Context, rolloutID string) error {
	d := s.deps
	r, err := d.Rollouts.Get(ctx, rolloutID)
	if err != nil {
		return fmt.Errorf("loading rollout: %w", err)
	}
	if r.FailureThresholdPercent() == nil || r.Status() != domain.RolloutActive {
		return nil
	}
	stats, err := d.Tasks.RolloutStats(ctx, rolloutID)
	if err != nil {
		return fmt.Errorf("counting rollout tasks: %w", err)
	}
	now := d.Clock.Now()
	if probe := r; !probe.AutoPause(stats, now) {
		return nil
	}
	_, err = d.Rollouts.Update(ctx, rolloutID, func(r *domain.Rollout) error {
		r.AutoPause(stats, now)
		return nil
	})
	if err != nil {
		return fmt.Errorf("pausing rollout: %w", err)
	}
	return nil
}
