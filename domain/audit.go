package domain

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// AuditAction names what an operator did: one per mutating admin route
// (docs/DOMAIN.md, audit log). The names are stable: operators filter by
// them and keep them in their own tools.
type AuditAction string

// The audited actions.
const (
	AuditDeviceRegister    AuditAction = "device.register"
	AuditDeviceTokenRotate AuditAction = "device.token.rotate"
	AuditDeviceTagsSet     AuditAction = "device.tags.set"
	AuditDevicesTagsChange AuditAction = "devices.tags.change"
	AuditDeviceAccept      AuditAction = "device.admission.accept"
	AuditDeviceReject      AuditAction = "device.admission.reject"
	AuditDeviceRequestDrop AuditAction = "device.admission.delete"
	AuditDeviceKeySet      AuditAction = "device.public_key.set"
	AuditFirmwarePublish   AuditAction = "firmware.publish"
	AuditFirmwareRevoke    AuditAction = "firmware.revoke"
	AuditArtifactUpload    AuditAction = "artifact.upload"
	AuditArtifactDelete    AuditAction = "artifact.delete"
	AuditRolloutStart      AuditAction = "rollout.start"
	AuditRolloutUpdate     AuditAction = "rollout.update"
	AuditUserCreate        AuditAction = "user.create"
	AuditUserRemove        AuditAction = "user.remove"
	AuditTokenCreate       AuditAction = "api_token.create"
	AuditTokenRevoke       AuditAction = "api_token.revoke"
	AuditWebhookCreate     AuditAction = "webhook.create"
	AuditWebhookChange     AuditAction = "webhook.change"
	AuditWebhookDelete     AuditAction = "webhook.delete"
	AuditWebhookTest       AuditAction = "webhook.test"
)

// AuditActions lists every audited action.
func AuditActions() []AuditAction {
	return []AuditAction{AuditDeviceRegister, AuditDeviceTokenRotate, AuditDeviceTagsSet, AuditDevicesTagsChange,
		AuditDeviceAccept, AuditDeviceReject, AuditDeviceRequestDrop, AuditDeviceKeySet,
		AuditFirmwarePublish, AuditFirmwareRevoke, AuditArtifactUpload, AuditArtifactDelete,
		AuditRolloutStart, AuditRolloutUpdate, AuditUserCreate, AuditUserRemove, AuditTokenCreate, AuditTokenRevoke,
		AuditWebhookCreate, AuditWebhookChange, AuditWebhookDelete, AuditWebhookTest}
}

// ParseAuditAction reads an action's name.
func ParseAuditAction(s string) (AuditAction, error) {
	for _, a := range AuditActions() {
		if string(a) == s {
			return a, nil
		}
	}
	return "", invalid("action", "is not an audited action")
}

// Actor is who changes something and from where: the principal acting,
// the request's id and the address it came from. Every operator's change
// takes one, so that its audit record names them; the zero Actor may
// change nothing.
type Actor struct {
	principal Principal
	requestID string
	source    string
}

// maxActorField bounds what a request may write into a record through its
// headers (a request id, a forwarded address).
const maxActorField = 128

// NewActor is the principal p acting in the request requestID, from the
// address source. Either may be empty (a command on the server's own
// shell has neither); both are cut to maxActorField bytes.
func NewActor(p Principal, requestID, source string) (Actor, error) {
	if p.kind == principalNone {
		return Actor{}, fmt.Errorf("nobody is acting: %w", ErrUnauthorized)
	}
	return Actor{principal: p, requestID: clip(requestID, maxActorField), source: clip(source, maxActorField)}, nil
}

// Principal is who acts.
func (a Actor) Principal() Principal { return a.principal }

// Record is the audit record of a change a made at at: action on target,
// with the target's state before and after it (nil where there is none:
// before a creation, after a removal). before and after hold what an
// operator reviewing the change needs, never a secret or a hash of one;
// they are stored as JSON.
func (a Actor) Record(at time.Time, action AuditAction, target string, before, after any) (AuditRecord, error) {
	if a.principal.kind == principalNone {
		return AuditRecord{}, fmt.Errorf("recording %s: nobody is acting: %w", action, ErrUnauthorized)
	}
	if _, err := ParseAuditAction(string(action)); err != nil {
		return AuditRecord{}, err
	}
	if target == "" {
		return AuditRecord{}, fmt.Errorf("recording %s: no target", action)
	}
	b, err := auditJSON(before)
	if err != nil {
		return AuditRecord{}, fmt.Errorf("recording %s: %w", action, err)
	}
	af, err := auditJSON(after)
	if err != nil {
		return AuditRecord{}, fmt.Errorf("recording %s: %w", action, err)
	}
	return AuditRecord{at: at.UTC().Truncate(time.Microsecond), actor: a.principal, action: action, target: target,
		before: b, after: af, requestID: a.requestID, source: a.source}, nil
}

func auditJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if string(b) == "null" {
		return nil, nil
	}
	return b, nil
}

// AuditRecord is one operator's change: who, when, what, on what, the
// state before and after, and the request it came in. Records are only
// ever added: nothing changes or removes one but retention, a month at a
// time.
type AuditRecord struct {
	at        time.Time
	actor     Principal
	action    AuditAction
	target    string
	before    json.RawMessage
	after     json.RawMessage
	requestID string
	source    string
	// announces are the events the change announces (the outbox), written
	// with the record.
	announces []Announcement
}

// AuditActorRecord is how a record names its actor, as stored: the kind
// ("root", "user" or "token"), the user (none for root) and the token.
type AuditActorRecord struct {
	Kind  string
	User  string
	Token UUID
}

// ActorRecord names the record's actor for a store.
func (r AuditRecord) ActorRecord() AuditActorRecord {
	p := r.actor
	switch p.kind {
	case principalRoot:
		return AuditActorRecord{Kind: "root"}
	case principalUser:
		return AuditActorRecord{Kind: "user", User: p.account.name}
	}
	return AuditActorRecord{Kind: "token", User: p.account.name, Token: p.token}
}

// RehydrateAuditRecord rebuilds a stored record.
func RehydrateAuditRecord(at time.Time, actor AuditActorRecord, action AuditAction, target string,
	before, after json.RawMessage, requestID, source string) (AuditRecord, error) {
	var p Principal
	switch actor.Kind {
	case "root":
		p = Principal{kind: principalRoot}
	case "user":
		p = Principal{kind: principalUser, account: AccountRef{name: actor.User}}
	case "token":
		p = Principal{kind: principalToken, account: AccountRef{name: actor.User}, token: actor.Token}
	default:
		return AuditRecord{}, fmt.Errorf("stored audit record: unknown actor kind %q", actor.Kind)
	}
	if _, err := ParseAuditAction(string(action)); err != nil {
		return AuditRecord{}, fmt.Errorf("stored audit record: %w", err)
	}
	return AuditRecord{at: at.UTC().Truncate(time.Microsecond), actor: p, action: action, target: target,
		before: before, after: after, requestID: requestID, source: source}, nil
}

// At is when the change was made.
func (r AuditRecord) At() time.Time { return r.at }

// Actor names who made it ("root", "user:alice", "token:<id>(alice)").
func (r AuditRecord) Actor() string { return r.actor.String() }

// Action is what was done.
func (r AuditRecord) Action() AuditAction { return r.action }

// Target names what it was done to (an id, a username).
func (r AuditRecord) Target() string { return r.target }

// Before is the target's state before the change, as JSON (nil: none).
func (r AuditRecord) Before() json.RawMessage { return r.before }

// After is the target's state after the change, as JSON (nil: none).
func (r AuditRecord) After() json.RawMessage { return r.after }

// RequestID is the id of the request that made the change.
func (r AuditRecord) RequestID() string { return r.requestID }

// Source is the address the request came from.
func (r AuditRecord) Source() string { return r.source }

// IsZero reports whether r records nothing: a change the service makes by
// itself (a device's report, a fixture) has no record.
func (r AuditRecord) IsZero() bool { return r.action == "" && len(r.announces) == 0 }

// ParseAuditActor reads whose records an audit listing asks for: "root"
// (the break-glass root's), an API token's id (that token's), else a
// username (the user's, in person and through every token of theirs),
// which may be written "user:name" as a record names it — the one way to
// name a user called "root". The answer holds only the part the stores
// compare: Kind "root", Token, or User.
func ParseAuditActor(s string) (AuditActorRecord, error) {
	if s == "root" {
		return AuditActorRecord{Kind: "root"}, nil
	}
	if id, err := ParseUUID("actor", s); err == nil {
		return AuditActorRecord{Kind: "token", Token: id}, nil
	}
	name, err := ParseUsername(strings.TrimPrefix(s, "user:"))
	if err != nil {
		return AuditActorRecord{}, invalid("actor", "must be root, a username or an API token's id")
	}
	return AuditActorRecord{Kind: "user", User: name}, nil
}
