package application

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// CheckStore is what the check reads and writes of a device's tasks.
type CheckStore interface {
	// CheckViewOf reads the device with its task state in one round trip
	// (AuthStore.CheckViewOf): the re-read after a lock the check could
	// not have.
	CheckViewOf(ctx context.Context, deviceID domain.DeviceID) (ports.CheckView, error)
	// TaskTransactor is the transaction ReplaceActive, next to the
	// check, replaces the device's active task in.
	TaskTransactor
}

// UnchangedInserter is a store's creation in one statement, its own
// transaction, which a CheckStore may also be: a creation is then two round
// trips (the check view and this) instead of the check view and a whole
// transaction. A store with no round trips to save (memory) has none, and
// its creations all go through ReplaceActive, which decides the same.
type UnchangedInserter interface {
	// InsertIfUnchanged inserts t only if what a plan made on an earlier
	// read depends on still holds as the statement sees it (seen): t's
	// device has no active task (neither in its snapshot nor at its
	// insert) and no task at all in t's rollout, its failed tasks of t's
	// firmware number seen.Failed, its version is one of seen.Versions,
	// and t's firmware and rollout (of that firmware) have the statuses
	// of seen.Offer's, the rollout unchanged since (its updated_at: t
	// joined the stage seen.Offer gives) — read FOR SHARE, so that a
	// revoke or pause in progress is waited for and wins. With t it adds
	// counts to the rollout's counters. It compares, it does not judge:
	// created false means nothing was stored, whichever guard failed, and
	// the full transaction (ReplaceActive) decides.
	InsertIfUnchanged(ctx context.Context, t domain.Task, seen ports.GuardedInsert, counts []domain.CountChange) (stored domain.Task, created bool, err error)
}

// Checks answers devices' polls.
type Checks struct {
	devices   ports.DeviceRepository
	firmwares ports.FirmwareRepository
	rollouts  ports.RolloutRepository
	tasks     CheckStore
	unchanged UnchangedInserter // the store's creation in one statement; nil if it has none
	locker    ports.Locker
	clock     ports.Clock
	ids       ports.IDGenerator
	metrics   ports.Metrics
	limiter   ports.RateLimiter
	attrs     ports.DeviceAttributes
	pollAfter time.Duration
	// flights coalesces concurrent creations for the same device, firmware
	// and reported version within this process: a burst of duplicate polls
	// takes the lock once per replica instead of queueing every request
	// behind it.
	flights singleflight.Group
}

// NewChecks builds the check use case: devices records each check
// (possibly written behind), rollouts offers what to install, tasks holds
// the device's tasks, locker serialises creation per device and firmware,
// firmwares describes tasks whose firmware is not on offer any more, attrs
// stores the attributes devices report with their polls. When tasks is an
// UnchangedInserter too, a creation with nothing to end tries its one
// statement first.
func NewChecks(devices ports.DeviceRepository, firmwares ports.FirmwareRepository, rollouts ports.RolloutRepository,
	tasks CheckStore, locker ports.Locker, clock ports.Clock, ids ports.IDGenerator, metrics ports.Metrics,
	limiter ports.RateLimiter, attrs ports.DeviceAttributes, poll PollInterval) (*Checks, error) {
	if err := required(devices, firmwares, rollouts, tasks, locker, clock, ids, metrics, limiter, attrs); err != nil {
		return nil, err
	}
	if poll <= 0 {
		return nil, errors.New("application: poll interval must be positive")
	}
	unchanged, _ := tasks.(UnchangedInserter)
	return &Checks{devices: devices, firmwares: firmwares, rollouts: rollouts, tasks: tasks, unchanged: unchanged, locker: locker,
		clock: clock, ids: ids, metrics: metrics, limiter: limiter, attrs: attrs, pollAfter: time.Duration(poll)}, nil
}

