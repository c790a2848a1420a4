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

// rolloutFacts are a rollout's share and status, and its plan — whom it
// targets and how it proceeds, under the API's names — so that two
// rollouts of one firmware, to the whole fleet and a staged rollback to
// tagged devices, are told apart. What the plan leaves at its default
// is left out.
func rolloutFacts(r domain.Rollout) map[string]any {
	rec := r.Record()
	facts := map[string]any{"firmware_id": rec.FirmwareID, "status": rec.Status.String(),
		"percentage": rec.Percentage, "max_attempts": rec.MaxAttempts,
		"task_timeout_seconds": int64(r.TaskTimeout() / time.Second)}
	if reason := rec.PausedReason.String(); reason != "" {
		facts["paused_reason"] = reason
	}
	if sel := rec.Selector; len(sel.TagsAll)+len(sel.TagsAny)+len(sel.Attributes) > 0 || sel.Versions != "" {
		s := map[string]any{}
		for k, v := range map[string][]string{"tags_all": sel.TagsAll, "tags_any": sel.TagsAny} {
			if len(v) > 0 {
				s[k] = v
			}
		}
		if len(sel.Attributes) > 0 {
			s["attributes"] = sel.Attributes
		}
		if sel.Versions != "" {
			s["versions"] = sel.Versions
		}
		facts["selector"] = s
	}
	if len(rec.Stages) > 0 {
		stages := make([]map[string]any, len(rec.Stages))
		for i, st := range rec.Stages {
			stages[i] = map[string]any{"percentage": st.Percentage, "min_finished": st.MinFinished,
				"success_percent": st.SuccessPercent, "soak_seconds": int64(st.Soak / time.Second)}
		}
		facts["stages"], facts["stage"] = stages, rec.Stage
	}
	if w := rec.Window; w != nil {
		facts["window"] = map[string]any{"daily": w.Daily, "time_zone": w.TimeZone}
	}
	if !rec.StartsAt.IsZero() {
		facts["starts_at"] = rec.StartsAt
	}
	if rec.AllowDowngrade {
		facts["allow_downgrade"] = true
	}
	if t := rec.FailureThresholdPercent; t != nil {
		facts["failure_threshold_percent"], facts["min_sample"] = *t, rec.MinSample
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
