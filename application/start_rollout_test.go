package application_test

import (
	"errors"
	"testing"

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