// Check answers a device's poll (check rules 1–7). One function decides it,
// domain.PlanCheck: first on a lock-free read (the device's task state that
// came with its authentication, and the offers), and, only when that plan
// writes, again inside the transaction that writes, on what that
// transaction sees. Creation runs under the lock {device_id}:{firmware_id},
// so that retries and replicas converge on one task; the store's
// one-active-task constraint backs the lock up.
func (s *Checks) Check(ctx context.Context, req ports.CheckRequest) (ports.CheckResult, error) {
	res, err := s.check(ctx, req)
	switch {
	case err == nil:
		if res.PollAfter <= 0 || res.PollAfter > s.pollAfter {
			res.PollAfter = s.pollAfter
		}
	case errors.Is(err, domain.ErrServiceBusy):
		res.Outcome = ports.CheckBusy
	case errors.Is(err, domain.ErrRateLimited):
		res.Outcome = ports.CheckRateLimited
	case ctx.Err() != nil:
		res.Outcome = ports.CheckCancelled
	default:
		res.Outcome = ports.CheckError
	}
	s.metrics.CheckDone(res.Outcome)
	return res, err
}

func (s *Checks) check(ctx context.Context, req ports.CheckRequest) (ports.CheckResult, error) {
	if err := domain.ValidateIdentifier("model", req.Model); err != nil {
		return ports.CheckResult{}, err
	}
	current, err := domain.ParseVersion("current_version", req.CurrentVersion)
	if err != nil {
		return ports.CheckResult{}, err
	}
	dev := req.Device.Device
	if dev.ID().IsZero() {
		return ports.CheckResult{}, fmt.Errorf("check without an authenticated device: %w", domain.ErrUnauthorized)
	}
	if ok, wait := s.limiter.Allow(dev.ID().String()); !ok {
		return ports.CheckResult{}, &ports.RateLimitedError{Wait: wait}
	}
	if err := dev.CheckModel(req.Model); err != nil {
		return ports.CheckResult{}, err
	}
	now := s.clock.Now()
	offers, err := s.rollouts.Offers(ctx, dev.Model())
	if err != nil {
		return ports.CheckResult{}, fmt.Errorf("loading offers: %w", err)
	}
	tasks := req.Device.Tasks
	if tasks == nil {
		v, err := s.tasks.CheckViewOf(ctx, dev.ID())
		if err != nil {
			return ports.CheckResult{}, fmt.Errorf("loading the device's tasks: %w", err)
		}
		tasks = &v.Tasks
	}
	facts, err := s.reportAttributes(ctx, dev.ID(), tasks.Facts, req.Attributes, now)
	if err != nil {
		return ports.CheckResult{}, err
	}
	active, err := s.activeTask(ctx, tasks.Active, offers)
	if err != nil {
		return ports.CheckResult{}, err
	}
	readAt := req.Device.ReadAt
	if readAt.IsZero() {
		readAt = now // after the read: a success the read missed may pass for one it saw
	}
	plan := domain.PlanCheck(domain.CheckInput{
		Device: dev, Reported: current, Active: active, Offers: offers, Failed: tasks.Failed, Now: now, Facts: facts, Delivery: req.Delivery,
		ReadAt: readAt,
	})
	a := asking{dev: dev, current: current, facts: facts, delivery: req.Delivery, readAt: readAt, tasks: tasks}
	// Stores may write this behind, in batches: the check goes on with the
	// version the device reported, never with the stored one. It is
	// recorded as of the read, so that a success stored since (which the
	// read did not see; its version is the device's later word) is not
	// overwritten with a report made before it. A report
	// below the version read (or above it, a rollback's) may contradict a
	// success (event rule 7, the plan's Recheck): it is recorded only once the transaction that judges
	// it has committed, so that a check answered SERVICE_BUSY leaves the
	// success's version for the next check to judge again, rather than
	// hide the contradiction from it.
	if !plan.Recheck {
		if err := s.devices.RecordSeen(ctx, dev, current, readAt); err != nil {
			return ports.CheckResult{}, fmt.Errorf("recording check: %w", err)
		}
	}
	var res ports.CheckResult
	switch {
	case !plan.Writes():
		res = ports.CheckResult{Outcome: ports.CheckNoUpdate}
		if plan.Task != nil {
			res = ports.CheckResult{Task: &ports.TaskView{Task: *plan.Task, Firmware: active.Firmware}, Outcome: ports.CheckReused}
		}
	case plan.Action == domain.CheckCreate:
		// With no task to end, the creation may take its short path on
		// the state just read (createUnchanged).
		var seen *ports.DeviceTasks
		if tasks.Active == nil && plan.Ended == nil {
			seen = tasks
		}
		res, err = s.createOnce(ctx, a, offers, plan.Offer, seen)
	default:
		// Only the active task changes (it succeeded, was cancelled or
		// timed out), or the last success may be contradicted (Recheck:
		// the transaction reads it): no task is created, so no lock is
		// needed; the row lock of the transaction serialises this with
		// any other writer.
		res, err = s.write(ctx, a, offers, domain.UUID{})
	}
	// The plan made again in a writing transaction may want to create a
	// task for another firmware than the lock held, if any, was taken for
	// (what the transaction saw changed since the lock-free read): create
	// it under its own lock, rather than answer as if nothing were on
	// offer. Bounded: a device whose tasks keep changing is told to retry.
	// (The loop starts only on an error: errors.As's target escapes to the
	// heap, an allocation a check that succeeds need not pay.)
	for round := 0; err != nil; round++ {
		var moved *planMovedError
		if !errors.As(err, &moved) {
			break
		}
		if round == maxReplans {
			err = fmt.Errorf("%w: the device's tasks kept changing while its check was written", domain.ErrServiceBusy)
			break
		}
		offers = moved.offers
		res, err = s.createOnce(ctx, a, offers, moved.offer, nil)
	}
	if err == nil && plan.Recheck {
		if err = s.devices.RecordSeen(ctx, dev, current, readAt); err != nil {
			return ports.CheckResult{}, fmt.Errorf("recording check: %w", err)
		}
	}
	if err == nil && res.Task == nil {
		res.PollAfter = plan.PollAfter(now, s.pollAfter)
	}
	return res, err
}

