package contract

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/google/uuid"
)

func (s *repoSuite) rollouts(t *testing.T) {
	ctx := t.Context()

	t.Run("CreateGetRoundTrip", func(t *testing.T) {
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
		specs := []domain.RolloutSpec{
			{Percentage: 35, MaxAttempts: repoInt(5), FailureThresholdPercent: repoInt(12), MinSample: repoInt(7)},
			{Percentage: 0},
			{Percentage: 100, FailureThresholdPercent: repoInt(1)},
		}
		for i, spec := range specs {
			r := s.rollout(t, fw, spec, s.at(i+1), true)
			got, err := s.Rollouts.Get(ctx, r.ID())
			repoNoErr(t, "get", err)
			repoSameRollout(t, got, r)
			// A returned rollout shares nothing with the store.
			if p := got.Record().FailureThresholdPercent; p != nil {
				*p = 99
				again, err := s.Rollouts.Get(ctx, r.ID())
				repoNoErr(t, "get", err)
				repoSameRollout(t, again, r)
			}
		}
	})

	t.Run("UnknownFirmware", func(t *testing.T) {
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), false)
		r := s.rollout(t, fw, domain.RolloutSpec{Percentage: 10}, s.at(1), false)
		repoIsNotFound(t, "rollout of an unstored firmware", s.Rollouts.Create(ctx, r, domain.AuditRecord{}))
		_, err := s.Rollouts.Get(ctx, r.ID())
		repoIsNotFound(t, "refused rollout", err)
	})

	t.Run("RevokedSinceTheCallerLooked", func(t *testing.T) {
		// The caller judged a copy of the firmware read before the revoke
		// (from a cache, say); the store must still refuse the rollout.
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
		paused := s.rollout(t, fw, domain.RolloutSpec{Percentage: 10}, s.at(1), true)
		if _, err := application.UpdateRollout(ctx, s.Tasks, paused.ID(), func(r *domain.Rollout, _ domain.Firmware) error {
			return r.ChangeStatus(domain.RolloutPaused, fw, s.at(2))
		}, nil); err != nil {
			t.Fatal(err)
		}
		stale := fw
		if _, err := s.Firmwares.Update(ctx, fw.ID(), func(f *domain.Firmware) error { f.Revoke(s.at(3)); return nil }, nil); err != nil {
			t.Fatal(err)
		}
		late := s.rollout(t, stale, domain.RolloutSpec{Percentage: 10}, s.at(4), false)
		if err := s.Rollouts.Create(ctx, late, domain.AuditRecord{}); !errors.Is(err, domain.ErrFirmwareRevoked) {
			t.Fatalf("create with a stale firmware: %v, want ErrFirmwareRevoked", err)
		}
		// Update hands fn the firmware as its transaction sees it, not
		// the caller's stale copy: the domain's rule refuses the resume.
		_, err := application.UpdateRollout(ctx, s.Tasks, paused.ID(), func(r *domain.Rollout, seen domain.Firmware) error {
			if seen.ID() != stale.ID() || !seen.Revoked() {
				t.Errorf("Update handed fn firmware %s (%s), want %s revoked", seen.ID(), seen.Status(), stale.ID())
			}
			return r.ChangeStatus(domain.RolloutActive, seen, s.at(5))
		}, nil)
		if !errors.Is(err, domain.ErrFirmwareRevoked) {
			t.Fatalf("resume of a revoked firmware's rollout: %v, want ErrFirmwareRevoked", err)
		}
		got, err := s.Rollouts.Get(ctx, paused.ID())
		if err != nil || got.Status() != domain.RolloutPaused {
			t.Fatalf("rollout after the refused resume: %v %v", got.Status(), err)
		}
	})

	t.Run("DuplicateID", func(t *testing.T) {
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
		r := s.rollout(t, fw, domain.RolloutSpec{Percentage: 10}, s.at(1), true)
		same, err := domain.NewRollout(r.ID(), fw, domain.RolloutSpec{Percentage: 90}, s.at(2))
		repoNoErr(t, "new rollout", err)
		if err := s.Rollouts.Create(ctx, same, domain.AuditRecord{}); err == nil {
			t.Error("a second rollout with a taken id was stored")
		}
		got, err := s.Rollouts.Get(ctx, r.ID())
		repoNoErr(t, "get", err)
		repoSameRollout(t, got, r)
	})

	t.Run("RequestKey", func(t *testing.T) {
		// A rollout's Idempotency-Key is stored with it: found by it with
		// the fingerprint it came with, and unique — a second rollout with
		// the key is ErrRequestKeyTaken and nothing of it is stored.
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
		key, err := domain.ParseRequestKey(repoName("key"))
		repoNoErr(t, "parse key", err)
		r := s.rollout(t, fw, domain.RolloutSpec{Percentage: 10, RequestKey: key}, s.at(1), true)
		got, err := s.Rollouts.ByRequestKey(ctx, key.Key())
		repoNoErr(t, "by request key", err)
		repoSameRollout(t, got, r)
		if got.RequestKey() != r.RequestKey() || got.RequestKey().Fingerprint() == "" {
			t.Errorf("stored key %+v, want %+v", got.RequestKey(), r.RequestKey())
		}
		again := s.rollout(t, fw, domain.RolloutSpec{Percentage: 20, RequestKey: key}, s.at(2), false)
		if err := s.Rollouts.Create(ctx, again, domain.AuditRecord{}); !errors.Is(err, domain.ErrRequestKeyTaken) {
			t.Fatalf("a second rollout with the key: %v, want ErrRequestKeyTaken", err)
		}
		_, err = s.Rollouts.Get(ctx, again.ID())
		repoIsNotFound(t, "the refused rollout", err)
		// Keyless rollouts share no key, and no rollout has an unknown one.
		s.rollout(t, fw, domain.RolloutSpec{Percentage: 30}, s.at(3), true)
		s.rollout(t, fw, domain.RolloutSpec{Percentage: 40}, s.at(4), true)
		for _, k := range []string{"", repoName("unknown")} {
			_, err := s.Rollouts.ByRequestKey(ctx, k)
			repoIsNotFound(t, "by request key "+k, err)
		}
	})

	t.Run("GetMissing", func(t *testing.T) {
		for _, id := range []string{uuid.NewString(), "not-a-uuid", ""} {
			_, err := s.Rollouts.Get(ctx, asUUID(id))
			repoIsNotFound(t, "get "+id, err)
		}
	})

	t.Run("Update", func(t *testing.T) {
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
		r := s.rollout(t, fw, domain.RolloutSpec{Percentage: 10, FailureThresholdPercent: repoInt(30)}, s.at(1), true)
		got, err := application.UpdateRollout(ctx, s.Tasks, r.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			repoSameRollout(t, *ro, r)
			if err := ro.SetPercentage(60, s.at(5)); err != nil {
				return err
			}
			return ro.ChangeStatus(domain.RolloutPaused, fw, s.at(6))
		}, nil)
		repoNoErr(t, "update", err)
		want := r
		repoNoErr(t, "set", want.SetPercentage(60, s.at(5)))
		repoNoErr(t, "pause", want.ChangeStatus(domain.RolloutPaused, fw, s.at(6)))
		repoSameRollout(t, got, want)
		stored, err := s.Rollouts.Get(ctx, r.ID())
		repoNoErr(t, "get", err)
		repoSameRollout(t, stored, want)
		if stored.PausedReason() != domain.PausedManual {
			t.Errorf("paused reason %q, want manual", stored.PausedReason())
		}

		_, err = application.UpdateRollout(ctx, s.Tasks, r.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			_ = ro.ChangeStatus(domain.RolloutCancelled, fw, s.at(7))
			return errRepoBoom
		}, nil)
		if !errors.Is(err, errRepoBoom) {
			t.Fatalf("failing fn: err = %v, want fn's error", err)
		}
		stored, err = s.Rollouts.Get(ctx, r.ID())
		repoNoErr(t, "get", err)
		repoSameRollout(t, stored, want)

		for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
			_, err = application.UpdateRollout(ctx, s.Tasks, asUUID(id), func(*domain.Rollout, domain.Firmware) error {
				t.Error("fn called for an unknown rollout")
				return nil
			}, nil)
			repoIsNotFound(t, "update "+id, err)
		}

		lost, cancel := context.WithCancel(ctx)
		_, err = application.UpdateRollout(lost, s.Tasks, r.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			cancel() // the lock is lost while fn runs
			return ro.SetPercentage(90, s.at(8))
		}, nil)
		if err == nil {
			t.Error("update whose context ended inside fn succeeded")
		}
		stored, err = s.Rollouts.Get(ctx, r.ID())
		repoNoErr(t, "get", err)
		repoSameRollout(t, stored, want)
	})

	t.Run("ConcurrentUpdatesSerialise", func(t *testing.T) {
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
		r := s.rollout(t, fw, domain.RolloutSpec{Percentage: 0}, s.at(1), true)
		const n = 40
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				_, err := application.UpdateRollout(ctx, s.Tasks, r.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
					p := ro.Percentage()
					time.Sleep(time.Millisecond) // widen the window for a lost update
					return ro.SetPercentage(p+1, s.at(2))
				}, nil)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			repoNoErr(t, "concurrent update", err)
		}
		got, err := s.Rollouts.Get(ctx, r.ID())
		repoNoErr(t, "get", err)
		if got.Percentage() != n {
			t.Errorf("percentage %d after %d increments: updates were lost", got.Percentage(), n)
		}
	})

	t.Run("ResumeRacingARevoke", func(t *testing.T) {
		// An operator resumes a paused rollout while another revokes its
		// firmware. The resume judges the firmware locked, so the revoke
		// waits for it: once the revoke has returned, the rollout never
		// becomes active any more.
		status := func(fw domain.Firmware, id domain.UUID) domain.RolloutStatus { // committed, past any cache, waiting for no lock
			var st domain.RolloutStatus
			repoNoErr(t, "read", s.Tasks.InTaskTx(ctx, func(tx ports.TaskTx) error {
				o, err := tx.Offer(fw.ID(), id)
				st = o.Rollout.Status()
				return err
			}))
			return st
		}
		for i := range 5 {
			fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
			r := s.rollout(t, fw, domain.RolloutSpec{Percentage: 10}, s.at(1), true)
			_, err := application.UpdateRollout(ctx, s.Tasks, r.ID(), func(ro *domain.Rollout, f domain.Firmware) error {
				return ro.ChangeStatus(domain.RolloutPaused, f, s.at(2))
			}, nil)
			repoNoErr(t, "pause", err)
			read := make(chan struct{})
			var afterRevoke domain.RolloutStatus
			var wg sync.WaitGroup
			wg.Go(func() {
				_, err := application.UpdateRollout(ctx, s.Tasks, r.ID(), func(ro *domain.Rollout, f domain.Firmware) error {
					close(read)
					time.Sleep(50 * time.Millisecond) // the revoke runs meanwhile
					return ro.ChangeStatus(domain.RolloutActive, f, s.at(3))
				}, nil)
				repoNoErr(t, "resume", err)
			})
			wg.Go(func() {
				<-read
				_, err := s.Firmwares.Update(ctx, fw.ID(), func(f *domain.Firmware) error { f.Revoke(s.at(3)); return nil }, nil)
				repoNoErr(t, "revoke", err)
				afterRevoke = status(fw, r.ID())
			})
			wg.Wait()
			if final := status(fw, r.ID()); final != afterRevoke {
				t.Fatalf("round %d: the rollout was %s when the revoke returned, then %s: resumed over a revoke", i, afterRevoke, final)
			}
		}
	})

	t.Run("Offers", func(t *testing.T) {
		model, other := repoName("model"), repoName("model")
		spec := domain.RolloutSpec{Percentage: 50}
		fwA := s.firmware(t, repoSpec(model, "1.1.0"), s.at(1), true)
		rA := s.rollout(t, fwA, spec, s.at(2), true)
		rA2 := s.rollout(t, fwA, domain.RolloutSpec{Percentage: 100}, s.at(3), true)
		fwB := s.firmware(t, repoSpec(model, "1.2.0"), s.at(1), true)
		rB := s.rollout(t, fwB, spec, s.at(2), true)
		fwC := s.firmware(t, repoSpec(model, "1.3.0"), s.at(1), true)
		s.rollout(t, fwC, spec, s.at(2), true)
		s.firmware(t, repoSpec(model, "1.4.0"), s.at(1), true) // no rollout
		fwE := s.firmware(t, repoSpec(model, "1.5.0"), s.at(1), true)
		rE := s.rollout(t, fwE, spec, s.at(2), true)
		fwX := s.firmware(t, repoSpec(other, "1.1.0"), s.at(1), true)
		rX := s.rollout(t, fwX, spec, s.at(2), true)

		_, err := application.UpdateRollout(ctx, s.Tasks, rA2.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			return ro.ChangeStatus(domain.RolloutPaused, fwA, s.at(4))
		}, nil)
		repoNoErr(t, "pause", err)
		_, err = application.UpdateRollout(ctx, s.Tasks, rB.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			return ro.ChangeStatus(domain.RolloutCancelled, fwB, s.at(4))
		}, nil)
		repoNoErr(t, "cancel", err)
		_, err = s.Firmwares.Update(ctx, fwC.ID(), func(f *domain.Firmware) error {
			f.Revoke(s.at(4))
			return nil
		}, nil)
		repoNoErr(t, "revoke", err)

		check := func(model string, want ...domain.Offer) {
			t.Helper()
			got, err := s.Rollouts.Offers(ctx, model)
			repoNoErr(t, "offers", err)
			byRollout := map[domain.UUID]domain.Offer{}
			for _, o := range got {
				byRollout[o.Rollout.ID()] = o
			}
			if len(got) != len(want) || len(byRollout) != len(want) {
				t.Errorf("offers of %s: got %d, want %d", model, len(got), len(want))
			}
			for _, w := range want {
				g, ok := byRollout[w.Rollout.ID()]
				if !ok {
					t.Errorf("offers of %s miss rollout %s", model, w.Rollout.ID())
					continue
				}
				repoSameRollout(t, g.Rollout, w.Rollout)
				repoSameFirmware(t, g.Firmware, w.Firmware)
			}
		}
		check(model, domain.Offer{Firmware: fwA, Rollout: rA}, domain.Offer{Firmware: fwE, Rollout: rE})
		check(other, domain.Offer{Firmware: fwX, Rollout: rX})
		check(repoName("model"))

		// Pausing an offered rollout withdraws it; resuming brings it back.
		paused, err := application.UpdateRollout(ctx, s.Tasks, rE.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			return ro.ChangeStatus(domain.RolloutPaused, fwE, s.at(5))
		}, nil)
		repoNoErr(t, "pause", err)
		check(model, domain.Offer{Firmware: fwA, Rollout: rA})
		resumed, err := application.UpdateRollout(ctx, s.Tasks, rE.ID(), func(ro *domain.Rollout, _ domain.Firmware) error {
			return ro.ChangeStatus(domain.RolloutActive, fwE, s.at(6))
		}, nil)
		repoNoErr(t, "resume", err)
		if paused.Status() != domain.RolloutPaused || resumed.Status() != domain.RolloutActive {
			t.Fatalf("statuses %s then %s", paused.Status(), resumed.Status())
		}
		check(model, domain.Offer{Firmware: fwA, Rollout: rA}, domain.Offer{Firmware: fwE, Rollout: resumed})
	})

	t.Run("CancelledContext", func(t *testing.T) {
		fw := s.firmware(t, repoSpec(repoName("model"), "1.0.0"), s.at(0), true)
		r := s.rollout(t, fw, domain.RolloutSpec{Percentage: 10}, s.at(1), false)
		if err := s.Rollouts.Create(repoCancelled(t), r, domain.AuditRecord{}); err == nil {
			t.Error("create with a cancelled context succeeded")
		}
		_, err := s.Rollouts.Get(ctx, r.ID())
		repoIsNotFound(t, "rollout created under a cancelled context", err)
	})
}

// ---------------------------------------------------------------- tasks
