package application

import "github.com/ai-device/ota/domain"

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

func tokenFacts(t domain.APIToken) map[string]any {
	facts := map[string]any{"owner": t.Owner(), "name": t.Name(), "scopes": t.Scopes().List(),
		"expires_at": t.ExpiresAt()}
	if at := t.RevokedAt(); !at.IsZero() {
		facts["revoked_at"] = at
	}
	return facts
}