// reportAttributes lays the attributes a device reports in this poll over
// its stored ones (the domain's limits apply: a report that breaks them is
// refused) and stores them when they changed, so the plan judges what the
// device says now. Polls that report nothing, or the same thing again,
// write nothing.
func (s *Checks) reportAttributes(ctx context.Context, deviceID domain.DeviceID, facts domain.DeviceFacts, reported map[string]string, now time.Time) (domain.DeviceFacts, error) {
	if reported == nil {
		return facts, nil
	}
	merged := domain.RehydrateDeviceAttributes(facts.Attributes, now)
	if err := merged.Apply(domain.AttributesMerge, reported, now); err != nil {
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			ve.Field = "attributes"
		}
		return facts, err
	}
	if maps.Equal(merged.Values(), facts.Attributes) || len(reported) == 0 && facts.Attributes != nil {
		return facts, nil
	}
	if _, err := s.attrs.Update(ctx, deviceID, func(a *domain.DeviceAttributes) error {
		return a.Apply(domain.AttributesMerge, reported, now)
	}); err != nil {
		return facts, fmt.Errorf("storing reported attributes: %w", err)
	}
	facts.Attributes = merged.Values()
	return facts, nil
}

// flightTimeout bounds one find-or-create, lock wait included.
const flightTimeout = 10 * time.Second

// asking is what one check request is decided on besides the store: the
// device as read and when, the version it is checked with (the device's
// report; a DDI poll's, which carries none, the stored one), its tags and
// attributes, and what its protocol can deliver.
type asking struct {
	dev      domain.Device
	readAt   time.Time
	current  domain.Version
	facts    domain.DeviceFacts
	delivery domain.Delivery
	tasks    *ports.DeviceTasks // the device's task state as read
}

// flightResult is one creation's answer, shared by every caller that
// joined the flight; exactly one of them reports it as the creation.
type flightResult struct {
	res     ports.CheckResult
	claimed *atomic.Bool
}

// taskState is what a creation's caller read of the device's tasks that
// a flight's answer may have outlived: the offered firmware's failed
// count and the active task, if any.
func (a asking) taskState(firmware domain.UUID) string {
	s := strconv.Itoa(a.tasks.Failed[firmware.String()])
	if t := a.tasks.Active; t != nil {
		s += ":" + t.ID().String() + ":" + t.Status().String()
	}
	return s
}

