package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// ended is before with a final event applied, and the statement's whole
// write of it: counts, the announcement and, for a success, the version.
func (e *env) ended(t *testing.T, before domain.Task, o domain.Offer, id, status string) ports.GuardedTaskWrite {
	t.Helper()
	ev, err := domain.NewEvent(id, status, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	after := before
	if changed, err := after.ApplyEvent(ev, nil, e.now.Add(time.Minute)); err != nil || !changed {
		t.Fatalf("apply %s: changed %v, %v", status, changed, err)
	}
	d := domain.Recount(&before, after)
	w := ports.GuardedTaskWrite{Before: before, After: after, Event: ev, Counts: []domain.CountChange{{Rollout: before.RolloutID(), Delta: d}}}
	a, ok, err := domain.TaskAnnouncement(before, after)
	if err != nil || !ok {
		t.Fatalf("announcement of %s: %v, %v", status, ok, err)
	}
	w.Announce = &a
	if after.Installs(before) {
		v := o.Firmware.Version()
		w.Installed = &v
	}
	return w
}

// TestGuardedWriteAnnounces: a task's end stored by the one statement
// (UpdateIfUnchanged) is announced in it as the event's transaction
// announces it (announceSQL): one outbox row, one pending delivery to each
// enabled subscription that wants its type; a refused statement announces
// nothing.
func TestGuardedWriteAnnounces(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	subscribe := func(enabled bool, types ...string) string {
		id := uuid.NewString()
		if _, err := e.db.ExecContext(ctx, `INSERT INTO webhook_subscriptions (id, url, event_types, secret, enabled, created_at, updated_at)
			VALUES ($1, 'https://hooks.example/x', $2, 's', $3, now(), now())`, id, pq.Array(append([]string{}, types...)), enabled); err != nil {
			t.Fatal(err)
		}
		return id
	}
	wantsSuccess, wantsAll := subscribe(true, "task.succeeded"), subscribe(true)
	subscribe(true, "task.failed")
	subscribe(false)

	o := e.offer(t, "guarded", "2.0.0")
	announced := func(taskID domain.UUID) (types []string, subscribers []string) {
		t.Helper()
		if err := e.db.SelectContext(ctx, &types, `SELECT type FROM outbox_events WHERE payload->>'task_id' = $1`, taskID.String()); err != nil {
			t.Fatal(err)
		}
		if err := e.db.SelectContext(ctx, &subscribers, `SELECT d.subscription_id::text FROM webhook_deliveries d
			JOIN outbox_events ev ON ev.id = d.event_id WHERE ev.payload->>'task_id' = $1 AND d.status = 'pending'
			ORDER BY 1`, taskID.String()); err != nil {
			t.Fatal(err)
		}
		return types, subscribers
	}

	before := e.createTask(t, e.device(t, "guarded-"+uuid.NewString()[:8], "guarded").ID().String(), o)
	if _, updated, err := e.tasks.UpdateIfUnchanged(ctx, e.ended(t, before, o, "end", "succeeded")); err != nil || !updated {
		t.Fatalf("update if unchanged: updated %v, %v", updated, err)
	}
	types, subscribers := announced(before.ID())
	if len(types) != 1 || types[0] != string(domain.EventTaskSucceeded) {
		t.Errorf("announced %v, want one %s", types, domain.EventTaskSucceeded)
	}
	want := []string{wantsSuccess, wantsAll}
	if want[0] > want[1] {
		want[0], want[1] = want[1], want[0]
	}
	if len(subscribers) != 2 || subscribers[0] != want[0] || subscribers[1] != want[1] {
		t.Errorf("pending deliveries to %v, want to %v (enabled, wanting the type)", subscribers, want)
	}

	// Refused: the task changed since it was read.
	stale := e.createTask(t, e.device(t, "guarded-"+uuid.NewString()[:8], "guarded").ID().String(), o)
	first := e.ended(t, stale, o, "first", "failed")
	if _, updated, err := e.tasks.UpdateIfUnchanged(ctx, first); err != nil || !updated {
		t.Fatalf("first end: updated %v, %v", updated, err)
	}
	if _, updated, err := e.tasks.UpdateIfUnchanged(ctx, e.ended(t, stale, o, "second", "succeeded")); err != nil || updated {
		t.Fatalf("a success over a changed task: updated %v, %v; want refused", updated, err)
	}
	if types, _ := announced(stale.ID()); len(types) != 1 || types[0] != string(domain.EventTaskFailed) {
		t.Errorf("announced %v after a refused success, want only the failure", types)
	}
}

// TestGuardedWriteTakesTheDeviceBeforeTheCounters: the one statement
// takes the device's row before any counter row, as the event's
// transaction does (SetDeviceVersion, then AddCounts): waiting for a
// device's row (a report written behind, another change), it holds no
// counter row another device's change could be waiting for.
func TestGuardedWriteTakesTheDeviceBeforeTheCounters(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := e.offer(t, "order", "2.0.0")
	d := e.device(t, "order-"+uuid.NewString()[:8], "order")
	before := e.createTask(t, d.ID().String(), o) // its pending counter row exists

	holder, err := e.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.ExecContext(ctx, `SELECT 1 FROM devices WHERE device_id = $1 FOR UPDATE`, d.ID().String()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, updated, err := e.tasks.UpdateIfUnchanged(ctx, e.ended(t, before, o, "end", "succeeded"))
		if err == nil && !updated {
			err = errors.New("not stored")
		}
		done <- err
	}()
	waitForLockWait(t, e, ctx)

	// While it waits for the device, every counter row of the rollout is free.
	probe, err := e.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = probe.Rollback() }()
	var n int
	if err := probe.GetContext(ctx, &n, `SELECT count(*) FROM (SELECT 1 FROM rollout_counters WHERE rollout_id = $1 FOR UPDATE NOWAIT) c`,
		o.Rollout.ID().String()); err != nil {
		t.Fatalf("a counter row is held while the statement waits for the device's row: %v", err)
	}
	if n == 0 {
		t.Fatal("no counter row to probe: the task's creation counted nothing")
	}
	if err := probe.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the statement, once the device's row is free: %v", err)
	}
	var version string
	if err := e.db.GetContext(ctx, &version, `SELECT current_version FROM devices WHERE device_id = $1`, d.ID().String()); err != nil || version != "2.0.0" {
		t.Fatalf("the device runs %q (%v), want 2.0.0", version, err)
	}
}
