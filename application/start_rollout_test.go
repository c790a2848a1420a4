package application_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// TestStartRolloutReadsTheFirmwareIDForEveryEdge: the use case reads the
// firmware id the API's body and the console's form hand it as given —
// missing is VALIDATION_FAILED on firmware_id; malformed names no
// firmware, so it is NOT_FOUND like an unknown one (ARCHITECTURE.md).
func TestStartRolloutReadsTheFirmwareIDForEveryEdge(t *testing.T) {
	onEachStore(t, policyStart, func(t *testing.T, e *env, _ *manualClock) {
		fw := e.firmware("2.0.0")
		spec := domain.RolloutSpec{Percentage: 10}
		_, err := e.admin.StartRollout(e.ctx, testActor, ports.StartRollout{Spec: spec})
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != "firmware_id" {
			t.Fatalf("no firmware id: %v, want VALIDATION_FAILED on firmware_id", err)
		}
		for _, id := range []string{"not-a-firmware", "5d8f0c2e-1111-4a4a-9b9b-000000000000"} {
			if _, err := e.admin.StartRollout(e.ctx, testActor, ports.StartRollout{FirmwareID: id, Spec: spec}); !errors.Is(err, domain.ErrNotFound) ||
				errors.Is(err, domain.ErrValidation) {
				t.Fatalf("firmware id %q: %v, want NOT_FOUND", id, err)
			}
		}
		r, err := e.admin.StartRollout(e.ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: spec})
		if err != nil || r.FirmwareID() != fw.ID() {
			t.Fatalf("a released firmware: %v", err)
		}
	})
}

// lateRollouts is a rollout store whose first Idempotency-Key lookup
// misses: the retry looked before the first start committed.
type lateRollouts struct {
	ports.RolloutRepository
	looked bool
}

func (r *lateRollouts) ByRequestKey(ctx context.Context, key string) (domain.Rollout, error) {
	if !r.looked {
		r.looked = true
		return domain.Rollout{}, domain.ErrNotFound
	}
	return r.RolloutRepository.ByRequestKey(ctx, key)
}

// TestRetryRacingTheFirstStartFindsIt: a retry that looked for its key
// before the first start committed, and then failed (here: the firmware
// was revoked in between), is answered with the first start's rollout,
// not the refusal: the key is looked for again when a start fails.
func TestRetryRacingTheFirstStartFindsIt(t *testing.T) {
	onEachStore(t, policyStart, func(t *testing.T, e *env, clock *manualClock) {
		fw := e.firmware("2.0.0")
		req := ports.StartRollout{FirmwareID: fw.ID().String(), Spec: domain.RolloutSpec{Percentage: 10}, RequestKey: "start-" + fw.ID().String()}
		first, err := e.admin.StartRollout(e.ctx, testActor, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.admin.RevokeFirmware(e.ctx, testActor, fw.ID()); err != nil {
			t.Fatal(err)
		}
		late, err := application.NewRolloutAdmin(e.deps.Firmwares, &lateRollouts{RolloutRepository: e.deps.Rollouts}, e.deps.Tasks, clock, e.deps.IDs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := late.StartRollout(e.ctx, testActor, req)
		if err != nil || got.ID() != first.ID() {
			t.Fatalf("the retry: %v, %v; want the first start's rollout %s", got.ID(), err, first.ID())
		}
		// Another request under the key is still a conflict, found late too.
		req.Spec.Percentage = 20
		late, _ = application.NewRolloutAdmin(e.deps.Firmwares, &lateRollouts{RolloutRepository: e.deps.Rollouts}, e.deps.Tasks, clock, e.deps.IDs)
		if _, err := late.StartRollout(e.ctx, testActor, req); !errors.Is(err, domain.ErrRequestKeyConflict) {
			t.Fatalf("another request under the key: %v, want IDEMPOTENCY_CONFLICT", err)
		}
	})
}
