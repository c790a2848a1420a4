package console_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// auditLog holds records newest first, read through the real use case
// (application.Audit): it pages by the cursor's seq and keeps the last
// filter asked. The stores' own filtering is tests/contract's.
type auditLog struct {
	recs []ports.AuditEntry
	last ports.AuditFilter
}

func (l *auditLog) ListAudit(_ context.Context, f ports.AuditFilter) ([]ports.AuditEntry, error) {
	l.last = f
	var out []ports.AuditEntry
	for _, e := range l.recs {
		if len(out) < f.Limit && (f.After == nil || e.Seq < f.After.Seq) {
			out = append(out, e)
		}
	}
	return out, nil
}

// add records n changes by root, the newest first; the first holds markup
// in its target and, raw as Postgres hands jsonb back, its before state.
func (l *auditLog) add(t *testing.T, n int) {
	a, err := domain.NewActor(domain.RootPrincipal(), "req-<b>1</b>", "192.0.2.9")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for seq := n; seq > 0; seq-- {
		rec, err := a.Record(at, domain.AuditFirmwareRevoke, "fw-"+strconv.Itoa(seq), nil, map[string]bool{"revoked": true})
		if seq == n {
			rec, err = domain.RehydrateAuditRecord(at, domain.AuditActorRecord{Kind: "root"}, domain.AuditFirmwareRevoke,
				`<img src=x onerror=alert(1)>`, json.RawMessage(`{"note": "<script>alert(1)</script>"}`), nil, "req-<b>1</b>", "192.0.2.9")
		}
		if err != nil {
			t.Fatal(err)
		}
		l.recs = append(l.recs, ports.AuditEntry{Seq: int64(seq), Record: rec})
	}
}

// The audit page shows records escaped, with the filters as a GET form
// and a next-page link keeping them; only an admin sees it, in the nav
// and at its address.
func TestAuditPage(t *testing.T) {
	log := &auditLog{}
	log.add(t, 51)
	e := newAuditEnv(t, map[string]domain.Role{"ada": domain.RoleAdmin, "vic": domain.RoleViewer, "rel": domain.RoleReleaser}, log)
	e.mustSignInAs("ada")
	if nav := e.get("/console/"); !strings.Contains(nav.body, `id="nav-audit"`) {
		t.Error("an admin's nav has no audit log entry")
	}
	page := e.get("/console/audit")
	wantStatus(t, "audit", page, http.StatusOK)
	for _, raw := range []string{"<script>alert", "<img src=x", "<b>1</b>"} {
		if strings.Contains(page.body, raw) {
			t.Errorf("the page holds %q unescaped", raw)
		}
	}
	for _, shown := range []string{"&lt;img src=x onerror=alert(1)&gt;", "&lt;script&gt;alert(1)&lt;/script&gt;", "firmware.revoke",
		"192.0.2.9", `id="audit-51"`, `id="audit-2"`, "{&#34;revoked&#34;:true}"} {
		if !strings.Contains(page.body, shown) {
			t.Errorf("the page does not show %s", shown)
		}
	}
	if strings.Contains(page.body, `id="audit-1"`) {
		t.Error("the first page shows more than 50 records")
	}
	// The filters reach the use case; the next page keeps them.
	q := url.Values{"actor": {"root"}, "action": {"firmware.revoke"}, "since": {"2026-12-01T00:00:00Z"}}
	page = e.get("/console/audit?" + q.Encode())
	wantStatus(t, "filtered", page, http.StatusOK)
	if f := log.last; f.Actor != "root" || f.Action != domain.AuditFirmwareRevoke || f.Since.IsZero() || f.Limit != 51 {
		t.Errorf("the use case was asked %+v", f)
	}
	if !strings.Contains(page.body, `<option value="firmware.revoke" selected>`) {
		t.Error("the action filter is not kept in the form")
	}
	next := auditNext(page.body)
	if next == "" || !strings.Contains(next, "actor=root") || !strings.Contains(next, "action=firmware.revoke") {
		t.Errorf("the next page's link drops the filters: %s", next)
	}
	page = e.get(next)
	wantStatus(t, "next page", page, http.StatusOK)
	if !strings.Contains(page.body, `id="audit-1"`) || strings.Contains(page.body, `id="audit-2"`) || strings.Contains(page.body, `id="audit-next"`) {
		t.Errorf("the second page is not the one record left, without a next link")
	}
	// A filter the use case refuses is shown above the form.
	page = e.get("/console/audit?since=yesterday")
	wantStatus(t, "bad filter", page, http.StatusBadRequest)
	if !strings.Contains(page.body, `role="alert"`) || !strings.Contains(page.body, "since") {
		t.Errorf("a refused filter is not explained")
	}

	for _, who := range []string{"vic", "rel"} {
		e.client = newClient(t)
		e.mustSignInAs(who)
		if nav := e.get("/console/"); strings.Contains(nav.body, `/console/audit`) {
			t.Errorf("%s is shown the audit log in the nav", who)
		}
		page := e.get("/console/audit")
		wantStatus(t, who+" audit", page, http.StatusForbidden)
		// Refused by the route itself, before the use case is asked.
		if !strings.Contains(page.body, "it needs audit:read") {
			t.Errorf("%s was not refused by the page's permission", who)
		}
		if strings.Contains(page.body, "firmware.revoke") {
			t.Errorf("%s's refusal shows records", who)
		}
	}
}

// auditNext is the audit page's "next" link, "" when there is none.
func auditNext(body string) string {
	m := regexp.MustCompile(`<a href="([^"]+)" id="audit-next"`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// A change made in the console is on the audit page at once: who made it
// (the signed-in user), what and on what, its state after, and the
// request it came in; a filter by another actor hides it.
func TestAuditPageShowsConsoleChanges(t *testing.T) {
	e := newAccountsEnv(t, map[string]domain.Role{"ada": domain.RoleAdmin})
	e.mustSignInAs("ada")
	res := e.post("/console/firmwares", url.Values{"csrf": {e.csrf("/console/firmwares")}, "model": {"cam"}, "version": {"2.0.0"},
		"url": {"https://x.example/a"}, "size_bytes": {"1"}, "sha256": {strings.Repeat("ab", 32)}})
	wantStatus(t, "publish", res, http.StatusSeeOther)
	fws, err := e.admin.ListFirmwares(context.Background(), "cam")
	if err != nil || len(fws) != 1 {
		t.Fatalf("published: %v %v", fws, err)
	}
	page := e.get("/console/audit")
	wantStatus(t, "audit", page, http.StatusOK)
	row := regexp.MustCompile(`(?s)<tr id="audit-\d+">.*?</tr>`).FindString(page.body)
	for _, want := range []string{"user:ada", "<code>firmware.publish</code>", fws[0].ID().String(), "2.0.0"} {
		if !strings.Contains(row, want) {
			t.Errorf("the newest record lacks %q: %s", want, row)
		}
	}
	if page := e.get("/console/audit?actor=root"); strings.Contains(page.body, "firmware.publish</code>") {
		t.Error("root's records show ada's change")
	}
}
