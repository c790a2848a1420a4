package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/ai-device/ota/tests/testenv"
)

// TestPostgresRestart takes Postgres away from an instance for three
// seconds under load (checks and progress events), the way a restart does,
// and gives it back, without touching otad.
//
// The shared server is never restarted: otad reaches it through a TCP
// proxy, and the outage is played in two steps, as a fast shutdown and
// restart look to clients:
//  1. every session of otad is terminated with pg_terminate_backend, so
//     whatever it was running fails with 57P01 (admin_shutdown), the
//     message a shutting-down server sends;
//  2. the proxy is cut: connections still open are reset, and new ones
//     are refused until it is restored.
//
// What must hold:
//   - during the outage every request that needs the database answers
//     SERVICE_BUSY (503, Retry-After) promptly, never 500;
//   - /readyz reports Postgres unavailable (Redis ok) during the outage and
//     200 after;
//   - afterwards the process serves again by itself;
//   - nothing is lost or duplicated: every device has exactly one active
//     task, the one it was handed; every progress event that was
//     acknowledged is stored exactly once (events refused during the outage
//     are retried with the same event id until acknowledged) and the task's
//     progress is the last one's; the database is intact.
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	proxy := testenv.StartProxy(t, hostOf(t, w.dbURL))
	const (
		outage = 3 * time.Second
		slack  = time.Second
	)
	inst := w.start(otadOpts{dbURL: viaProxy(t, w.dbURL, proxy)}, "P")[0]
	c := w.client(inst, 15*time.Second)

	model := uniq("cam")
	w.publish(c, model, "2.0.0")
	holders := w.register(c, model, "1.0.0", 5)   // poll their task
	reporters := w.register(c, model, "1.0.0", 4) // report progress on theirs
	fresh := w.register(c, model, "1.0.0", 5)     // ask first during the outage
	quiet := w.register(c, model, "1.0.0", 2)     // check once, just before the outage
	held := map[string]string{}
	for _, d := range append(slices.Clone(holders), reporters...) {
		held[d.id] = w.mustTask(c, d)
	}

	ready := watchReadiness(c, 100*time.Millisecond)
	load := startPolling(c, holders, 50*time.Millisecond)
	events := startReporting(c, reporters, held, 50*time.Millisecond)
	time.Sleep(time.Second)

	// The quiet devices report a new version in their last check before the
	// outage; the check answers 200 and its record is written behind. The
	// outage starts while that record is still on its way: a check whose
	// record is already in the database is repeated with the next version.
	var (
		quietAt      time.Time
		quietVersion string
		quietTasks   = map[string]string{}
		quietIDs     = pq.Array([]string{quiet[0].id, quiet[1].id})
	)
	for k := 1; ; k++ {
		quietAt, quietVersion = time.Now(), fmt.Sprintf("1.0.%d", k)
		for _, d := range quiet {
			d.version = quietVersion
			quietTasks[d.id] = w.mustTask(c, d)
		}
		var stored int
		if err := w.db.Get(&stored, `SELECT count(*) FROM devices WHERE device_id = ANY($1) AND current_version = $2`,
			quietIDs, quietVersion); err != nil {
			t.Fatal(err)
		}
		if stored == 0 {
			break
		}
		if k == 20 {
			t.Fatal("every quiet check was stored at once: the write-behind does not write behind?")
		}
	}
	cutAt := time.Now()
	terminated := w.terminateOtadSessions()
	proxy.Cut()
	downAt := time.Now()
	freshLoad := startPolling(c, fresh, 50*time.Millisecond)
	time.Sleep(outage)
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	upAt := time.Now()

	recovered := waitFor(5*time.Second, func() bool {
		for _, d := range fresh {
			if phaseOf(freshLoad.of(d.id), upAt, time.Now().Add(time.Hour)).ok == 0 {
				return false
			}
		}
		return events.ackedSince(upAt) >= len(reporters)
	})
	time.Sleep(300 * time.Millisecond)
	load.halt()
	freshLoad.halt()
	acked := events.halt()
	readiness := ready.halt()
	if !recovered {
		t.Errorf("not every device served again within 5s of Postgres coming back")
	}

	// During the outage: everything that needs the database is refused as
	// busy, promptly.
	var out, transition phase
	for _, rs := range [][]result{load.results(), freshLoad.results(), events.results()} {
		out = addPhase(out, phaseOf(rs, downAt, upAt))
		transition = addPhase(transition, addPhase(inFlightAt(rs, cutAt), inFlightAt(rs, upAt)))
	}
	if out.n == 0 || out.busy != out.n {
		t.Errorf("requests during the outage: %v; want every one SERVICE_BUSY", out)
	}
	if out.maxBusy > slack {
		t.Errorf("slowest SERVICE_BUSY during the outage took %v, want under %v", out.maxBusy, slack)
	}

	// Recovery.
	var worst time.Duration
	for _, rs := range [][]result{load.results(), freshLoad.results(), events.results()} {
		if p := phaseOf(rs, upAt, time.Now().Add(time.Hour)); !p.firstOK.IsZero() {
			worst = max(worst, p.firstOK.Sub(upAt))
		}
	}
	var firstFresh time.Duration
	for _, d := range fresh {
		if p := phaseOf(freshLoad.of(d.id), upAt, time.Now().Add(time.Hour)); !p.firstOK.IsZero() {
			firstFresh = max(firstFresh, p.firstOK.Sub(upAt))
		}
	}
	down, up := readinessAround(readiness, "postgres", downAt, upAt)
	readyAfter := time.Duration(-1)
	switch {
	case down == nil:
		t.Errorf("/readyz never reported Postgres unavailable during the outage")
	case readinessOf(*down).Checks["redis"] != "ok":
		t.Errorf("/readyz during the Postgres outage: %s; want redis ok", down.body)
	}
	if up == nil {
		t.Errorf("/readyz never answered 200 after Postgres came back")
	} else {
		readyAfter = up.start.Add(up.elapsed).Sub(upAt)
	}

	// Nothing lost, nothing duplicated.
	w.assertOneTaskEach(holders, func(d device) []string { return append(handedOut(load.of(d.id)), held[d.id]) })
	w.assertOneTaskEach(reporters, func(d device) []string { return []string{held[d.id]} })
	w.assertOneTaskEach(fresh, func(d device) []string { return handedOut(freshLoad.of(d.id)) })
	stored := w.eventsOf(reporters, held)
	total := 0
	for _, d := range reporters {
		a, s := acked[d.id], stored[d.id]
		total += len(a.ids)
		// Every acknowledged event is stored; the one in flight when the
		// load stopped may be stored or not.
		want := a.ids
		if !slices.Equal(s.ids, want) && !(a.pending != "" && slices.Equal(s.ids, append(slices.Clone(want), a.pending))) {
			t.Errorf("device %s: events stored %v, acknowledged %v (in flight at the end: %q)", d.id, s.ids, want, a.pending)
		}
		if s.progress != len(s.ids) {
			t.Errorf("device %s: task progress %d after %d events, want %d", d.id, s.progress, len(s.ids), len(s.ids))
		}
	}
	w.assertOneTaskEach(quiet, func(d device) []string { return []string{quietTasks[d.id]} })
	// What a check answered 200 for is kept, outage or not: the quiet
	// devices' last report reaches the database once it is back (docs/DOMAIN.md
	// check rule 1: each check records current_version and last_seen_at).
	seenLate := "never stored (dropped)"
	if !waitFor(3*time.Second, func() bool {
		var n int
		err := w.db.Get(&n, `SELECT count(*) FROM devices WHERE device_id = ANY($1)
			AND current_version = $2 AND last_seen_at >= $3`, quietIDs, quietVersion, quietAt.Add(-time.Second))
		return err == nil && n == len(quiet)
	}) {
		t.Errorf("checks answered 200 just before the outage were never recorded (current_version %s, last_seen_at): "+
			"the write-behind dropped them (ota_device_seen_dropped_total %v)", quietVersion, must(inst.Metric("ota_device_seen_dropped_total")))
	} else {
		seenLate = "stored, seen " + ms(time.Since(upAt)) + " after restore"
	}
	w.assertIntact()
	w.tally.assertNoServerErrors(t)
	assertNoServerErrorsRecorded(t, inst)
	if inst.Exited() || strings.Count(inst.Log(), `"msg":"serving"`) != 1 {
		t.Errorf("otad should have served throughout in one process, without a restart")
	}
	dropped, err := inst.Metric("ota_device_seen_dropped_total")
	if err != nil {
		t.Fatal(err)
	}
	failedFlushes, err := inst.Metric("ota_device_seen_flush_failures_total")
	if err != nil {
		t.Fatal(err)
	}

	t.Logf("FIGURES postgres-restart: %d otad sessions terminated (57P01), proxy cut; outage %s; "+
		"in flight at the cut or the restore: %v; during the outage: %v; served again %s after restore (fresh devices: %s); "+
		"/readyz: down seen=%v, ok %s after restore; %d events acknowledged and stored once each; "+
		"write-behind of last_seen: %v failed flushes, %v reports dropped, the quiet devices' last reports %s; tally: %s",
		terminated, ms(upAt.Sub(downAt)), transition, out, ms(worst), ms(firstFresh), down != nil, ms(readyAfter), total,
		failedFlushes, dropped, seenLate, w.tally.summary())
}

