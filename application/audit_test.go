package application_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// auditLog answers n records at one time, newest seq first, and keeps the
// filter it was asked: what the use case made of the query.
type auditLog struct {
	n    int
	last ports.AuditFilter
}

func (l *auditLog) ListAudit(_ context.Context, f ports.AuditFilter) ([]ports.AuditEntry, error) {
	l.last = f
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	rec, err := mustActor(domain.RootPrincipal()).Record(at, domain.AuditFirmwarePublish, "fw", nil, map[string]int{"x": 1})
	if err != nil {
		return nil, err
	}
	var out []ports.AuditEntry
	for seq := int64(l.n); seq > 0 && len(out) < f.Limit; seq-- {
		out = append(out, ports.AuditEntry{Seq: seq, Record: rec})
	}
	return out, nil
}

func mustActor(p domain.Principal) domain.Actor {
	a, err := domain.NewActor(p, "req", "")
	if err != nil {
		panic(err)
	}
	return a
}

// TestListAuditParsesTheQuery: each filter reaches the store parsed; bad
// input is VALIDATION_FAILED naming its field, before any read.
func TestListAuditParsesTheQuery(t *testing.T) {
	log := &auditLog{}
	a, err := application.NewAudit(log)
	if err != nil {
		t.Fatal(err)
	}
	root := domain.RootPrincipal()
	if _, err := a.ListAudit(t.Context(), root, ports.AuditQuery{Actor: "alice", Target: "fw-1", Action: "firmware.revoke",
		Since: "2026-12-01T00:00:00+01:00", Until: "2026-12-02T00:00:00Z"}); err != nil {
		t.Fatal(err)
	}
	f := log.last
	if f.Actor != "alice" || f.Target != "fw-1" || f.Action != domain.AuditFirmwareRevoke || f.Limit != 51 ||
		!f.Since.Equal(time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)) || !f.Until.Equal(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)) || f.After != nil {
		t.Errorf("filter %+v", f)
	}
	// A target of 256 characters is the longest asked for; 257 is refused.
	long := strings.Repeat("t", 256)
	if _, err := a.ListAudit(t.Context(), root, ports.AuditQuery{Target: long}); err != nil || log.last.Target != long {
		t.Errorf("a 256-character target: %v (store asked for %d characters)", err, len(log.last.Target))
	}
	for name, c := range map[string]struct {
		q     ports.AuditQuery
		field string
	}{
		"target too long":    {ports.AuditQuery{Target: long + "t"}, "target"},
		"unknown action":     {ports.AuditQuery{Action: "firmware.delete"}, "action"},
		"actor not a name":   {ports.AuditQuery{Actor: "Alice Smith"}, "actor"},
		"since not RFC 3339": {ports.AuditQuery{Since: "2026-12-01"}, "since"},
		"until not a time":   {ports.AuditQuery{Until: "yesterday"}, "until"},
		"until before since": {ports.AuditQuery{Since: "2026-12-02T00:00:00Z", Until: "2026-12-01T00:00:00Z"}, "until"},
		"until equals since": {ports.AuditQuery{Since: "2026-12-02T00:00:00Z", Until: "2026-12-02T00:00:00Z"}, "until"},
		"limit zero":         {ports.AuditQuery{Limit: "0"}, "limit"},
		"limit too large":    {ports.AuditQuery{Limit: "501"}, "limit"},
		"forged cursor":      {ports.AuditQuery{After: "bm90LWEtY3Vyc29y"}, "after"},
		"cursor of seq 0":    {ports.AuditQuery{After: "MTc2NDU0NzIwMDAwMDAwMHww"}, "after"},
	} {
		log.last = ports.AuditFilter{}
		_, err := a.ListAudit(t.Context(), root, c.q)
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || log.last.Limit != 0 {
			t.Errorf("%s: %v (store asked: %v), want a validation error on %s before any read", name, err, log.last.Limit != 0, c.field)
		}
	}
}

// TestListAuditPages: a page is at most the limit, and its next cursor
// continues after its last record; the last page has none.
func TestListAuditPages(t *testing.T) {
	log := &auditLog{n: 5}
	a, err := application.NewAudit(log)
	if err != nil {
		t.Fatal(err)
	}
	page, err := a.ListAudit(t.Context(), domain.RootPrincipal(), ports.AuditQuery{Limit: "2"})
	if err != nil || len(page.Items) != 2 || page.Next == "" {
		t.Fatalf("first page: %d items, next %q, %v", len(page.Items), page.Next, err)
	}
	if _, err := a.ListAudit(t.Context(), domain.RootPrincipal(), ports.AuditQuery{Limit: "2", After: page.Next}); err != nil {
		t.Fatal(err)
	}
	if c := log.last.After; c == nil || c.Seq != 4 || !c.At.Equal(page.Items[1].Record.At()) {
		t.Errorf("the next page continues after %+v, want the first page's last record (seq 4)", c)
	}
	page, err = a.ListAudit(t.Context(), domain.RootPrincipal(), ports.AuditQuery{Limit: "5"})
	if err != nil || len(page.Items) != 5 || page.Next != "" {
		t.Errorf("a page holding every record: %d items, next %q, %v", len(page.Items), page.Next, err)
	}
}

// TestListAuditNeedsAuditRead: only a principal holding audit:read reads
// the log; read alone is not enough.
func TestListAuditNeedsAuditRead(t *testing.T) {
	log := &auditLog{n: 1}
	a, err := application.NewAudit(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range domain.Roles() {
		u, err := domain.NewUser("u-"+string(role), string(role), "correct horse battery", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.ListAudit(t.Context(), domain.UserPrincipal(u), ports.AuditQuery{})
		if allowed := role == domain.RoleAdmin; allowed != (err == nil) || !allowed && !errors.Is(err, domain.ErrForbidden) {
			t.Errorf("%s: %v", role, err)
		}
	}
	if _, err := a.ListAudit(t.Context(), domain.Principal{}, ports.AuditQuery{}); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("nobody: %v, want FORBIDDEN", err)
	}
}
