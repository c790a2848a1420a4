package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/domain"
)

// TestAChangeAnnouncedWhileAWebhookIsDeletedStillCommits: an operator
// deletes a webhook subscription while another publishes firmware. The
// publish's announcement (announceSQL) fans its event out to every
// enabled subscription its snapshot sees — the one being deleted among
// them — and the delivery's foreign key then waits for the delete and
// fails when it commits. The publish has nothing to do with the deleted
// subscription: it should commit, its event delivered to whoever is still
// subscribed (docs/DOMAIN.md W2), not fail with a foreign-key violation
// that the edge answers as 500 INTERNAL.
func TestAChangeAnnouncedWhileAWebhookIsDeletedStillCommits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hooks, actor, sub := subscribedHooks(t, e)

	// The publish to run while the delete is in its transaction.
	fw, err := domain.NewFirmware(domain.UUIDOf(uuid.New()), domain.FirmwareSpec{
		Model: "cam", Version: "2.0.0", URL: "https://fw.example/cam/2.0.0.bin", SizeBytes: 1 << 20, SHA256: strings.Repeat("ab", 32),
	}, e.now)
	if err != nil {
		t.Fatal(err)
	}
	pubRec, err := actor.Record(e.now, domain.AuditFirmwarePublish, fw.ID().String(), nil, map[string]any{"version": "2.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	ann, err := domain.NewAnnouncement(domain.EventFirmwarePublished, e.now, map[string]any{"firmware_id": fw.ID().String()})
	if err != nil {
		t.Fatal(err)
	}
	pubRec = pubRec.Announcing(ann)

	published := make(chan error, 1)
	waiting := func() int {
		return e.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	}
	err = hooks.DeleteWebhook(ctx, sub.ID(), func(before, after domain.WebhookSubscription) (domain.AuditRecord, error) {
		// The subscription's row is deleted, not yet committed: publish now,
		// and let the delete commit once the publish waits on it.
		go func() { published <- e.firmwares.Create(ctx, fw, pubRec) }()
		deadline := time.Now().Add(5 * time.Second)
		for waiting() == 0 {
			if time.Now().After(deadline) {
				t.Error("the publish never waited for the delete")
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		return actor.Record(e.now, domain.AuditWebhookDelete, before.ID().String(), nil, nil)
	})
	if err != nil {
		t.Fatalf("deleting the webhook: %v", err)
	}
	if err := <-published; err != nil {
		t.Fatalf("publishing firmware while a webhook was deleted: %v", err)
	}
	if n := e.count(t, `SELECT count(*) FROM firmwares WHERE id = $1`, fw.ID().String()); n != 1 {
		t.Fatalf("%d firmware rows, want 1", n)
	}
}

// TestADevicesFinalEventWhileAWebhookIsDeletedIsStored: the same race on
// the device's side. A device reports its task succeeded (the one
// statement, UpdateIfUnchanged, which announces task.succeeded to every
// enabled subscription) while an operator deletes a subscription: the
// statement's delivery to the deleted subscription fails its foreign key,
// mapWriteErr reads that as domain.ErrNotFound, and the device is told its
// own task does not exist (404 NOT_FOUND, docs/ERRORS.md: "an unknown ...
// task") instead of its success being stored.
func TestADevicesFinalEventWhileAWebhookIsDeletedIsStored(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hooks, actor, sub := subscribedHooks(t, e)
	o := e.offer(t, "guarded", "2.0.0")
	before := e.createTask(t, e.device(t, "guarded-"+uuid.NewString()[:8], "guarded").ID().String(), o)
	w := e.ended(t, before, o, "end", "succeeded")

	type result struct {
		updated bool
		err     error
	}
	stored := make(chan result, 1)
	waiting := func() int {
		return e.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	}
	err := hooks.DeleteWebhook(ctx, sub.ID(), func(before, after domain.WebhookSubscription) (domain.AuditRecord, error) {
		go func() {
			_, updated, err := e.tasks.UpdateIfUnchanged(ctx, w)
			stored <- result{updated, err}
		}()
		deadline := time.Now().Add(5 * time.Second)
		for waiting() == 0 {
			if time.Now().After(deadline) {
				t.Error("the event never waited for the delete")
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		return actor.Record(e.now, domain.AuditWebhookDelete, before.ID().String(), nil, nil)
	})
	if err != nil {
		t.Fatalf("deleting the webhook: %v", err)
	}
	r := <-stored
	if r.err != nil {
		t.Fatalf("the device's success while a webhook was deleted: %v (not found: %v)", r.err, errors.Is(r.err, domain.ErrNotFound))
	}
	if !r.updated {
		t.Fatal("the device's success was not stored")
	}
}

// subscribedHooks is e's webhook store with one subscription to every
// event type, and the actor that made it.
func subscribedHooks(t *testing.T, e *env) (*postgres.WebhookRepository, domain.Actor, domain.WebhookSubscription) {
	t.Helper()
	hooks := postgres.NewWebhookRepository(e.db)
	actor, err := domain.NewActor(domain.RootPrincipal(), "req-1", "test")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := domain.NewWebhookSubscription(domain.UUIDOf(uuid.New()), "https://hooks.example.com/ota", nil, "", e.now)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := actor.Record(e.now, domain.AuditWebhookCreate, sub.ID().String(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := hooks.InsertWebhook(context.Background(), sub, rec); err != nil {
		t.Fatal(err)
	}
	return hooks, actor, sub
}