// terminateOtadSessions ends every session otad has on the test's database
// (it connects as application_name otadAppName), as a server shutting down
// does, and returns how many there were.
func (w *world) terminateOtadSessions() int {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := w.db.GetContext(ctx, &n, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1`, otadAppName); err != nil {
		w.t.Fatal(err)
	}
	return n
}

// reporter sends progress events for devices in a loop: event ev-1 with
// progress 1, then ev-2 with progress 2, and so on, each retried with the
// same id after a SERVICE_BUSY until acknowledged, as a device does.
type reporter struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	res  []result
	acks map[string]*acks
}

// acks is what one device was told.
type acks struct {
	ids     []string  // acknowledged event ids, in order
	at      time.Time // when the last was acknowledged
	pending string    // the event in flight, or refused, when stopped
}

func startReporting(c *client, devs []device, tasks map[string]string, pause time.Duration) *reporter {
	rp := &reporter{stop: make(chan struct{}), acks: map[string]*acks{}}
	for _, d := range devs {
		a := &acks{}
		rp.acks[d.id] = a
		rp.wg.Go(func() {
			for i := 1; i < 100; {
				select {
				case <-rp.stop:
					return
				default:
				}
				id := fmt.Sprintf("ev-%d", i)
				rp.mu.Lock()
				a.pending = id
				rp.mu.Unlock()
				r := c.event(d, tasks[d.id], id, "downloading", i)
				rp.mu.Lock()
				rp.res = append(rp.res, r)
				if r.status == http.StatusOK {
					var tk struct {
						Progress int `json:"progress"`
					}
					if json.Unmarshal(r.body, &tk) == nil && tk.Progress == i {
						a.ids, a.at, a.pending = append(a.ids, id), time.Now(), ""
						i++
					}
				}
				rp.mu.Unlock()
				select {
				case <-rp.stop:
					return
				case <-time.After(pause):
				}
			}
		})
	}
	return rp
}

// ackedSince counts the devices with an event acknowledged after at.
func (rp *reporter) ackedSince(at time.Time) int {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	n := 0
	for _, a := range rp.acks {
		if a.at.After(at) {
			n++
		}
	}
	return n
}

func (rp *reporter) results() []result {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return slices.Clone(rp.res)
}

// halt stops reporting and returns what each device was told.
func (rp *reporter) halt() map[string]acks {
	close(rp.stop)
	rp.wg.Wait()
	out := map[string]acks{}
	for id, a := range rp.acks {
		out[id] = *a
	}
	return out
}

// storedEvents is what the database holds for a device's task.
type storedEvents struct {
	ids      []string // event ids, ordered by their number
	progress int
}

func (w *world) eventsOf(devs []device, tasks map[string]string) map[string]storedEvents {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string]storedEvents{}
	for _, d := range devs {
		var s storedEvents
		if err := w.db.SelectContext(ctx, &s.ids, `SELECT event_id FROM task_events WHERE task_id = $1
			ORDER BY substr(event_id, 4)::int`, tasks[d.id]); err != nil {
			w.t.Fatal(err)
		}
		if err := w.db.GetContext(ctx, &s.progress, `SELECT progress FROM tasks WHERE id = $1`, tasks[d.id]); err != nil {
			w.t.Fatal(err)
		}
		out[d.id] = s
	}
	return out
}

// must is the value of a call that returns one, or NaN-like -1 on error,
// for figures in messages.
func must(v float64, err error) float64 {
	if err != nil {
		return -1
	}
	return v
}
