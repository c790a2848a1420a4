package console

import (
	"net/http"
	"strings"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// The audit log page: GET /admin/audit's listing with its filters as a
// GET form, one page at a time, for operators holding audit:read (the
// route and the nav entry alike). The console only reads the form; the use
// case judges the filters, as for the API. before and after are shown as
// the JSON text they are, escaped like everything else.

// WithAudit serves the audit log page (/console/audit).
func WithAudit(svc ports.AuditService) Option {
	return func(c *Console) { c.audit = svc }
}

// auditListPage is how many records one page shows.
const auditListPage = "50"

// auditFilters are the page's filters as typed, kept in the form and in
// the next page's link.
type auditFilters struct{ Actor, Target, Action, Since, Until string }

type auditData struct {
	Filters  auditFilters
	Actions  []domain.AuditAction
	Items    []ports.AuditEntry
	Next     string // the next page's link, "" on the last
	Filtered bool
	Error    string // a filter refused, in the API's words
}

func (f auditFilters) link(after string) string {
	return listLink(Prefix+"/audit", map[string]string{"actor": f.Actor, "target": f.Target, "action": f.Action,
		"since": f.Since, "until": f.Until, "after": after})
}

func (c *Console) auditPage(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	v := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	d := auditData{Filters: auditFilters{Actor: v("actor"), Target: v("target"), Action: v("action"), Since: v("since"),
		Until: v("until")}, Actions: domain.AuditActions()}
	d.Filtered = d.Filters != auditFilters{}
	f := d.Filters
	status := http.StatusOK
	page, err := ports.AuditPage{}, httpedge.QueryPairError(r.URL.RawQuery, "") // a filter the parser dropped: refused, as the API does
	if err == nil {
		page, err = c.audit.ListAudit(r.Context(), s.who, ports.AuditQuery{Actor: f.Actor, Target: f.Target, Action: f.Action,
			Since: f.Since, Until: f.Until, Limit: auditListPage, After: q.Get("after")})
	}
	if err != nil {
		var refused bool
		if status, d.Error, refused = refusedFilter(err); !refused {
			c.failErr(w, r, err)
			return
		}
	}
	d.Items = page.Items
	if page.Next != "" {
		d.Next = f.link(page.Next)
	}
	p := c.base(s, "Audit log", "audit")
	p.Data = d
	c.render(w, r, status, "audit", p)
}
