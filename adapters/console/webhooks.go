package console

import (
	"net/http"
	"net/url"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// WithWebhooks serves the webhook subscriptions' pages (/console/webhooks)
// to operators who hold webhooks:write: reading them too, as the API's
// routes, since a subscription reveals where events go.
func WithWebhooks(svc ports.WebhookService) Option {
	return func(c *Console) { c.webhooks = svc }
}

func (c *Console) webhookRoutes(m *http.ServeMux) {
	if c.webhooks == nil {
		return
	}
	p, perm := Prefix, domain.PermWebhooksWrite
	m.Handle(p+"/webhooks", methods(c, c.authed(perm, c.webhooksPage), c.authed(perm, c.createWebhook)))
	m.Handle(p+"/webhooks/{id}", methods(c, c.authed(perm, c.webhookPage), c.authed(perm, c.changeWebhook)))
	m.Handle(p+"/webhooks/{id}/delete", methods(c, c.authed(perm, c.confirmDeleteWebhook), c.authed(perm, c.deleteWebhook)))
}

// webhookFlashes are the webhook pages' messages after a change.
var webhookFlashes = map[string]string{
	"enable":  "Subscription enabled.",
	"disable": "Subscription disabled: nothing is sent to it until it is enabled.",
	"test":    "Test event queued: it appears in the delivery log below.",
	"deleted": "Subscription deleted.",
}

type webhooksData struct {
	Items []domain.WebhookSubscription
	Types []domain.EventType
	Form  webhookForm
	// Created is the subscription just made, with its secret, shown once.
	Created *ports.WebhookCredentials
}

type webhookForm struct {
	Values map[string]string
	Types  map[string]bool
	Errors map[string]string
	Error  string
}

func (c *Console) webhooksPage(w http.ResponseWriter, r *http.Request, s session) {
	c.showWebhooks(w, r, s, http.StatusOK, webhookForm{}, nil)
}

func (c *Console) showWebhooks(w http.ResponseWriter, r *http.Request, s session, status int, form webhookForm, created *ports.WebhookCredentials) {
	list, err := c.webhooks.ListWebhooks(r.Context())
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	p := c.base(s, "Webhooks", "webhooks")
	p.Flash = webhookFlashes[r.URL.Query().Get("done")]
	p.Data = webhooksData{Items: list, Types: domain.EventTypes(), Form: form, Created: created}
	c.render(w, r, status, "webhooks", p)
}

// createWebhook answers with the list and the new secret on the page
// itself, never in a URL or a redirect: it is shown this once.
func (c *Console) createWebhook(w http.ResponseWriter, r *http.Request, s session) {
	form := webhookForm{Values: map[string]string{"url": r.PostFormValue("url")}, Types: map[string]bool{}, Errors: map[string]string{}}
	types := r.PostForm["event_types"]
	for _, t := range types {
		form.Types[t] = true
	}
	cred, err := c.webhooks.CreateWebhook(r.Context(), s.actor, ports.NewWebhook{URL: r.PostFormValue("url"), EventTypes: types,
		Secret: r.PostFormValue("secret")})
	if err != nil {
		status := c.fieldError(r, err, form.Errors, &form.Error, "url", "event_types", "secret")
		c.showWebhooks(w, r, s, status, form, nil)
		return
	}
	c.showWebhooks(w, r, s, http.StatusCreated, webhookForm{}, &cred)
}

type webhookData struct {
	Sub        domain.WebhookSubscription
	Deliveries ports.DeliveryPage
	// Secret is a rotation's new secret, shown once.
	Secret string
	Error  string
}

func (c *Console) webhookPage(w http.ResponseWriter, r *http.Request, s session) {
	c.showWebhook(w, r, s, http.StatusOK, webhookData{})
}

func (c *Console) showWebhook(w http.ResponseWriter, r *http.Request, s session, status int, d webhookData) {
	id := pathUUID(r, "id")
	// A cursor the parser dropped would show the first page: refused, as
	// the API does.
	err := httpedge.QueryPairError(r.URL.RawQuery, "")
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if d.Sub, err = c.webhooks.GetWebhook(r.Context(), id); err != nil {
		c.failErr(w, r, err)
		return
	}
	if d.Deliveries, err = c.webhooks.Deliveries(r.Context(), id, "50", r.URL.Query().Get("after")); err != nil {
		c.failErr(w, r, err)
		return
	}
	p := c.base(s, "Webhook", "webhooks")
	p.Flash = webhookFlashes[r.URL.Query().Get("done")]
	p.Data = d
	c.render(w, r, status, "webhook", p)
}

// changeWebhook does one of the page's actions: enable, disable, rotate
// the secret (shown on the answer, once) or send a test event.
func (c *Console) changeWebhook(w http.ResponseWriter, r *http.Request, s session) {
	id := pathUUID(r, "id")
	action := r.PostFormValue("action")
	var err error
	switch action {
	case "enable", "disable":
		on := action == "enable"
		_, err = c.webhooks.ChangeWebhook(r.Context(), s.actor, id, ports.WebhookChange{Enabled: &on})
	case "rotate":
		var cred ports.WebhookCredentials
		if cred, err = c.webhooks.ChangeWebhook(r.Context(), s.actor, id, ports.WebhookChange{RotateSecret: true}); err == nil {
			c.showWebhook(w, r, s, http.StatusOK, webhookData{Secret: cred.Secret})
			return
		}
	case "test":
		_, err = c.webhooks.SendTestEvent(r.Context(), s.actor, id)
	default:
		c.fail(w, r, http.StatusBadRequest, "This form asks for no known action.")
		return
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/webhooks/"+url.PathEscape(id.String())+"?done="+action, http.StatusSeeOther)
}

func (c *Console) confirmDeleteWebhook(w http.ResponseWriter, r *http.Request, s session) {
	sub, err := c.webhooks.GetWebhook(r.Context(), pathUUID(r, "id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	back := Prefix + "/webhooks/" + url.PathEscape(sub.ID().String())
	p := c.base(s, "Confirm", "webhooks")
	p.Data = confirmData{
		Question: "Delete the subscription of " + sub.URL() + "?",
		Detail:   "Nothing more is sent to it, and its delivery log is deleted with it. This cannot be undone.",
		Action:   back + "/delete", Fields: map[string]string{}, Button: "Delete subscription", Danger: true, Back: back,
	}
	c.render(w, r, http.StatusOK, "confirm", p)
}

func (c *Console) deleteWebhook(w http.ResponseWriter, r *http.Request, s session) {
	if err := c.webhooks.DeleteWebhook(r.Context(), s.actor, pathUUID(r, "id")); err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/webhooks?done=deleted", http.StatusSeeOther)
}
