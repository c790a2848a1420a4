package application

import (
	"time"

	"github.com/ai-device/ota/domain"
)

// What an audit record shows of each target, before and after a change:
// the fields an operator reviewing it needs to tell what changed, and
// never a secret or the hash of one (a device's token, a password, an API
// token's secret). One function per target, so every change of it shows
// the same fields.

func firmwareFacts(f domain.Firmware) map[string]any {
	facts := map[string]any{"model": f.Model(), "version": f.Version().String(), "status": f.Status().String(),
		"mandatory": f.Spec().Mandatory}
	if a := f.ArtifactID(); !a.IsZero() {
		facts["artifact_id"] = a.String()
	}
	return facts
}

func rolloutFacts(r domain.Rollout) map[string]any {
	facts := map[string]any{"firmware_id": r.FirmwareID().String(), "status": r.Status().String(),
		"percentage": r.Percentage(), "max_attempts": r.MaxAttempts()}
	if reason := r.PausedReason().String(); reason != "" {
		facts["paused_reason"] = reason
	}
	return facts
}

func deviceFacts(d domain.Device) map[string]any {
	return map[string]any{"model": d.Model(), "current_version": d.CurrentVersion().String()}
}

func artifactFacts(a domain.Artifact) map[string]any {
	return map[string]any{"file_name": a.FileName(), "size_bytes": a.Digest().Size, "sha256": a.Digest().SHA256,
		"format": a.Meta().Format.String()}
}

func userFacts(u domain.User) map[string]any { return map[string]any{"role": string(u.Role())} }

func tokenFacts(t domain.APIToken) map[string]any {
	facts := map[string]any{"owner": t.Owner(), "name": t.Name(), "scopes": t.Scopes().List(),
		"expires_at": t.ExpiresAt()}
	if at := t.RevokedAt(); !at.IsZero() {
		facts["revoked_at"] = at
	}
	return facts
}

// announced adds to a record (or its error) the event its change
// announces: announced(actor.Record(...))(type, at, data).
func announced(rec domain.AuditRecord, err error) func(domain.EventType, time.Time, map[string]any) (domain.AuditRecord, error) {
	return func(typ domain.EventType, at time.Time, data map[string]any) (domain.AuditRecord, error) {
		if err != nil {
			return domain.AuditRecord{}, err
		}
		a, err := domain.NewAnnouncement(typ, at, data)
		if err != nil {
			return domain.AuditRecord{}, err
		}
		return rec.Announcing(a), nil
	}
}

// What an event says of each target: ids first, so that a receiver can
// look the rest up; no secret.

func firmwareEvent(f domain.Firmware) map[string]any {
	return map[string]any{"firmware_id": f.ID().String(), "model": f.Model(), "version": f.Version().String()}
}

// DeviceEvent is what a device's events say of it (application/mender's
// admissions too).
func DeviceEvent(d domain.Device) map[string]any {
	return map[string]any{"device_id": d.ID().String(), "model": d.Model()}
}