// createOnce runs create at most once at a time per device, firmware,
// reported version and version read in this process, and shares its
// answer with the callers that asked meanwhile (a caller reporting another
// version is planned anew: rule 3 may succeed its task instead; one that
// read another — a success stored between their reads — may contradict
// it where the other may not; so may one whose report may contradict what
// it read, event rule 7, and read at another time). So is a caller that
// read other task state (taskState): a flight's task may have ended since
// the flight made it — while its answer was on its way — and a caller
// that read the end must not be handed the task as it was.
func (s *Checks) createOnce(ctx context.Context, a asking, offers []domain.Offer, offer domain.Offer, seen *ports.DeviceTasks) (ports.CheckResult, error) {
	key := a.dev.ID().String() + ":" + offer.Firmware.ID().String() + ":" + a.current.String() + ":" + a.dev.CurrentVersion().String() +
		":" + a.taskState(offer.Firmware.ID())
	if (domain.CheckInput{Device: a.dev, Reported: a.current, Offers: offers}).MayContradictSuccess() {
		// Whether it contradicts a success (event rule 7) depends on when
		// it read (CheckInput.ReadAt): a check that read after the success
		// must not take the answer of one that read before it.
		key += ":" + a.readAt.Format(time.RFC3339Nano)
	}
	ch := s.flights.DoChan(key, func() (any, error) {
		// The flight outlives any one caller's cancellation, since the
		// others still want its answer. The lock's wait bounds the wait;
		// flightTimeout bounds a database that stalls while the lock is
		// held, so neither the lock nor this goroutine is kept forever.
		flightCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flightTimeout)
		defer cancel()
		res, err := s.create(flightCtx, a, offers, offer, seen)
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

// create is the critical section of check rule 7: under the lock, plan
// again on what the transaction sees, and reuse, keep or replace. seen,
// when not nil, is the device's task state read before the lock, with no
// active task: the short path (createUnchanged) is tried first, on a
// store that has it.
func (s *Checks) create(ctx context.Context, a asking, offers []domain.Offer, offer domain.Offer, seen *ports.DeviceTasks) (ports.CheckResult, error) {
	var res ports.CheckResult
	err := s.locker.WithLock(ctx, a.dev.ID().String()+":"+offer.Firmware.ID().String(), func(ctx context.Context) error {
		var (
			err  error
			done bool
		)
		if seen != nil && s.unchanged != nil {
			if res, done, err = s.createUnchanged(ctx, a, offers, *seen, offer.Firmware.ID()); err != nil || done {
				return err
			}
		}
		res, err = s.write(ctx, a, offers, offer.Firmware.ID())
		if errors.Is(err, domain.ErrOfferWithdrawn) {
			// Revoked or stopped between the plan and the insert: plan
			// again as if it had never been offered.
			res, err = s.write(ctx, a, withoutRollout(offers, offer.Rollout.ID()), offer.Firmware.ID())
		}
		return err
	})
	if errors.Is(err, domain.ErrServiceBusy) {
		// Whoever held the lock may have created exactly the task we
		// wanted; handing it out needs no lock (check rule 7).
		if v, rerr := s.tasks.CheckViewOf(ctx, a.dev.ID()); rerr == nil && v.Tasks.Active != nil && v.Tasks.Active.FirmwareID() == offer.Firmware.ID() {
			return ports.CheckResult{Task: &ports.TaskView{Task: *v.Tasks.Active, Firmware: offer.Firmware}, Outcome: ports.CheckReused}, nil
		}
	}
	if err != nil {
		return ports.CheckResult{}, fmt.Errorf("finding or creating task: %w", err)
	}
	return res, nil
}

// createUnchanged is a creation's short path, for a device whose task
// state seen, read before the lock, had no active task: domain.PlanCheck
// again, now, on seen, and the task it wants — if of the locked firmware,
// ending nothing — inserted by one statement that stores it only if what
// that plan read of the store still holds (InsertIfUnchanged: no active
// task, as many failed tasks of its firmware, a version under which the
// plan stands, the offer's statuses as judged, read FOR SHARE). The
// transaction would then have planned the same: with no active task its
// plan reads nothing else of the store but the device's version
// (CheckInput.WithCommitted; a success since the read moves it), the
// latest task only on a Recheck, not taken here, and more failures of
// another firmware only drop an offer the plan did not pick. Failed
// counts only grow, so a stale read (a replica's) fails the guard rather
// than pass it. The statement takes its locks in ReplaceActive's order
// (the offer FOR SHARE, then the insert). done false: nothing was
// stored, and ReplaceActive decides.
func (s *Checks) createUnchanged(ctx context.Context, a asking, offers []domain.Offer, seen ports.DeviceTasks, locked domain.UUID) (res ports.CheckResult, done bool, err error) {
	now := s.clock.Now()
	in := domain.CheckInput{Device: a.dev, Reported: a.current, Offers: offers, Failed: seen.Failed, Now: now, Facts: a.facts, Delivery: a.delivery, ReadAt: a.readAt}
	plan := domain.PlanCheck(in)
	if plan.Action != domain.CheckCreate || plan.Ended != nil || plan.Recheck || plan.Offer.Firmware.ID() != locked {
		return ports.CheckResult{}, false, nil
	}
	id, err := newID(s.ids)
	if err != nil {
		return ports.CheckResult{}, false, err
	}
	t, err := domain.NewTask(id, a.dev.ID(), plan.Offer, plan.Attempt, now)
	if err != nil {
		return ports.CheckResult{}, false, err
	}
	t.JoinStage(plan.Offer.Rollout) // the statement stores t only if the rollout is still as read
	stored, created, err := s.unchanged.InsertIfUnchanged(ctx, t,
		ports.GuardedInsert{Offer: plan.Offer, Failed: seen.Failed[locked.String()], Versions: in.StandingVersions()}, firstCounts(t))
	if err != nil || !created {
		return ports.CheckResult{}, false, err
	}
	s.metrics.TaskTransition(domain.TaskPending.String())
	return ports.CheckResult{Task: &ports.TaskView{Task: stored, Firmware: plan.Offer.Firmware}, Outcome: ports.CheckCreated}, true, nil
}

// maxReplans bounds how often one check follows its plan to another
// firmware's lock (planMovedError).
const maxReplans = 2

// planMovedError says that the plan made again in the writing transaction
// over offers wants to create a task of offer, whose lock is not held:
// nothing was stored, and the caller creates it under that lock, planning
// over the same offers (a withdrawn one already left out).
type planMovedError struct {
	offer  domain.Offer
	offers []domain.Offer
}

func (e *planMovedError) Error() string {
	return "the check's plan moved to firmware " + e.offer.Firmware.ID().String()
}

// withoutRollout is offers less the given rollout's.
func withoutRollout(offers []domain.Offer, rolloutID domain.UUID) []domain.Offer {
	out := make([]domain.Offer, 0, len(offers))
	for _, o := range offers {
		if o.Rollout.ID() != rolloutID {
			out = append(out, o)
		}
	}
	return out
}

// write carries out a plan in the transaction that replaces the device's
// active task, re-planning on what that transaction sees (domain.PlanCheck
// again, over the same offers). locked is the firmware whose lock is held
// (the zero UUID when none): the only firmware the transaction may create
// a task of. A plan that would now create a task of another firmware
// stores nothing and returns a planMovedError naming that offer.
func (s *Checks) write(ctx context.Context, a asking, offers []domain.Offer, locked domain.UUID) (ports.CheckResult, error) {
	var (
		plan domain.CheckPlan
		seen *domain.ActiveTask
	)
	result, created, err := ReplaceActive(ctx, s.tasks, a.dev.ID(), func(st TaskState) (*domain.Task, error) {
		now := s.clock.Now()
		seen = st.Active
		in := domain.CheckInput{
			Device: a.dev, Reported: a.current, Active: st.Active, Offers: offers, Failed: st.Failed, Now: now, Facts: a.facts, Delivery: a.delivery,
			ReadAt: a.readAt,
		}
		if st.Version != nil {
			// No active task now: the task the read saw, or one created
			// since, may have ended in a success that moved the device's
			// version.
			v, err := st.Version()
			if err != nil {
				return nil, err
			}
			in = in.WithCommitted(v)
		}
		if in.MayContradictSuccess() && st.Latest != nil {
			// The device's last task, read only now: a success this
			// check may contradict (event rule 7).
			var err error
			if in.Last, err = st.Latest(); err != nil {
				return nil, err
			}
		}
		plan = domain.PlanCheck(in)
		switch {
		case plan.Ended == nil:
		case st.Active != nil:
			st.Active.Task = *plan.Ended
		case in.Last != nil:
			in.Last.Task = *plan.Ended // a reverted install, re-marked failed
		}
		if plan.Action != domain.CheckCreate {
			return nil, nil
		}
		if plan.Offer.Firmware.ID() != locked {
			return nil, &planMovedError{offer: plan.Offer, offers: offers}
		}
		id, err := newID(s.ids)
		if err != nil {
			return nil, err
		}
		t, err := domain.NewTask(id, a.dev.ID(), plan.Offer, plan.Attempt, now)
		if err != nil {
			return nil, err
		}
		return &t, nil
	}, judgeRollout(s.clock)) // the task the plan ended counts at once, as a final event's would
	if err != nil {
		return ports.CheckResult{}, err
	}
	if plan.Ended != nil {
		s.metrics.TaskTransition(plan.Ended.Status().String())
	}
	switch {
	case created:
		s.metrics.TaskTransition(domain.TaskPending.String())
		outcome := ports.CheckCreated
		if plan.Superseded() {
			outcome = ports.CheckSuperseded
		}
		return ports.CheckResult{Task: &ports.TaskView{Task: result, Firmware: plan.Offer.Firmware}, Outcome: outcome}, nil
	case plan.Action == domain.CheckCreate:
		// The insert lost to a concurrent one: hand out the winner, unless
		// it has already finished.
		if !result.Status().IsActive() {
			return ports.CheckResult{Outcome: ports.CheckNoUpdate}, nil
		}
		v, err := taskView(ctx, s.firmwares, map[domain.UUID]domain.Firmware{plan.Offer.Firmware.ID(): plan.Offer.Firmware}, result)
		if err != nil {
			return ports.CheckResult{}, err
		}
		return ports.CheckResult{Task: &v, Outcome: ports.CheckReused}, nil
	case plan.Task != nil && seen != nil:
		return ports.CheckResult{Task: &ports.TaskView{Task: result, Firmware: seen.Firmware}, Outcome: ports.CheckReused}, nil
	}
	return ports.CheckResult{Outcome: ports.CheckNoUpdate}, nil
}

// activeTask pairs the device's active task (nil if none) with its
// firmware and rollout, preferring the offers at hand (where an active
// rollout of released firmware is) to the repositories (cached in
// production).
func (s *Checks) activeTask(ctx context.Context, t *domain.Task, offers []domain.Offer) (*domain.ActiveTask, error) {
	if t == nil {
		return nil, nil
	}
	a := &domain.ActiveTask{Task: *t}
	var fwOK, roOK bool
	for _, o := range offers {
		if !fwOK && o.Firmware.ID() == t.FirmwareID() {
			a.Firmware, fwOK = o.Firmware, true
		}
		if !roOK && o.Rollout.ID() == t.RolloutID() {
			a.Rollout, roOK = o.Rollout, true
		}
	}
	var err error
	if !fwOK {
		if a.Firmware, err = firmwareOf(ctx, s.firmwares, nil, t.FirmwareID()); err != nil {
			return nil, fmt.Errorf("loading task firmware: %w", err)
		}
	}
	if !roOK {
		if a.Rollout, err = s.rollouts.Get(ctx, t.RolloutID()); err != nil {
			return nil, fmt.Errorf("loading task rollout: %w", err)
		}
	}
	return a, nil
}
