package rest

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/adapters/httpedge"
)

// WithAudit serves the audit log's listing (GET /api/v1/admin/audit),
// for principals holding audit:read.
func WithAudit(a ports.AuditService) Option {
	return func(x *extensions) { x.audit = a }
}

func (s *server) addAuditRoutes(admin httpedge.AddRoute) {
	if s.ext.audit == nil {
		return
	}
	admin(http.MethodGet, "/audit", s.listAudit)
}

// auditRecordView is one record as the API answers it. before and after
// are the JSON the record holds (null: none), never re-encoded as text.
type auditRecordView struct {
	Seq       int64           `json:"seq"`
	At        string          `json:"at"`
	Actor     string          `json:"actor"`
	ActorKind string          `json:"actor_kind"`
	Action    string          `json:"action"`
	Target    string          `json:"target"`
	Before    json.RawMessage `json:"before"`
	After     json.RawMessage `json:"after"`
	RequestID string          `json:"request_id"`
	Source    string          `json:"source"`
}

func newAuditRecordView(e ports.AuditEntry) auditRecordView {
	r := e.Record
	v := auditRecordView{Seq: e.Seq, At: timestamp(r.At()), Actor: r.Actor(), ActorKind: r.ActorRecord().Kind,
		Action: string(r.Action()), Target: r.Target(), Before: r.Before(), After: r.After(),
		RequestID: r.RequestID(), Source: r.Source()}
	if v.Before == nil {
		v.Before = json.RawMessage("null")
	}
	if v.After == nil {
		v.After = json.RawMessage("null")
	}
	return v
}

func (s *server) listAudit(c echo.Context) error {
	var q ports.AuditQuery
	if err := queryParams(c, []queryField{
		{"actor", &q.Actor}, {"target", &q.Target}, {"action", &q.Action}, {"since", &q.Since}, {"until", &q.Until},
		{"limit", &q.Limit}, {"after", &q.After},
	}); err != nil {
		return err
	}
	page, err := s.ext.audit.ListAudit(c.Request().Context(), principalOf(c), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newPageView(page.Items, page.Next, newAuditRecordView))
}
