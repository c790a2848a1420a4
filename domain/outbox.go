package domain

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"
)

// EventType names what other systems are told happened (webhooks, the
// NATS sink): one per kind of change operators act on. The names are
// stable; a payload's shape is versioned by EventSchemaVersion.
type EventType string

// The event types.
const (
	EventTaskSucceeded        EventType = "task.succeeded"
	EventTaskFailed           EventType = "task.failed"
	EventTaskTimedOut         EventType = "task.timed_out"
	EventTaskCancelled        EventType = "task.cancelled"
	EventRolloutCreated       EventType = "rollout.created"
	EventRolloutPaused        EventType = "rollout.paused"
	EventRolloutResumed       EventType = "rollout.resumed"
	EventRolloutStageAdvanced EventType = "rollout.stage_advanced"
	EventRolloutCompleted     EventType = "rollout.completed"
	EventRolloutCancelled     EventType = "rollout.cancelled"
	EventFirmwarePublished    EventType = "firmware.published"
	EventFirmwareRevoked      EventType = "firmware.revoked"
	EventDeviceRegistered     EventType = "device.registered"
	EventDeviceAdmitted       EventType = "device.admitted"
	EventDeviceRejected       EventType = "device.rejected"
	// EventTest is what "send a test event" sends to one subscription.
	EventTest EventType = "webhook.test"
)

// EventSchemaVersion is the version of every payload's shape: a change
// that removes or renames a field makes a new version.
const EventSchemaVersion = 1

// EventTypes lists every event type but the test event, which no change
// announces.
func EventTypes() []EventType {
	return []EventType{EventTaskSucceeded, EventTaskFailed, EventTaskTimedOut, EventTaskCancelled,
		EventRolloutCreated, EventRolloutPaused, EventRolloutResumed, EventRolloutStageAdvanced, EventRolloutCompleted,
		EventRolloutCancelled, EventFirmwarePublished, EventFirmwareRevoked,
		EventDeviceRegistered, EventDeviceAdmitted, EventDeviceRejected}
}

// ParseEventType reads an event type's name (the test event included).
func ParseEventType(s string) (EventType, error) {
	if s == string(EventTest) {
		return EventTest, nil
	}
	for _, t := range EventTypes() {
		if string(t) == s {
			return t, nil
		}
	}
	return "", invalid("event_types", "%.64q is not an event type", s)
}

// Announcement is an event a change announces, written in the change's
// transaction (the outbox) so that it is never lost when the change
// commits and never invented when it does not. The store gives it its id
// as it stores it.
type Announcement struct {
	typ     EventType
	at      time.Time
	payload json.RawMessage
}

// NewAnnouncement is an event of type typ at at, whose payload is data
// (a JSON object; nil is an empty one).
func NewAnnouncement(typ EventType, at time.Time, data map[string]any) (Announcement, error) {
	if _, err := ParseEventType(string(typ)); err != nil {
		return Announcement{}, err
	}
	if data == nil {
		data = map[string]any{}
	}
	b, err := json.Marshal(data)
	if err != nil {
		return Announcement{}, fmt.Errorf("announcing %s: %w", typ, err)
	}
	return Announcement{typ: typ, at: at.UTC().Truncate(time.Microsecond), payload: b}, nil
}

// RehydrateAnnouncement rebuilds a stored event's announcement.
func RehydrateAnnouncement(typ EventType, at time.Time, payload json.RawMessage) Announcement {
	return Announcement{typ: typ, at: at.UTC().Truncate(time.Microsecond), payload: payload}
}

// Type is what happened.
func (a Announcement) Type() EventType { return a.typ }

// At is when it happened.
func (a Announcement) At() time.Time { return a.at }

// Payload is the event's data, a JSON object.
func (a Announcement) Payload() json.RawMessage { return a.payload }

// Announcing is r with the events its change announces, written with it.
func (r AuditRecord) Announcing(a ...Announcement) AuditRecord {
	r.announces = append(append([]Announcement(nil), r.announces...), a...)
	return r
}

// Announcements are the events the recorded change announces.
func (r AuditRecord) Announcements() []Announcement { return r.announces }

// TaskAnnouncement is the event of a task's change from before to after:
// its end (succeeded, failed, timed out, cancelled), or none.
func TaskAnnouncement(before, after Task) (Announcement, bool, error) {
	if !after.status.IsFinal() || before.status == after.status {
		return Announcement{}, false, nil
	}
	typ := map[TaskStatus]EventType{TaskSucceeded: EventTaskSucceeded, TaskFailed: EventTaskFailed, TaskCancelled: EventTaskCancelled}[after.status]
	if after.status == TaskFailed && after.errorCode == CodeTimedOut {
		typ = EventTaskTimedOut
	}
	data := map[string]any{"task_id": after.id.String(), "device_id": after.deviceID.String(),
		"firmware_id": after.firmwareID.String(), "rollout_id": after.rolloutID.String(), "attempt": after.attempt}
	if after.errorCode != "" {
		data["error_code"] = after.errorCode
	}
	a, err := NewAnnouncement(typ, after.updatedAt, data)
	return a, err == nil, err
}

// RolloutAnnouncements are the events of a rollout's change from before
// to after: paused (by an operator or by its failure threshold),
// resumed, cancelled, its stage advanced, and completed when it reaches
// its last stage or, unstaged, 100 % (once: not again on a resume).
func RolloutAnnouncements(before, after Rollout, at time.Time) ([]Announcement, error) {
	data := map[string]any{"rollout_id": after.id.String(), "firmware_id": after.firmwareID.String(),
		"percentage": after.percentage, "stage": after.stage}
	var types []EventType
	switch {
	case before.status != RolloutPaused && after.status == RolloutPaused:
		types = append(types, EventRolloutPaused)
	case before.status == RolloutPaused && after.status == RolloutActive:
		types = append(types, EventRolloutResumed)
	case before.status != RolloutCancelled && after.status == RolloutCancelled:
		types = append(types, EventRolloutCancelled)
	}
	if after.stage > before.stage {
		types = append(types, EventRolloutStageAdvanced)
	}
	// A change that cancels the rollout never completes it, though it may
	// widen it to 100 % in the same request (the percentage applies first).
	if after.complete() && !before.complete() && after.status != RolloutCancelled {
		types = append(types, EventRolloutCompleted)
	}
	out := make([]Announcement, 0, len(types))
	for _, t := range types {
		d := data
		if t == EventRolloutPaused { // reason only on rollout.paused (the API's WebhookRolloutData)
			d = maps.Clone(data)
			d["reason"] = map[PausedReason]string{PausedAuto: "auto", PausedManual: "operator"}[after.pausedReason]
		}
		a, err := NewAnnouncement(t, at, d)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// complete reports whether r has reached its end: its last stage, or
// unstaged 100 %. A pause does not undo that (it is paused at its end),
// so a pause and a resume do not complete it a second time; a rollout
// widened to 100 % while paused completes then, as it reaches it. A
// cancelled rollout changes no more; a change that cancels it is not a
// completion (RolloutAnnouncements).
func (r Rollout) complete() bool {
	if len(r.stages) > 0 {
		return r.stage == len(r.stages)-1
	}
	return r.percentage == 100
}
