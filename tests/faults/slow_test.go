package faults

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/tests/testenv"
)

// goroutineSlack is how far above its baseline an instance's go_goroutines
// may settle after a fault: connections re-dialled to a dependency may
// leave a few more (or fewer) long-lived reader goroutines than before.
const goroutineSlack = 8

// goroutines reads the instance's go_goroutines gauge.
func goroutines(t *testing.T, o *testenv.Otad) int {
	t.Helper()
	v, err := o.Metric("go_goroutines")
	if err != nil {
		t.Fatalf("reading go_goroutines of otad %s: %v", o.Name, err)
	}
	return int(v)
}

// settleGoroutines waits up to d for the instance's goroutines to be back
// at their baseline, and returns the last reading, how long that took, and
// whether it is within goroutineSlack of the baseline.
func settleGoroutines(t *testing.T, o *testenv.Otad, baseline int, d time.Duration) (int, time.Duration, bool) {
	t.Helper()
	start := time.Now()
	var (
		n  int
		at time.Time
	)
	waitFor(d, func() bool {
		n, at = goroutines(t, o), time.Now()
		return n <= baseline
	})
	return n, at.Sub(start), n <= baseline+goroutineSlack
}

// sampler reads go_goroutines every 100ms and keeps the highest reading.
type sampler struct {
	stop chan struct{}
	done chan struct{}
	peak int
}

func samplePeak(o *testenv.Otad) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			if v, err := o.Metric("go_goroutines"); err == nil {
				s.peak = max(s.peak, int(v))
			}
			select {
			case <-s.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *sampler) halt() int {
	close(s.stop)
	<-s.done
	return s.peak
}

// TestSlowRedis slows the instance's Redis down through the proxy.
//
//   - 30ms one-way (60ms a round trip): still within OTA_LOCK_WAIT (300ms),
//     creations answer 200, slower;
//   - 1s one-way: slower than the wait; a check that needs the lock answers
//     SERVICE_BUSY within OTA_LOCK_WAIT plus slack (the deadline holds: no
//     waiting for Redis's answer), one that reuses its task answers 200;
//     /readyz reports Redis down;
//   - back to normal: creations answer 200 again, and the process's
//     goroutines return to their baseline within a few seconds: nothing
//     stays parked on the answers that arrived late.
func TestSlowRedis(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const (
		lockWait = 300 * time.Millisecond
		slack    = time.Second // -race on the test side, two cores, parallel tests
		slow     = time.Second
	)
	proxy := testenv.StartProxy(t, hostOf(t, w.redisURL))
	inst := w.start(otadOpts{redisURL: viaProxy(t, w.redisURL, proxy), env: map[string]string{"OTA_LOCK_WAIT": lockWait.String()}}, "S")[0]
	c := w.client(inst, 15*time.Second)
	model := uniq("cam")
	w.publish(c, model, "5.0.0")
	holders := w.register(c, model, "4.0.0", 4)
	warm := w.register(c, model, "4.0.0", 4)
	mild := w.register(c, model, "4.0.0", 4)
	fresh := w.register(c, model, "4.0.0", 6)
	held := map[string]string{}
	for _, d := range holders {
		held[d.id] = w.mustTask(c, d)
	}
	for _, d := range warm {
		w.mustTask(c, d)
	}
	c.readyz()
	c.hc.CloseIdleConnections()
	time.Sleep(500 * time.Millisecond)
	baseline := goroutines(t, inst)
	peak := samplePeak(inst)

	// Mildly slow: within the wait.
	proxy.SetLatency(30 * time.Millisecond)
	var mildWorst time.Duration
	for _, d := range mild {
		r := c.check(d)
		if taskOf(r) == "" {
			t.Errorf("check with Redis 30ms away: want 200 with a task, got %s", r)
		}
		mildWorst = max(mildWorst, r.elapsed)
	}

	// Slower than the wait.
	proxy.SetLatency(slow)
	slowAt := time.Now()
	ready := watchReadiness(c, 200*time.Millisecond)
	load := startPolling(c, fresh, 50*time.Millisecond)
	reuse := startPolling(c, holders, 50*time.Millisecond)
	time.Sleep(3 * time.Second)
	fastAt := time.Now()
	proxy.SetLatency(0)
	recovered := waitFor(5*time.Second, func() bool {
		for _, d := range fresh {
			if phaseOf(load.of(d.id), fastAt, time.Now().Add(time.Hour)).ok == 0 {
				return false
			}
		}
		return true
	})
	load.halt()
	reuse.halt()
	readiness := ready.halt()
	if !recovered {
		t.Errorf("creations not served again within 5s of Redis being fast again")
	}

	slowFresh := phaseOf(load.results(), slowAt, fastAt)
	slowReuse := phaseOf(reuse.results(), slowAt, fastAt)
	if slowFresh.n == 0 || slowFresh.busy != slowFresh.n {
		t.Errorf("creations with Redis %v away: %v; want every one SERVICE_BUSY", slow, slowFresh)
	}
	if slowFresh.maxBusy > lockWait+slack {
		t.Errorf("SERVICE_BUSY with Redis %v away took up to %v, want within OTA_LOCK_WAIT (%v) + %v", slow, slowFresh.maxBusy, lockWait, slack)
	}
	if slowReuse.n == 0 || slowReuse.ok != slowReuse.n {
		t.Errorf("checks of devices with their task, Redis slow: %v; want all 200 (no lock needed)", slowReuse)
	}
	down, _ := readinessAround(readiness, "redis", slowAt, fastAt)
	if down == nil {
		t.Errorf("/readyz never reported the slow Redis")
	}
	var recovery time.Duration
	for _, d := range fresh {
		if p := phaseOf(load.of(d.id), fastAt, time.Now().Add(time.Hour)); !p.firstOK.IsZero() {
			recovery = max(recovery, p.firstOK.Sub(fastAt))
		}
	}

	c.hc.CloseIdleConnections()
	top := peak.halt()
	final, took, ok := settleGoroutines(t, inst, baseline, 3*time.Second)
	settledAt := time.Now()
	if !ok {
		t.Errorf("go_goroutines %d, 3s after Redis was fast again; baseline %d (+%d allowed)", final, baseline, goroutineSlack)
	}

	w.assertOneTaskEach(holders, func(d device) []string { return append(handedOut(reuse.of(d.id)), held[d.id]) })
	w.assertOneTaskEach(fresh, func(d device) []string { return handedOut(load.of(d.id)) })
	w.assertIntact()
	w.tally.assertNoServerErrors(t)
	assertNoServerErrorsRecorded(t, inst)

	t.Logf("FIGURES slow-redis: OTA_LOCK_WAIT %v; Redis +30ms one-way: creations 200, slowest %s; Redis +%v one-way for 3s: "+
		"needs-lock %v; has-task %v; /readyz down seen=%v; normal again: creations served within %s; "+
		"go_goroutines baseline %d, peak %d, back to %d %s after the load stopped (%s after the dependency was fast again); tally: %s",
		lockWait, ms(mildWorst), slow, slowFresh, slowReuse, down != nil, ms(recovery), baseline, top, final, ms(took), ms(settledAt.Sub(fastAt)), w.tally.summary())
}

