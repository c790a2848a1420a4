package contract

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// RunAuditLogs runs the contract of ports.AuditLog: records come back
// newest first by (at, seq), whole (actor, before and after, request and
// source); each filter selects what docs/DOMAIN.md says (an actor as root,
// a token or a user with all their tokens; a target; an action; Since <=
// at < Until); the cursor continues after a position, across records of
// the same microsecond, without a skip or a repeat; the limit bounds a
// page. newLog returns an empty log and the firmware store of the same
// database: each record is written as the stores write them, in the
// transaction of a change (a firmware's creation, or for a revoke an
// Update, whose audit func makes the record from before and after).
func RunAuditLogs(t *testing.T, newLog func(t *testing.T) (ports.AuditLog, ports.FirmwareRepository)) {
	t.Parallel()
	log, firmwares := newLog(t)
	write := func(t *testing.T, i int, rec domain.AuditRecord) {
		t.Helper()
		f, err := domain.NewFirmware(domain.UUIDOf(uuid.New()), repoSpec("audit-cam", fmt.Sprintf("1.0.%d", i)), rec.At())
		if err != nil {
			t.Fatal(err)
		}
		if rec.Action() != domain.AuditFirmwareRevoke {
			if err := firmwares.Create(t.Context(), f, rec); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := firmwares.Create(t.Context(), f, domain.AuditRecord{}); err != nil { // the zero record: none
			t.Fatal(err)
		}
		_, err = firmwares.Update(t.Context(), f.ID(), func(x *domain.Firmware) error { x.Revoke(rec.At()); return nil },
			func(before, after domain.Firmware) (domain.AuditRecord, error) {
				if before.Revoked() || !after.Revoked() {
					t.Errorf("the audit func got before revoked %t, after revoked %t", before.Revoked(), after.Revoked())
				}
				return rec, nil
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 123456000, time.UTC)
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	alice, err := domain.NewUser("alice", string(domain.RoleAdmin), "correct horse battery", t0)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := domain.NewUser("bob", string(domain.RoleReleaser), "correct horse battery", t0)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := domain.NewAPIToken(domain.UUIDOf([16]byte{0xa1, 9}), domain.UserPrincipal(alice), "ci",
		domain.PermissionsOf(domain.PermUsersWrite), t0.Add(time.Hour), t0)
	if err != nil {
		t.Fatal(err)
	}
	actor := func(p domain.Principal, req string) domain.Actor {
		a, err := domain.NewActor(p, req, "192.0.2.7")
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	root, aliceA, tokA, bobA := actor(domain.RootPrincipal(), "r-root"), actor(domain.UserPrincipal(alice), "r-alice"),
		actor(domain.TokenPrincipal(tok, alice), "r-token"), actor(domain.UserPrincipal(bob), "r-bob")
	type fw struct {
		Version string `json:"version"`
		Revoked bool   `json:"revoked"`
	}
	// In write order; three share t1, so only seq orders them.
	specs := []struct {
		a             domain.Actor
		at            time.Time
		action        domain.AuditAction
		target        string
		before, after any
	}{
		{root, t0, domain.AuditFirmwarePublish, "fw-1", nil, fw{"1.0.0", false}},
		{aliceA, t1, domain.AuditUserCreate, "bob", nil, map[string]string{"role": "releaser"}},
		{tokA, t1, domain.AuditTokenCreate, "tok-2", nil, map[string]string{"name": "deploy"}},
		{root, t1, domain.AuditRolloutStart, "ro-1", nil, map[string]int{"percentage": 10}},
		{bobA, t2, domain.AuditFirmwareRevoke, "fw-1", fw{"1.0.0", false}, fw{"1.0.0", true}},
	}
	recs := make([]domain.AuditRecord, len(specs))
	for i, s := range specs {
		if recs[i], err = s.a.Record(s.at, s.action, s.target, s.before, s.after); err != nil {
			t.Fatal(err)
		}
		write(t, i, recs[i])
	}
	// The listing names records by their index in specs (r0..r4).
	names := func(es []ports.AuditEntry) string {
		var out []string
		for _, e := range es {
			i := slices.IndexFunc(recs, func(r domain.AuditRecord) bool {
				return r.Action() == e.Record.Action() && r.Target() == e.Record.Target() && r.At().Equal(e.Record.At())
			})
			out = append(out, fmt.Sprintf("r%d", i))
		}
		return fmt.Sprint(out)
	}
	list := func(t *testing.T, f ports.AuditFilter) []ports.AuditEntry {
		t.Helper()
		es, err := log.ListAudit(ctx, f)
		if err != nil {
			t.Fatalf("ListAudit(%+v): %v", f, err)
		}
		return es
	}

	t.Run("newest first by time then seq, whole", func(t *testing.T) {
		es := list(t, ports.AuditFilter{})
		if got := names(es); got != "[r4 r3 r2 r1 r0]" {
			t.Fatalf("order %s, want [r4 r3 r2 r1 r0]", got)
		}
		for i := 1; i < len(es); i++ {
			if es[i-1].Record.At().Equal(es[i].Record.At()) && es[i-1].Seq <= es[i].Seq {
				t.Errorf("records of the same time not by seq descending: %d then %d", es[i-1].Seq, es[i].Seq)
			}
		}
		r := es[0].Record
		if r.Actor() != "user:bob" || !r.At().Equal(t2) || r.RequestID() != "r-bob" || r.Source() != "192.0.2.7" {
			t.Errorf("record read back: %s %s %s %s", r.Actor(), r.At(), r.RequestID(), r.Source())
		}
		if !jsonEqual(t, r.After(), `{"version":"1.0.0","revoked":true}`) || !jsonEqual(t, r.Before(), `{"version":"1.0.0","revoked":false}`) {
			t.Errorf("before %s after %s", r.Before(), r.After())
		}
		if first := es[4].Record; first.Before() != nil || first.Actor() != "root" || first.ActorRecord().Kind != "root" {
			t.Errorf("a creation's record: before %q, actor %s", first.Before(), first.Actor())
		}
		if tr := es[2].Record; tr.Actor() != domain.TokenPrincipal(tok, alice).String() || tr.ActorRecord().Token != tok.ID() {
			t.Errorf("a token's record names %s", tr.Actor())
		}
	})

	t.Run("filters", func(t *testing.T) {
		for _, c := range []struct {
			f    ports.AuditFilter
			want string
		}{
			{ports.AuditFilter{Actor: "root"}, "[r3 r0]"},
			{ports.AuditFilter{Actor: "alice"}, "[r2 r1]"}, // in person and through her token
			{ports.AuditFilter{Actor: "user:alice"}, "[r2 r1]"},
			{ports.AuditFilter{Actor: tok.ID().String()}, "[r2]"},
			{ports.AuditFilter{Actor: "bob"}, "[r4]"},
			{ports.AuditFilter{Actor: "carol"}, "[]"},
			{ports.AuditFilter{Target: "fw-1"}, "[r4 r0]"},
			{ports.AuditFilter{Target: "bob"}, "[r1]"},
			{ports.AuditFilter{Action: domain.AuditFirmwareRevoke}, "[r4]"},
			{ports.AuditFilter{Target: "fw-1", Actor: "root"}, "[r0]"},
			{ports.AuditFilter{Since: t1}, "[r4 r3 r2 r1]"},
			{ports.AuditFilter{Until: t1}, "[r0]"},
			{ports.AuditFilter{Since: t1, Until: t2}, "[r3 r2 r1]"},
			{ports.AuditFilter{Since: t2.Add(time.Microsecond)}, "[]"},
			// Bounds finer than the stored microseconds count at microseconds,
			// as Postgres reads them: t1 and 400ns is t1.
			{ports.AuditFilter{Since: t1.Add(400 * time.Nanosecond)}, "[r4 r3 r2 r1]"},
			{ports.AuditFilter{Until: t1.Add(400 * time.Nanosecond)}, "[r0]"},
		} {
			if got := names(list(t, c.f)); got != c.want {
				t.Errorf("%+v: %s, want %s", c.f, got, c.want)
			}
		}
	})

	t.Run("cursor pages across equal times, limit bounds", func(t *testing.T) {
		var pages []string
		var after *ports.AuditCursor
		for range 5 {
			es := list(t, ports.AuditFilter{Limit: 2, After: after})
			pages = append(pages, names(es))
			if len(es) < 2 {
				break
			}
			last := es[len(es)-1]
			after = &ports.AuditCursor{At: last.Record.At(), Seq: last.Seq}
		}
		if got := fmt.Sprint(pages); got != "[[r4 r3] [r2 r1] [r0]]" {
			t.Errorf("pages %s, want [[r4 r3] [r2 r1] [r0]]", got)
		}
		// A cursor inside the records of t1 continues within them.
		es := list(t, ports.AuditFilter{})
		mid := es[2] // r2, the second of t1 newest first
		if got := names(list(t, ports.AuditFilter{After: &ports.AuditCursor{At: mid.Record.At(), Seq: mid.Seq}})); got != "[r1 r0]" {
			t.Errorf("after r2: %s, want [r1 r0]", got)
		}
		// ... also when the cursor's time carries nanoseconds past r2's microsecond.
		if got := names(list(t, ports.AuditFilter{After: &ports.AuditCursor{At: mid.Record.At().Add(400 * time.Nanosecond), Seq: mid.Seq}})); got != "[r1 r0]" {
			t.Errorf("after r2, the cursor at nanoseconds: %s, want [r1 r0]", got)
		}
		if got := names(list(t, ports.AuditFilter{Limit: 1, Actor: "root", After: &ports.AuditCursor{At: t2, Seq: es[0].Seq}})); got != "[r3]" {
			t.Errorf("root after r4, limit 1: %s, want [r3]", got)
		}
	})
}

// jsonEqual compares JSON by value: Postgres keeps jsonb in its own
// key order and spacing.
func jsonEqual(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(a, b)
}
