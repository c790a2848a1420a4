package application

import (
	"context"
	"fmt"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// FirmwareAdmin publishes, lists and revokes firmware.
type FirmwareAdmin struct {
	firmwares ports.FirmwareRepository
	artifacts ArtifactReader
	clock     ports.Clock
	ids       ports.IDGenerator
}

// ArtifactReader loads the uploaded artifact a firmware is published from
// (ports.ArtifactRepository is one).
type ArtifactReader interface {
	Get(ctx context.Context, id domain.UUID) (domain.Artifact, error)
}

// NewFirmwareAdmin builds the operators' firmware use cases.
func NewFirmwareAdmin(firmwares ports.FirmwareRepository, artifacts ArtifactReader, clock ports.Clock, ids ports.IDGenerator) (*FirmwareAdmin, error) {
	if err := required(firmwares, artifacts, clock, ids); err != nil {
		return nil, err
	}
	return &FirmwareAdmin{firmwares: firmwares, artifacts: artifacts, clock: clock, ids: ids}, nil
}

// PublishFirmware validates and stores a released firmware. A firmware
// made from an uploaded artifact (spec.ArtifactID) takes its size,
// checksums and artifact name from it (FirmwareSpec.WithArtifact); an
// artifact_id that names no artifact is domain.ErrNotFound, as a
// rollout's unknown firmware_id is. The store refuses the firmware should
// the artifact be deleted meanwhile.
func (s *FirmwareAdmin) PublishFirmware(ctx context.Context, actor domain.Actor, spec domain.FirmwareSpec) (domain.Firmware, error) {
	if !spec.ArtifactID.IsZero() {
		a, err := s.artifacts.Get(ctx, spec.ArtifactID)
		if err != nil {
			return domain.Firmware{}, fmt.Errorf("loading the firmware's artifact: %w", err)
		}
		if spec, err = spec.WithArtifact(a); err != nil {
			return domain.Firmware{}, err
		}
	}
	fw, err := domain.NewFirmware(s.ids.NewID(), spec, s.clock.Now())
	if err != nil {
		return domain.Firmware{}, err
	}
	rec, err := announced(actor.Record(fw.CreatedAt(), domain.AuditFirmwarePublish, fw.ID().String(), nil, firmwareFacts(fw)))(
		domain.EventFirmwarePublished, fw.CreatedAt(), firmwareEvent(fw))
	if err != nil {
		return domain.Firmware{}, err
	}
	if err := s.firmwares.Create(ctx, fw, rec); err != nil {
		return domain.Firmware{}, fmt.Errorf("publishing firmware: %w", err)
	}
	return fw, nil
}

// ListFirmwares lists a model's firmware, or all when model is empty.
func (s *FirmwareAdmin) ListFirmwares(ctx context.Context, model string) ([]domain.Firmware, error) {
	if model != "" {
		if err := domain.ValidateIdentifier("model", model); err != nil {
			return nil, err
		}
	}
	return s.firmwares.List(ctx, model)
}

// RevokeFirmware withdraws a firmware: it is never offered again, its
// rollouts stop admitting, and its pending tasks are cancelled at each
// device's next check (check rule 5).
func (s *FirmwareAdmin) RevokeFirmware(ctx context.Context, actor domain.Actor, id domain.UUID) (domain.Firmware, error) {
	if id.IsZero() { // an id the edge could not parse names no firmware
		return domain.Firmware{}, fmt.Errorf("firmware: %w", domain.ErrNotFound)
	}
	now := s.clock.Now()
	fw, err := s.firmwares.Update(ctx, id, func(f *domain.Firmware) error {
		f.Revoke(now)
		return nil
	}, func(before, after domain.Firmware) (domain.AuditRecord, error) {
		rec, err := actor.Record(now, domain.AuditFirmwareRevoke, id.String(), firmwareFacts(before), firmwareFacts(after))
		if err != nil || before.Revoked() {
			return rec, err // revoking a revoked firmware announces nothing
		}
		return announced(rec, nil)(domain.EventFirmwareRevoked, now, firmwareEvent(after))
	})
	if err != nil {
		return domain.Firmware{}, fmt.Errorf("revoking firmware: %w", err)
	}
	return fw, nil
}
