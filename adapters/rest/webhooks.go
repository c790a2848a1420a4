package rest

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/adapters/httpedge"
)

// WithWebhooks serves operators' webhook subscriptions under
// /api/v1/admin/webhooks: create, list, get, change (rotating the
// secret), delete, the delivery log and a test event. Every route needs
// webhooks:write, reads included: a subscription reveals where events go.
func WithWebhooks(w ports.WebhookService) Option {
	return func(x *extensions) { x.webhooks = w }
}

func (s *server) addWebhookRoutes(admin httpedge.AddRoute) {
	if s.ext.webhooks == nil {
		return
	}
	a := "/webhooks"
	admin(http.MethodPost, a, s.createWebhook)
	admin(http.MethodGet, a, s.listWebhooks)
	admin(http.MethodGet, a+"/:id", s.getWebhook)
	admin(http.MethodPatch, a+"/:id", s.changeWebhook)
	admin(http.MethodDelete, a+"/:id", s.deleteWebhook)
	admin(http.MethodGet, a+"/:id/deliveries", s.webhookDeliveries)
	admin(http.MethodPost, a+"/:id/test", s.testWebhook)
}

type webhookView struct {
	ID             string   `json:"id"`
	URL            string   `json:"url"`
	EventTypes     []string `json:"event_types"`
	Enabled        bool     `json:"enabled"`
	DisabledReason *string  `json:"disabled_reason"`
	FailingSince   *string  `json:"failing_since"`
	// PreviousSecretUntil is when the secret a rotation replaced stops
	// signing; the secret itself is never shown again.
	PreviousSecretUntil *string `json:"previous_secret_until"`
	CreatedAt           string  `json:"created_at"`
	UpdatedAt           string  `json:"updated_at"`
	// Secret is the signing secret, in the creation's and a rotation's
	// answers only.
	Secret string `json:"secret,omitempty"`
}

func newWebhookView(w domain.WebhookSubscription) webhookView {
	v := webhookView{ID: w.ID().String(), URL: w.URL(), EventTypes: []string{}, Enabled: w.Enabled(),
		DisabledReason: optString(w.DisabledReason()), FailingSince: optTime(w.FailingSince()),
		CreatedAt: timestamp(w.CreatedAt()), UpdatedAt: timestamp(w.UpdatedAt())}
	for _, t := range w.EventTypes() {
		v.EventTypes = append(v.EventTypes, string(t))
	}
	if prev, until := w.PreviousSecret(); prev != "" {
		v.PreviousSecretUntil = optTime(until)
	}
	return v
}

type webhookDeliveryView struct {
	ID             int64   `json:"id"`
	EventID        string  `json:"event_id"`
	EventType      string  `json:"event_type"`
	Status         string  `json:"status"`
	Attempts       int     `json:"attempts"`
	NextAttemptAt  *string `json:"next_attempt_at"`
	LastAttemptAt  *string `json:"last_attempt_at"`
	LastStatusCode *int    `json:"last_status_code"`
	LastError      *string `json:"last_error"`
	CreatedAt      string  `json:"created_at"`
}

func newWebhookDeliveryView(d ports.WebhookDelivery) webhookDeliveryView {
	v := webhookDeliveryView{ID: d.ID, EventID: d.EventID.String(), EventType: string(d.EventType), Status: string(d.Status),
		Attempts: d.Attempts, LastAttemptAt: optTime(d.LastAttemptAt), LastError: optString(d.LastError), CreatedAt: timestamp(d.CreatedAt)}
	if d.Status == ports.DeliveryPending {
		v.NextAttemptAt = optTime(d.NextAttemptAt)
	}
	if d.LastStatusCode != 0 {
		code := d.LastStatusCode
		v.LastStatusCode = &code
	}
	return v
}

type createWebhookBody struct {
	URL        *string   `json:"url"`
	EventTypes *[]string `json:"event_types"`
	Secret     *string   `json:"secret"`
}

type changeWebhookBody struct {
	URL          *string   `json:"url"`
	EventTypes   *[]string `json:"event_types"`
	Enabled      *bool     `json:"enabled"`
	RotateSecret *bool     `json:"rotate_secret"`
	Secret       *string   `json:"secret"`
}

func (s *server) createWebhook(c echo.Context) error {
	var b createWebhookBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	if err := required(has("url", b.URL)); err != nil {
		return err
	}
	cred, err := s.ext.webhooks.CreateWebhook(c.Request().Context(), actorOf(c), ports.NewWebhook{
		URL: *b.URL, EventTypes: deref(b.EventTypes), Secret: deref(b.Secret)})
	if err != nil {
		return err
	}
	v := newWebhookView(cred.Subscription)
	v.Secret = cred.Secret
	return c.JSON(http.StatusCreated, v)
}

func (s *server) listWebhooks(c echo.Context) error {
	list, err := s.ext.webhooks.ListWebhooks(c.Request().Context())
	if err != nil {
		return err
	}
	return itemsOf(c, list, newWebhookView)
}

// webhookID is the path's subscription id; one that does not parse names
// no subscription, answered NOT_FOUND without asking the service.
func webhookID(c echo.Context) (domain.UUID, error) {
	id := pathUUID(c, "id")
	if id.IsZero() {
		return id, fmt.Errorf("webhook: %w", domain.ErrNotFound)
	}
	return id, nil
}

func (s *server) getWebhook(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	w, err := s.ext.webhooks.GetWebhook(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newWebhookView(w))
}

// changeWebhook judges the body before the id, as every change does: a
// bad body is VALIDATION_FAILED whatever the path names.
func (s *server) changeWebhook(c echo.Context) error {
	var b changeWebhookBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	rotate := deref(b.RotateSecret)
	if b.Secret != nil && !rotate {
		return &domain.ValidationError{Field: "secret", Reason: "is set only with rotate_secret: true"}
	}
	change := ports.WebhookChange{URL: b.URL, Enabled: b.Enabled, RotateSecret: rotate, NewSecret: deref(b.Secret)}
	if b.EventTypes != nil {
		// [] is "every type", which the port tells from "unchanged" (nil).
		change.EventTypes = append([]string{}, *b.EventTypes...)
	}
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	cred, err := s.ext.webhooks.ChangeWebhook(c.Request().Context(), actorOf(c), id, change)
	if err != nil {
		return err
	}
	v := newWebhookView(cred.Subscription)
	if rotate {
		v.Secret = cred.Secret
	}
	return c.JSON(http.StatusOK, v)
}

func (s *server) deleteWebhook(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	if err := s.ext.webhooks.DeleteWebhook(c.Request().Context(), actorOf(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *server) webhookDeliveries(c echo.Context) error {
	var limit, after string
	if err := queryParams(c, []queryField{{"limit", &limit}, {"after", &after}}); err != nil {
		return err
	}
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	page, err := s.ext.webhooks.Deliveries(c.Request().Context(), id, limit, after)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newPageView(page.Items, page.Next, newWebhookDeliveryView))
}

type testEventView struct {
	EventID string `json:"event_id"`
}

func (s *server) testWebhook(c echo.Context) error {
	if err := s.acceptEmptyBody(c); err != nil {
		return err
	}
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	eventID, err := s.ext.webhooks.SendTestEvent(c.Request().Context(), actorOf(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, testEventView{EventID: eventID.String()})
}
