package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

func mustActor(t *testing.T, p domain.Principal, requestID, source string) domain.Actor {
	t.Helper()
	a, err := domain.NewActor(p, requestID, source)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Every audited action's name reads back as itself; any other name is a
// validation error.
func TestParseAuditAction(t *testing.T) {
	for _, a := range domain.AuditActions() {
		if got, err := domain.ParseAuditAction(string(a)); err != nil || got != a {
			t.Errorf("ParseAuditAction(%q) = %q, %v", a, got, err)
		}
	}
	for _, s := range []string{"", "device.explode", "Device.Register"} {
		_, err := domain.ParseAuditAction(s)
		wantField(t, "action "+s, err, "action")
	}
}

// Nobody acting records nothing: the zero principal cannot make an actor,
// and the zero actor cannot make a record.
func TestNobodyActs(t *testing.T) {
	if _, err := domain.NewActor(domain.Principal{}, "req", "10.0.0.1"); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("NewActor(nobody): %v, want ErrUnauthorized", err)
	}
	if _, err := (domain.Actor{}).Record(t0, domain.AuditUserCreate, "alice", nil, nil); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("the zero actor's record: %v, want ErrUnauthorized", err)
	}
}

// A record names who did what to what, when (in UTC, to the microsecond),
// from which request and address; before and after are stored as JSON,
// a nil or null state as none.
func TestActorRecord(t *testing.T) {
	a := mustActor(t, domain.RootPrincipal(), "req-1", "192.0.2.7")
	if !a.Principal().IsRoot() {
		t.Fatalf("actor's principal %s, want root", a.Principal())
	}
	at := t0.Add(1500 * time.Nanosecond)
	r, err := a.Record(at, domain.AuditWebhookChange, "wh-1", map[string]any{"enabled": true}, (*struct{})(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !r.At().Equal(t0.Add(time.Microsecond)) || r.At().Location() != time.UTC || r.Actor() != "root" ||
		r.Action() != domain.AuditWebhookChange || r.Target() != "wh-1" || r.RequestID() != "req-1" || r.Source() != "192.0.2.7" {
		t.Errorf("record at %v by %s: %s on %s, request %q from %q", r.At(), r.Actor(), r.Action(), r.Target(), r.RequestID(), r.Source())
	}
	if string(r.Before()) != `{"enabled":true}` || r.After() != nil {
		t.Errorf("before %s, after %s; want the JSON state, and none for a null one", r.Before(), r.After())
	}
	if r.IsZero() {
		t.Error("a record is zero")
	}
	if r, err := a.Record(at, domain.AuditUserCreate, "alice", nil, struct{ Role string }{"admin"}); err != nil ||
		r.Before() != nil || string(r.After()) != `{"Role":"admin"}` {
		t.Errorf("a creation's record: %v, before %s, after %s", err, r.Before(), r.After())
	}

	for name, rec := range map[string]func() (domain.AuditRecord, error){
		"an unknown action": func() (domain.AuditRecord, error) { return a.Record(at, "user.promote", "alice", nil, nil) },
		"no target":         func() (domain.AuditRecord, error) { return a.Record(at, domain.AuditUserRemove, "", nil, nil) },
		"a before that is no JSON": func() (domain.AuditRecord, error) {
			return a.Record(at, domain.AuditUserRemove, "alice", make(chan int), nil)
		},
		"an after that is no JSON": func() (domain.AuditRecord, error) {
			return a.Record(at, domain.AuditUserCreate, "alice", nil, func() {})
		},
	} {
		if r, err := rec(); err == nil || !r.IsZero() {
			t.Errorf("%s: %v, %+v; want an error and no record", name, err, r)
		}
	}
}

// What a request writes into a record through its headers is bounded.
func TestActorClipsRequestFields(t *testing.T) {
	a := mustActor(t, domain.RootPrincipal(), strings.Repeat("r", 500), strings.Repeat("s", 129))
	r, err := a.Record(t0, domain.AuditUserRemove, "alice", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.RequestID() != strings.Repeat("r", 128) || r.Source() != strings.Repeat("s", 128) {
		t.Errorf("request id of %d bytes, source of %d, want 128 each", len(r.RequestID()), len(r.Source()))
	}
}

// A record stores its actor as a kind, a user and a token, and comes back
// from the store naming the same actor.
func TestAuditActorRecordRoundTrip(t *testing.T) {
	owner, err := domain.NewUser("audit-owner", "admin", "correct horse battery", t0)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := domain.NewAPIToken(idOf("audit-token"), domain.UserPrincipal(owner), "ci",
		domain.RolePermissions(domain.RoleViewer), t0.Add(24*time.Hour), t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p     domain.Principal
		want  domain.AuditActorRecord
		actor string
	}{
		{domain.RootPrincipal(), domain.AuditActorRecord{Kind: "root"}, "root"},
		{domain.UserPrincipal(owner), domain.AuditActorRecord{Kind: "user", User: "audit-owner"}, "user:audit-owner"},
		{domain.TokenPrincipal(tok, owner), domain.AuditActorRecord{Kind: "token", User: "audit-owner", Token: idOf("audit-token")},
			"token:" + idOf("audit-token").String() + "(audit-owner)"},
	} {
		r, err := mustActor(t, c.p, "req", "src").Record(t1, domain.AuditTokenCreate, "t", nil, map[string]int{"n": 1})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.ActorRecord(); got != c.want {
			t.Errorf("%s: actor record %+v, want %+v", c.p, got, c.want)
		}
		back, err := domain.RehydrateAuditRecord(r.At(), r.ActorRecord(), r.Action(), r.Target(), r.Before(), r.After(), r.RequestID(), r.Source())
		if err != nil {
			t.Fatal(err)
		}
		if back.Actor() != c.actor || back.ActorRecord() != c.want || !back.At().Equal(r.At()) || back.Action() != r.Action() ||
			back.Target() != "t" || string(back.After()) != `{"n":1}` || back.RequestID() != "req" || back.Source() != "src" {
			t.Errorf("%s: rehydrated %+v, want %+v", c.p, back, r)
		}
	}
	if _, err := domain.RehydrateAuditRecord(t0, domain.AuditActorRecord{Kind: "robot"}, domain.AuditUserCreate, "x", nil, nil, "", ""); err == nil {
		t.Error("a stored record of an unknown actor kind")
	}
	if _, err := domain.RehydrateAuditRecord(t0, domain.AuditActorRecord{Kind: "root"}, "user.promote", "x", nil, nil, "", ""); err == nil {
		t.Error("a stored record of an unknown action")
	}
}

// The zero record records nothing; one that only announces events still
// has something to write.
func TestAuditRecordIsZero(t *testing.T) {
	var r domain.AuditRecord
	if !r.IsZero() {
		t.Fatal("the zero record is not zero")
	}
	a, err := domain.NewAnnouncement(domain.EventDeviceRegistered, t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Announcing(a).IsZero() {
		t.Error("a record announcing an event is zero")
	}
	if string(a.Payload()) != "{}" {
		t.Errorf("a nil payload is %s, want {}", a.Payload())
	}
}

// An audit listing's actor filter: root, a token's id, a username, or
// "user:" and a username (the one way to name a user called root).
func TestParseAuditActor(t *testing.T) {
	id := idOf("audit-filter")
	for s, want := range map[string]domain.AuditActorRecord{
		"root":      {Kind: "root"},
		id.String(): {Kind: "token", Token: id},
		"alice":     {Kind: "user", User: "alice"},
		"user:root": {Kind: "user", User: "root"},
	} {
		if got, err := domain.ParseAuditActor(s); err != nil || got != want {
			t.Errorf("ParseAuditActor(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "Not A Name", "user:"} {
		_, err := domain.ParseAuditActor(s)
		wantField(t, "actor "+s, err, "actor")
	}
}