// TestSlowPostgres slows the instance's Postgres down through the proxy
// (100ms one-way, 200ms a round trip) while devices poll, some of them
// with clients that give up after 300ms, as impatient devices do.
//
// otad sets no deadline of its own on database calls: a request lasts as
// long as its database round trips, and ends when its caller hangs up
// (the request's context is cancelled, and with it the statement). What
// must hold: patient checks answer 200; abandoned requests end on the
// server too (no 500 recorded for them: they are 499s), and leave nothing
// half-done: each device ends with one task; once Postgres is fast again,
// the process's goroutines return to their baseline within a few seconds.
func TestSlowPostgres(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const slow = 100 * time.Millisecond
	proxy := testenv.StartProxy(t, hostOf(t, w.dbURL))
	inst := w.start(otadOpts{dbURL: viaProxy(t, w.dbURL, proxy)}, "Q")[0]
	patient := w.client(inst, 15*time.Second)
	impatient := w.client(inst, 300*time.Millisecond)
	model := uniq("cam")
	w.publish(patient, model, "7.0.0")
	holders := w.register(patient, model, "6.0.0", 4)
	fresh := w.register(patient, model, "6.0.0", 4)
	quitters := w.register(patient, model, "6.0.0", 6)
	held := map[string]string{}
	for _, d := range holders {
		held[d.id] = w.mustTask(patient, d)
	}
	patient.readyz()
	patient.hc.CloseIdleConnections()
	time.Sleep(500 * time.Millisecond)
	baseline := goroutines(t, inst)
	peak := samplePeak(inst)

	proxy.SetLatency(slow)
	slowAt := time.Now()
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		freshRs = map[string]result{}
	)
	for _, d := range fresh {
		wg.Go(func() {
			r := patient.check(d)
			mu.Lock()
			freshRs[d.id] = r
			mu.Unlock()
		})
	}
	reuse := startPolling(patient, holders, 50*time.Millisecond)
	gaveUp := startPolling(impatient, quitters, 50*time.Millisecond)
	time.Sleep(3 * time.Second)
	wg.Wait()
	gaveUp.halt()
	reuse.halt()
	fastAt := time.Now()
	proxy.SetLatency(0)

	var freshWorst time.Duration
	for _, r := range freshRs {
		if taskOf(r) == "" {
			t.Errorf("creation with Postgres %v away: want 200 with a task, got %s", slow, r)
		}
		freshWorst = max(freshWorst, r.elapsed)
	}
	slowReuse := phaseOf(reuse.results(), slowAt, fastAt)
	if slowReuse.n == 0 || slowReuse.ok != slowReuse.n {
		t.Errorf("checks with Postgres %v away: %v; want all 200", slow, slowReuse)
	}
	abandoned, answered := 0, 0
	for _, r := range gaveUp.results() {
		if r.err != nil {
			abandoned++
		} else {
			answered++
		}
	}
	patient.hc.CloseIdleConnections()
	impatient.hc.CloseIdleConnections()
	top := peak.halt()
	final, took, ok := settleGoroutines(t, inst, baseline, 3*time.Second)
	settledAt := time.Now()

	// Every request of an impatient client was recorded by otad once, when
	// it ended: as 499 when its caller had gone, or as the 200 it finished
	// with as its caller left; never as a 5xx.
	if abandoned == 0 {
		t.Fatalf("no impatient client gave up (%d answered in 300ms): the scenario did not play", answered)
	}
	var recorded, closedLines, okLines int
	// The wait ends as soon as every line is there; its bound only has to
	// outlast a loaded machine's log writes (3 s was seen to miss 3 lines).
	waitFor(15*time.Second, func() bool {
		recorded, closedLines, okLines = accessLinesOf(inst.Log(), quitters)
		return recorded >= abandoned+answered
	})
	if recorded != abandoned+answered || closedLines+okLines != recorded {
		t.Errorf("impatient clients sent %d checks (%d abandoned); otad recorded %d: %d as 499, %d as 200, %d otherwise",
			abandoned+answered, abandoned, recorded, closedLines, okLines, recorded-closedLines-okLines)
	}
	if finishedAnyway := okLines - answered; closedLines != abandoned-finishedAnyway || closedLines == 0 {
		t.Errorf("%d abandoned checks: %d recorded as 499, %d finished as their caller left; want every other one a 499",
			abandoned, closedLines, finishedAnyway)
	}
	// The quitters, now patient, each find one task.
	for _, d := range quitters {
		w.mustTask(patient, d)
	}
	if !ok {
		t.Errorf("go_goroutines %d, 3s after Postgres was fast again; baseline %d (+%d allowed)", final, baseline, goroutineSlack)
	}
	closed, err := inst.Metric("ota_http_request_duration_seconds_count", `code="499"`)
	if err != nil {
		t.Fatal(err)
	}
	if int(closed) != closedLines {
		t.Errorf("otad's metrics count %v requests as 499, its access log %d", closed, closedLines)
	}

	w.assertOneTaskEach(holders, func(d device) []string { return append(handedOut(reuse.of(d.id)), held[d.id]) })
	w.assertOneTaskEach(fresh, func(d device) []string { return handedOut([]result{freshRs[d.id]}) })
	w.assertOneTaskEach(quitters, func(d device) []string { return handedOut(gaveUp.of(d.id)) })
	w.assertIntact()
	w.tally.assertNoServerErrors(t)
	assertNoServerErrorsRecorded(t, inst)

	t.Logf("FIGURES slow-postgres: +%v one-way for 3s: creations 200, slowest %s; reuse checks %v; "+
		"impatient clients (300ms): %d gave up, %d answered in time; otad recorded %v of them as 499; "+
		"go_goroutines baseline %d, peak %d, back to %d %s after the load stopped (%s after the dependency was fast again); tally: %s",
		slow, ms(freshWorst), slowReuse, abandoned, answered, closed, baseline, top, final, ms(took), ms(settledAt.Sub(fastAt)), w.tally.summary())
}

// accessLinesOf counts otad's access log lines for checks of devs: all of
// them, those with status 499, and those with status 200.
func accessLinesOf(log string, devs []device) (all, closed, ok int) {
	ids := map[string]bool{}
	for _, d := range devs {
		ids[d.id] = true
	}
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Msg      string `json:"msg"`
			Route    string `json:"route"`
			Status   int    `json:"status"`
			DeviceID string `json:"device_id"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "http request" || !ids[l.DeviceID] || !strings.HasSuffix(l.Route, "/ota/check") {
			continue
		}
		all++
		switch l.Status {
		case 499:
			closed++
		case 200:
			ok++
		}
	}
	return all, closed, ok
}
