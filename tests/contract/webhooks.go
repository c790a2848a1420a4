package contract

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// WebhookStore is the webhook subscriptions' store and the delivery queue
// over them (one adapter is both).
type WebhookStore interface {
	application.WebhookStore
	application.DeliveryQueue
}

// WebhookStores are the stores the webhook contract runs on: the webhook
// store, and the accounts store of the same database, whose audit writes
// announce events as every change does (domain.AuditRecord.Announcing).
type WebhookStores struct {
	Webhooks WebhookStore
	Accounts application.AccountStore
}

// RunWebhookStores runs the contract of the webhook store and delivery
// queue: subscriptions round-trip and are audited; an announced event is
// fanned out, in its change's transaction, to every enabled subscription
// wanting its type and to no other; a test event goes to one subscription;
// a claim leases due deliveries to one claimer at a time until the lease
// ends; a claim's outcome is stored unless the delivery was claimed again
// since; the log pages newest first.
func RunWebhookStores(t *testing.T, newStores func(t *testing.T) WebhookStores) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 123456000, time.UTC)
	subscribe := func(t *testing.T, s WebhookStore, types ...string) domain.WebhookSubscription {
		t.Helper()
		w, err := domain.NewWebhookSubscription(domain.UUIDOf([16]byte(uuid.New())), "https://hooks.example.com/ota", types, "", at)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := testActor.Record(at, domain.AuditWebhookCreate, w.ID().String(), nil, map[string]any{"url": w.URL()})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.InsertWebhook(t.Context(), w, rec); err != nil {
			t.Fatal(err)
		}
		return w
	}
	announce := func(t *testing.T, st WebhookStores, typ domain.EventType, fail error) {
		t.Helper()
		a, err := domain.NewAnnouncement(typ, at, map[string]any{"task_id": "t"})
		if err != nil {
			t.Fatal(err)
		}
		err = st.Accounts.InAccountTx(t.Context(), func(tx ports.AccountTx) error {
			if err := tx.RecordAudit(t.Context(), domain.AuditRecord{}.Announcing(a)); err != nil {
				return err
			}
			return fail
		})
		if !errors.Is(err, fail) {
			t.Fatalf("announcing %s: %v", typ, err)
		}
	}
	log := func(t *testing.T, s WebhookStore, w domain.WebhookSubscription) []ports.WebhookDelivery {
		t.Helper()
		d, err := s.WebhookDeliveries(t.Context(), w.ID(), 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	types := func(ds []ports.WebhookDelivery) []domain.EventType {
		out := []domain.EventType{}
		for _, d := range ds {
			out = append(out, d.EventType)
		}
		slices.Sort(out)
		return out
	}

	t.Run("Subscriptions", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStores(t).Webhooks, t.Context()
		w := subscribe(t, s, "task.failed", "rollout.paused")
		got, err := s.Webhook(ctx, w.ID())
		if err != nil || got.URL() != w.URL() || got.Secret() != w.Secret() || !slices.Equal(got.EventTypes(), w.EventTypes()) ||
			!got.Enabled() || !got.CreatedAt().Equal(w.CreatedAt()) {
			t.Fatalf("stored %+v, %v; want %+v", got, err, w)
		}
		later := at.Add(time.Hour)
		changed, err := s.UpdateWebhook(ctx, w.ID(), func(x *domain.WebhookSubscription) error {
			x.Failed(later, 0) // failing for longer than allowed: disabled
			return x.RotateSecret("", later)
		}, func(before, after domain.WebhookSubscription) (domain.AuditRecord, error) {
			return testActor.Record(later, domain.AuditWebhookChange, w.ID().String(), nil, nil)
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err = s.Webhook(ctx, w.ID())
		prev, until := got.PreviousSecret()
		if err != nil || got.Enabled() || got.DisabledReason() == "" || got.Secret() != changed.Secret() || prev != w.Secret() ||
			!until.Equal(later.Add(domain.SecretRotationOverlap)) || !got.FailingSince().Equal(later) {
			t.Fatalf("after a change: %+v, %v", got, err)
		}
		refused := errors.New("refused")
		if _, err := s.UpdateWebhook(ctx, w.ID(), func(x *domain.WebhookSubscription) error {
			x.Succeeded(later)
			return refused
		}, nil); !errors.Is(err, refused) {
			t.Fatalf("a refused change: %v", err)
		}
		if got, _ := s.Webhook(ctx, w.ID()); got.FailingSince().IsZero() {
			t.Fatal("a refused change was stored")
		}
		other := subscribe(t, s)
		all, err := s.Webhooks(ctx)
		if err != nil || len(all) != 2 {
			t.Fatalf("listed %d, %v", len(all), err)
		}
		del := func(before, _ domain.WebhookSubscription) (domain.AuditRecord, error) {
			return testActor.Record(later, domain.AuditWebhookDelete, before.ID().String(), nil, nil)
		}
		if err := s.DeleteWebhook(ctx, w.ID(), del); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Webhook(ctx, w.ID()); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("a deleted webhook: %v", err)
		}
		for name, err := range map[string]error{
			"delete again": s.DeleteWebhook(ctx, w.ID(), del),
			"update": func() error {
				_, err := s.UpdateWebhook(ctx, w.ID(), func(*domain.WebhookSubscription) error { return nil }, nil)
				return err
			}(),
			"zero id": func() error { _, err := s.Webhook(ctx, domain.UUID{}); return err }(),
		} {
			if !errors.Is(err, domain.ErrNotFound) {
				t.Errorf("%s: %v, want ErrNotFound", name, err)
			}
		}
		if _, err := s.Webhook(ctx, other.ID()); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("FanOut", func(t *testing.T) {
		t.Parallel()
		st := newStores(t)
		s := st.Webhooks
		everything, failures, off := subscribe(t, s), subscribe(t, s, "task.failed"), subscribe(t, s)
		if _, err := s.UpdateWebhook(t.Context(), off.ID(), func(x *domain.WebhookSubscription) error {
			return x.Change(nil, nil, new(false), at)
		}, nil); err != nil {
			t.Fatal(err)
		}
		announce(t, st, domain.EventTaskSucceeded, nil)
		announce(t, st, domain.EventTaskFailed, nil)
		announce(t, st, domain.EventTaskFailed, errors.New("the change rolled back"))
		late := subscribe(t, s)
		for _, tc := range []struct {
			w    domain.WebhookSubscription
			want []domain.EventType
		}{
			{everything, []domain.EventType{domain.EventTaskFailed, domain.EventTaskSucceeded}},
			{failures, []domain.EventType{domain.EventTaskFailed}},
			{off, []domain.EventType{}},
			{late, []domain.EventType{}},
		} {
			ds := log(t, s, tc.w)
			if got := types(ds); !slices.Equal(got, tc.want) {
				t.Errorf("subscription to %v got %v, want %v", tc.w.EventTypes(), got, tc.want)
			}
			for _, d := range ds {
				if d.Status != ports.DeliveryPending || d.Attempts != 0 || !d.NextAttemptAt.Equal(at) || d.EventID.IsZero() {
					t.Errorf("a new delivery: %+v", d)
				}
			}
		}
	})

	t.Run("TestEvent", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStores(t).Webhooks, t.Context()
		target, bystander := subscribe(t, s), subscribe(t, s)
		a, err := domain.NewAnnouncement(domain.EventTest, at, nil)
		if err != nil {
			t.Fatal(err)
		}
		eventID := domain.UUIDOf([16]byte(uuid.New()))
		rec, _ := testActor.Record(at, domain.AuditWebhookTest, target.ID().String(), nil, nil)
		if err := s.AnnounceTo(ctx, target.ID(), eventID, a, rec); err != nil {
			t.Fatal(err)
		}
		if ds := log(t, s, target); len(ds) != 1 || ds[0].EventID != eventID || ds[0].EventType != domain.EventTest {
			t.Fatalf("the target's log: %+v", ds)
		}
		if ds := log(t, s, bystander); len(ds) != 0 {
			t.Fatalf("another subscription was sent the test event: %+v", ds)
		}
		if err := s.AnnounceTo(ctx, domain.UUIDOf([16]byte(uuid.New())), domain.UUIDOf([16]byte(uuid.New())), a, rec); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("a test event to no subscription: %v", err)
		}
		claimed, err := s.ClaimDeliveries(ctx, at, 10, at.Add(time.Minute))
		if err != nil || len(claimed) != 1 || claimed[0].Envelope.ID != eventID {
			t.Fatalf("claimed %+v, %v: want only the test event (the failed one wrote nothing)", claimed, err)
		}
	})

	t.Run("ClaimAndLease", func(t *testing.T) {
		t.Parallel()
		st := newStores(t)
		s, ctx := st.Webhooks, t.Context()
		w := subscribe(t, s)
		announce(t, st, domain.EventTaskSucceeded, nil)
		if c, err := s.ClaimDeliveries(ctx, at.Add(-time.Second), 10, at.Add(time.Minute)); err != nil || len(c) != 0 {
			t.Fatalf("claimed %d before they were due (%v)", len(c), err)
		}
		lease := at.Add(time.Minute)
		c, err := s.ClaimDeliveries(ctx, at, 10, lease)
		if err != nil || len(c) != 1 {
			t.Fatalf("claimed %+v, %v", c, err)
		}
		first := c[0]
		if first.Attempts != 1 || first.Subscription.ID() != w.ID() || first.Subscription.Secret() != w.Secret() ||
			first.Envelope.Type != domain.EventTaskSucceeded || !first.Envelope.Time.Equal(at) ||
			first.Envelope.Version != domain.EventSchemaVersion || string(first.Envelope.Data) != `{"task_id": "t"}` && string(first.Envelope.Data) != `{"task_id":"t"}` {
			t.Fatalf("claimed %+v", first)
		}
		if c, _ := s.ClaimDeliveries(ctx, lease.Add(-time.Microsecond), 10, lease.Add(time.Hour)); len(c) != 0 {
			t.Fatalf("a leased delivery was claimed again within its lease: %+v", c)
		}
		again, err := s.ClaimDeliveries(ctx, lease, 10, lease.Add(time.Minute))
		if err != nil || len(again) != 1 || again[0].ID != first.ID || again[0].Attempts != 2 {
			t.Fatalf("after the lease: %+v, %v; want the delivery again, its second attempt", again, err)
		}
		// The first claimer comes back late: its outcome is not stored.
		settled := false
		if err := s.FinishDelivery(ctx, ports.DeliveryOutcome{ID: first.ID, Attempts: 1, Status: ports.DeliveryDelivered, At: lease,
			NextAttemptAt: lease}, func(*domain.WebhookSubscription) { settled = true }); err != nil {
			t.Fatal(err)
		}
		if d := log(t, s, w); settled || d[0].Status != ports.DeliveryPending {
			t.Fatalf("a stale claim's outcome was stored: %+v (settled %v)", d, settled)
		}
		retry := lease.Add(time.Hour)
		err = s.FinishDelivery(ctx, ports.DeliveryOutcome{ID: first.ID, Attempts: 2, Status: ports.DeliveryPending, At: lease,
			NextAttemptAt: retry, StatusCode: 503, Error: "answered 503"},
			func(x *domain.WebhookSubscription) { x.Failed(lease, time.Minute) })
		if err != nil {
			t.Fatal(err)
		}
		d := log(t, s, w)[0]
		if d.Status != ports.DeliveryPending || d.Attempts != 2 || !d.NextAttemptAt.Equal(retry) || !d.LastAttemptAt.Equal(lease) ||
			d.LastStatusCode != 503 || d.LastError != "answered 503" {
			t.Fatalf("after a failed attempt: %+v", d)
		}
		if got, _ := s.Webhook(ctx, w.ID()); !got.FailingSince().Equal(lease) || !got.Enabled() {
			t.Fatalf("the subscription after a failure: failing since %v, enabled %v", got.FailingSince(), got.Enabled())
		}
		c, err = s.ClaimDeliveries(ctx, retry, 10, retry.Add(time.Minute))
		if err != nil || len(c) != 1 || c[0].Attempts != 3 || c[0].Subscription.FailingSince().IsZero() {
			t.Fatalf("the retry: %+v, %v", c, err)
		}
		if err := s.FinishDelivery(ctx, ports.DeliveryOutcome{ID: c[0].ID, Attempts: 3, Status: ports.DeliveryDelivered, At: retry,
			NextAttemptAt: retry, StatusCode: 204}, func(x *domain.WebhookSubscription) { x.Succeeded(retry) }); err != nil {
			t.Fatal(err)
		}
		if d := log(t, s, w)[0]; d.Status != ports.DeliveryDelivered || d.LastStatusCode != 204 || d.LastError != "" {
			t.Fatalf("delivered: %+v", d)
		}
		if got, _ := s.Webhook(ctx, w.ID()); !got.FailingSince().IsZero() {
			t.Fatal("a success did not end the failing period")
		}
		if c, _ := s.ClaimDeliveries(ctx, retry.Add(48*time.Hour), 10, retry.Add(49*time.Hour)); len(c) != 0 {
			t.Fatalf("a delivered delivery was claimed: %+v", c)
		}
	})

	t.Run("FinishManyAtOnce", func(t *testing.T) {
		t.Parallel()
		st := newStores(t)
		s, ctx := st.Webhooks, t.Context()
		w := subscribe(t, s)
		for range 3 {
			announce(t, st, domain.EventTaskSucceeded, nil)
		}
		lease := at.Add(time.Minute)
		c, err := s.ClaimDeliveries(ctx, at, 10, lease)
		if err != nil || len(c) != 3 {
			t.Fatalf("claimed %+v, %v", c, err)
		}
		again, err := s.ClaimDeliveries(ctx, lease, 1, lease.Add(time.Minute))
		if err != nil || len(again) != 1 {
			t.Fatalf("claimed again %+v, %v", again, err)
		}
		done := at.Add(time.Second)
		var os []ports.DeliveryOutcome
		for i, d := range c {
			os = append(os, ports.DeliveryOutcome{ID: d.ID, Attempts: d.Attempts, Status: ports.DeliveryDelivered, At: done,
				NextAttemptAt: done, StatusCode: 200 + i})
		}
		if err := s.FinishDeliveries(ctx, os); err != nil {
			t.Fatal(err)
		}
		delivered := 0
		for _, d := range log(t, s, w) {
			switch {
			case d.ID == again[0].ID:
				if d.Status != ports.DeliveryPending || d.Attempts != 2 || d.LastStatusCode != 0 {
					t.Fatalf("the delivery claimed again since took the stale batch's outcome: %+v", d)
				}
			case d.Status == ports.DeliveryDelivered && d.Attempts == 1 && d.LastAttemptAt.Equal(done) && d.LastError == "" &&
				d.LastStatusCode >= 200 && d.LastStatusCode <= 202:
				delivered++
			default:
				t.Fatalf("after the batch: %+v", d)
			}
		}
		if delivered != 2 {
			t.Fatalf("%d of the batch stored; want the 2 not claimed again", delivered)
		}
		if err := s.FinishDeliveries(ctx, nil); err != nil {
			t.Fatalf("an empty batch: %v", err)
		}
	})

	// A batch's delivered outcome ends a failing period begun since its
	// claim (a failure of another delivery, stored by another worker), as
	// WebhookSubscription.Succeeded would; one begun after it stands.
	t.Run("FinishManyEndsAFailingPeriodBegunBeforeIt", func(t *testing.T) {
		t.Parallel()
		st := newStores(t)
		s, ctx := st.Webhooks, t.Context()
		w := subscribe(t, s)
		for range 4 {
			announce(t, st, domain.EventTaskSucceeded, nil)
		}
		c, err := s.ClaimDeliveries(ctx, at, 10, at.Add(time.Hour))
		if err != nil || len(c) != 4 || !c[0].Subscription.FailingSince().IsZero() {
			t.Fatalf("claimed %+v, %v", c, err)
		}
		fail := func(d ports.ClaimedDelivery, when time.Time) {
			t.Helper()
			if err := s.FinishDelivery(ctx, ports.DeliveryOutcome{ID: d.ID, Attempts: d.Attempts, Status: ports.DeliveryPending, At: when,
				NextAttemptAt: when.Add(time.Hour), StatusCode: 503, Error: "answered 503"},
				func(x *domain.WebhookSubscription) { x.Failed(when, 24*time.Hour) }); err != nil {
				t.Fatal(err)
			}
		}
		deliver := func(d ports.ClaimedDelivery, when time.Time) {
			t.Helper()
			if err := s.FinishDeliveries(ctx, []ports.DeliveryOutcome{{ID: d.ID, Attempts: d.Attempts, Status: ports.DeliveryDelivered,
				At: when, NextAttemptAt: when, StatusCode: 204}}); err != nil {
				t.Fatal(err)
			}
		}
		failing := func() time.Time {
			t.Helper()
			got, err := s.Webhook(ctx, w.ID())
			if err != nil {
				t.Fatal(err)
			}
			return got.FailingSince()
		}
		fail(c[0], at.Add(time.Second))
		deliver(c[1], at.Add(2*time.Second))
		if f := failing(); !f.IsZero() {
			t.Fatalf("a delivery after the failure left the failing period begun %v", f)
		}
		failedAt := at.Add(4 * time.Second)
		fail(c[2], failedAt)
		deliver(c[3], at.Add(3*time.Second)) // delivered before that failure, stored after it
		if f := failing(); !f.Equal(failedAt) {
			t.Fatalf("a delivery before the failure ended it: failing since %v, want %v", f, failedAt)
		}
	})

	// A batch's delivered outcome older than a failure stored since
	// leaves the subscription as that failure left it: Postgres's
	// finishManySQL does not touch the row (failing_since <= at fails),
	// so neither may the memory store, nor move updated_at backwards.
	t.Run("FinishManyLeavesAStandingFailuresRowAsItWas", func(t *testing.T) {
		t.Parallel()
		st := newStores(t)
		s, ctx := st.Webhooks, t.Context()
		w := subscribe(t, s)
		for range 2 {
			announce(t, st, domain.EventTaskSucceeded, nil)
		}
		c, err := s.ClaimDeliveries(ctx, at, 10, at.Add(time.Hour))
		if err != nil || len(c) != 2 {
			t.Fatalf("claimed %+v, %v", c, err)
		}
		failedAt := at.Add(4 * time.Second)
		if err := s.FinishDelivery(ctx, ports.DeliveryOutcome{ID: c[0].ID, Attempts: c[0].Attempts, Status: ports.DeliveryPending, At: failedAt,
			NextAttemptAt: failedAt.Add(time.Hour), StatusCode: 503, Error: "answered 503"},
			func(x *domain.WebhookSubscription) { x.Failed(failedAt, 24*time.Hour) }); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishDeliveries(ctx, []ports.DeliveryOutcome{{ID: c[1].ID, Attempts: c[1].Attempts, Status: ports.DeliveryDelivered,
			At: at.Add(3 * time.Second), NextAttemptAt: at.Add(3 * time.Second), StatusCode: 204}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Webhook(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		if !got.FailingSince().Equal(failedAt) || !got.UpdatedAt().Equal(failedAt) {
			t.Fatalf("after a batch delivered before the standing failure: failing since %v, updated %v; want both %v (the failure's row untouched)",
				got.FailingSince(), got.UpdatedAt(), failedAt)
		}
	})

	t.Run("DisabledNotClaimed", func(t *testing.T) {
		t.Parallel()
		st := newStores(t)
		s, ctx := st.Webhooks, t.Context()
		w := subscribe(t, s)
		announce(t, st, domain.EventTaskFailed, nil)
		announce(t, st, domain.EventTaskFailed, nil)
		c, err := s.ClaimDeliveries(ctx, at, 1, at.Add(time.Minute))
		if err != nil || len(c) != 1 {
			t.Fatalf("claimed %+v, %v", c, err)
		}
		if err := s.FinishDelivery(ctx, ports.DeliveryOutcome{ID: c[0].ID, Attempts: 1, Status: ports.DeliveryFailed, At: at,
			NextAttemptAt: at, Error: "refused"}, func(x *domain.WebhookSubscription) { x.Failed(at, 0) }); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Webhook(ctx, w.ID()); got.Enabled() || got.DisabledReason() == "" {
			t.Fatalf("failing past the limit left it enabled: %+v", got)
		}
		if c, _ := s.ClaimDeliveries(ctx, at.Add(time.Hour), 10, at.Add(2*time.Hour)); len(c) != 0 {
			t.Fatalf("a disabled subscription's delivery was claimed: %+v", c)
		}
		ds := log(t, s, w)
		if len(ds) != 2 || ds[0].Status != ports.DeliveryPending || ds[1].Status != ports.DeliveryFailed {
			t.Fatalf("the log, newest first: %+v; want the failed one kept and the other still pending", ds)
		}
	})

	t.Run("OneClaimerAtATime", func(t *testing.T) {
		t.Parallel()
		st := newStores(t)
		s, ctx := st.Webhooks, t.Context()
		subscribe(t, s)
		subscribe(t, s)
		const events = 50
		for range events {
			announce(t, st, domain.EventTaskSucceeded, nil)
		}
		var (
			mu   sync.Mutex
			seen = map[int64]int{}
			wg   sync.WaitGroup
		)
		for range 4 {
			wg.Go(func() {
				for range 2 * events { // bounded: a store that does not lease keeps answering
					c, err := s.ClaimDeliveries(ctx, at, 7, at.Add(time.Hour))
					if err != nil {
						t.Error(err)
						return
					}
					if len(c) == 0 {
						return
					}
					mu.Lock()
					for _, d := range c {
						seen[d.ID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != 2*events {
			t.Fatalf("claimed %d deliveries, want %d", len(seen), 2*events)
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("delivery %d claimed %d times within its lease", id, n)
			}
		}
	})

	t.Run("LogPages", func(t *testing.T) {
		t.Parallel()
		st := newStores(t)
		s, ctx := st.Webhooks, t.Context()
		w := subscribe(t, s)
		for range 5 {
			announce(t, st, domain.EventTaskSucceeded, nil)
		}
		all := log(t, s, w)
		if len(all) != 5 || !slices.IsSortedFunc(all, func(a, b ports.WebhookDelivery) int { return int(b.ID - a.ID) }) {
			t.Fatalf("the log %+v, want 5 newest first", all)
		}
		page, err := s.WebhookDeliveries(ctx, w.ID(), 2, all[1].ID)
		if err != nil || len(page) != 2 || page[0].ID != all[2].ID || page[1].ID != all[3].ID {
			t.Fatalf("the page after %d: %+v, %v", all[1].ID, page, err)
		}
		if err := s.DeleteWebhook(ctx, w.ID(), nil); err == nil {
			if ds, _ := s.WebhookDeliveries(ctx, w.ID(), 10, 0); len(ds) != 0 {
				t.Fatalf("a deleted subscription's log: %+v", ds)
			}
		}
	})
}
