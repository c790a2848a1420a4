// Package console is the operators' web console, served by otad at
// /console/: a driving adapter beside the JSON API that renders
// server-side HTML pages (html/template, embedded with the stylesheet and
// a small script: the live refresh and the upload's progress) and calls
// the same use cases (ports.AdminService, ports.FleetService, and
// ports.ArtifactService for uploads). It holds no rules of its own: what the API would
// refuse, the console shows refused, with the API's words.
//
// Operators sign in with their username and password (WithAccounts), at
// the identity provider (WithOIDC, single sign-on), or with the admin token, the break-glass root; the session is a signed
// cookie (see sessions), every state-changing form carries a CSRF token,
// every page and form requires the permission its API route requires
// (routes), and every change (widen, pause, resume, cancel, revoke) goes
// through a confirmation page first.
package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Prefix is where the console is served.
const Prefix = "/console"

// Defaults of Config.
const (
	DefaultSessionTTL   = 8 * time.Hour
	DefaultRefreshEvery = 5 * time.Second
)

// maxFormBytes bounds a form body, as the API bounds a JSON body.
const maxFormBytes = 64 << 10

// Config tunes the console. Zero fields take their defaults.
type Config struct {
	// AdminToken is OTA_ADMIN_TOKEN, the break-glass root's credential.
	// Empty: nobody signs in with a token.
	AdminToken string
	// SessionKey is OTA_CONSOLE_SESSION_KEY, the key users' sessions are
	// signed under. Empty: a key derived from AdminToken.
	SessionKey string
	// SecureCookies makes every cookie Secure (the public URL is https);
	// otherwise only those set over TLS are.
	SecureCookies bool
	// SignInLimiter is the budget of sign-in attempts per username and per
	// client address (httpedge.SpendSignIn; nil: unlimited), the one the
	// API's password route spends too (rest.WithSignInLimiter).
	SignInLimiter ports.RateLimiter
	// SessionTTL is how long a sign-in lasts (DefaultSessionTTL).
	SessionTTL time.Duration
	// RefreshEvery is how often the progress bars refresh themselves
	// (DefaultRefreshEvery).
	RefreshEvery time.Duration
}

// Console serves the console's pages (an http.Handler for Prefix).
type Console struct {
	cfg      Config
	admin    ports.AdminService
	fleet    ports.FleetService
	clock    ports.Clock
	logger   *slog.Logger
	sessions *sessions
	pages    map[string]*template.Template
	mux      *http.ServeMux
	static   http.Handler
	rows     rowsCache // the live refresh's rollout listing
	// artifacts uploads images (WithArtifacts); nil: publish by URL only.
	artifacts ports.ArtifactService
	// accounts signs users in (WithAccounts); nil: the admin token only.
	accounts ports.AccountService
	// oidc signs users in at the identity provider (WithOIDC); nil: no
	// single sign-on.
	oidc *OIDC
	// audit reads the audit log (WithAudit); nil: no audit page.
	audit ports.AuditService
	// webhooks manages webhook subscriptions (WithWebhooks); nil: no
	// webhook pages.
	webhooks ports.WebhookService
}

// WithAccounts lets operators sign in with their username and password;
// each request of their session re-reads their account through it.
func WithAccounts(svc ports.AccountService) Option {
	return func(c *Console) { c.accounts = svc }
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New builds the console on the operators' use cases. logger may be nil.
func New(cfg Config, admin ports.AdminService, fleet ports.FleetService, clock ports.Clock, logger *slog.Logger, opts ...Option) (*Console, error) {
	if admin == nil || fleet == nil || clock == nil {
		return nil, errors.New("console: the admin and fleet services and a clock are required")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.RefreshEvery <= 0 {
		cfg.RefreshEvery = DefaultRefreshEvery
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SignInLimiter == nil {
		cfg.SignInLimiter = ports.Unlimited{}
	}
	c := &Console{
		cfg: cfg, admin: admin, fleet: fleet, clock: clock, logger: logger,
		sessions: newSessions(cfg.AdminToken, cfg.SessionKey, cfg.SecureCookies, cfg.SessionTTL, clock),
		pages:    map[string]*template.Template{},
	}
	for _, o := range opts {
		o(c)
	}
	if c.oidc != nil && (c.accounts == nil || c.sessions.userKey == nil) {
		return nil, errors.New("console: single sign-on needs accounts and a key for users' sessions")
	}
	for _, name := range []string{"signin", "fleet", "rollouts", "rollout", "confirm", "firmwares", "artifact", "device", "audit", "error", "webhooks", "webhook"} {
		t, err := template.New(name).Funcs(c.funcs()).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parsing %s: %w", name, err)
		}
		c.pages[name] = t
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	c.static = http.StripPrefix(Prefix+"/static/", http.FileServerFS(static))
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	p := Prefix
	m.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, p+"/", http.StatusMovedPermanently)
	})
	m.Handle(p+"/static/", methods(c, c.serveStatic, nil))
	m.Handle(p+"/sign-in", methods(c, c.signInPage, c.signIn))
	if c.oidc != nil {
		m.Handle(oidcStartPath, methods(c, c.oidcStart, nil))
		m.Handle(oidcCallbackPath, methods(c, c.oidcCallback, nil))
	}
	// Each page and form requires the permission of the API route that
	// does the same (adapters/rest's adminPermissions): reading needs
	// read; a change, and the confirmation page leading to it, the
	// change's permission.
	read, rollouts, firmware := domain.PermRead, domain.PermRolloutsWrite, domain.PermFirmwareWrite
	m.Handle(p+"/sign-out", methods(c, nil, c.signOut))
	m.Handle(p+"/{$}", methods(c, c.authed(read, c.fleetPage), nil))
	m.Handle(p+"/rollouts", methods(c, c.authed(read, c.rolloutsPage), c.authed(rollouts, c.startRollout)))
	m.Handle(p+"/rollouts/rows", methods(c, c.authed(read, c.rolloutRows), nil))
	m.Handle(p+"/rollouts/{id}", methods(c, c.authed(read, c.rolloutPage), c.authed(rollouts, c.changeRollout)))
	m.Handle(p+"/rollouts/{id}/counts", methods(c, c.authed(read, c.rolloutCounts), nil))
	m.Handle(p+"/rollouts/{id}/confirm", methods(c, c.authed(rollouts, c.confirmRollout), nil))
	m.Handle(p+"/firmwares", methods(c, c.authed(read, c.firmwaresPage), c.authed(firmware, c.publishFirmware)))
	m.Handle(p+"/firmwares/{id}/revoke", methods(c, c.authed(firmware, c.confirmRevoke), c.authed(firmware, c.revokeFirmware)))
	if c.artifacts != nil {
		// The upload checks the session, its permission (artifacts:write)
		// and CSRF token itself: authed would read the body as a form,
		// bounded to 64 KiB.
		m.Handle(p+"/artifacts", methods(c, nil, c.uploadArtifact))
		m.Handle(p+"/artifacts/{id}", methods(c, c.authed(read, c.artifactPage), c.authed(firmware, c.publishArtifact)))
	}
	m.Handle(p+"/devices", methods(c, c.authed(read, c.devicePage), nil))
	if c.audit != nil {
		m.Handle(p+"/audit", methods(c, c.authed(domain.PermAuditRead, c.auditPage), nil))
	}
	c.webhookRoutes(m)
	m.HandleFunc(p+"/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "There is no such page in the console.")
	})
	c.mux = m
}

// ServeHTTP serves every console page, with headers that keep the pages
// from being framed, sniffed, cached, or running anything but the
// console's own script.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			c.logger.ErrorContext(r.Context(), "console page panicked", "path", r.URL.Path,
				"request_id", httpedge.RequestIDFrom(r.Context()), "panic", fmt.Sprint(v))
			c.fail(w, r, http.StatusInternalServerError, "Something went wrong on our side.")
		}
	}()
	c.mux.ServeHTTP(w, r)
}

// sessionHandler is a page handler that runs for a signed-in operator.
type sessionHandler func(w http.ResponseWriter, r *http.Request, s session)

// readSession is the request's session with its principal: the root for
// the admin token's, else the user re-read now, so that a removed user's
// session ends at once and a changed role applies from the next request.
// errNoSession: the request has none (no cookie, a bad one, its user
// removed); any other error is the account's store failing (an outage,
// SERVICE_BUSY), which ends no session: the operator is told to retry,
// not sent to sign in.
func (c *Console) readSession(r *http.Request) (session, error) {
	s, ok := c.sessions.read(r)
	if !ok {
		return session{}, errNoSession
	}
	if s.account.IsZero() {
		s.who = domain.RootPrincipal()
		s.actor, _ = httpedge.ActorOf(r, s.who) // the root is someone: no error
		return s, nil
	}
	if c.accounts == nil {
		return session{}, errNoSession
	}
	p, err := c.accounts.SessionUser(r.Context(), s.account)
	if errors.Is(err, domain.ErrUnauthorized) {
		return session{}, errNoSession
	}
	if err != nil {
		return session{}, fmt.Errorf("reading the session's user: %w", err)
	}
	s.who = p
	if s.actor, err = httpedge.ActorOf(r, p); err != nil {
		return session{}, errNoSession
	}
	return s, nil
}

// errNoSession is a request without a usable session.
var errNoSession = errors.New("console: no session")

// forbidden refuses a signed-in operator whose role lacks perm.
func (c *Console) forbidden(w http.ResponseWriter, r *http.Request, s session, perm domain.Permission) bool {
	if perm == "" || s.who.Can(perm) {
		return false
	}
	c.logger.WarnContext(r.Context(), "console action refused", "principal", s.who.String(), "permission", string(perm),
		"request_id", httpedge.RequestIDFrom(r.Context()))
	c.fail(w, r, http.StatusForbidden, "Your role may not do this (it needs "+string(perm)+").")
	return true
}

// authed runs h for a signed-in operator who holds perm ("": any
// operator). Anyone else is sent to the sign-in page, and comes back to
// where they were going after it; an operator without perm is refused
// (403), and a form posted without its session's CSRF token too, before h
// runs, so nothing changes.
func (c *Console) authed(perm domain.Permission, h sessionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.readSession(r)
		if err != nil && !errors.Is(err, errNoSession) {
			c.failErr(w, r, err)
			return
		}
		if err != nil {
			next := r.URL.Path
			if r.Method == http.MethodGet && r.URL.RawQuery != "" {
				next += "?" + r.URL.RawQuery
			}
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				next = Prefix + "/"
			}
			http.Redirect(w, r, Prefix+"/sign-in?next="+url.QueryEscape(next), http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			if !c.parseForm(w, r) {
				return
			}
			if !c.sessions.validCSRF(s, r.PostFormValue("csrf")) {
				c.fail(w, r, http.StatusForbidden, "This form is out of date or did not come from this console. Reload the page and try again.")
				return
			}
		}
		if c.forbidden(w, r, s, perm) {
			return
		}
		h(w, r, s)
	}
}

// parseForm reads a posted form, bounded like an API body.
func (c *Console) parseForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			c.fail(w, r, http.StatusRequestEntityTooLarge, "The form is too large.")
		} else {
			c.fail(w, r, http.StatusBadRequest, "The form could not be read.")
		}
		return false
	}
	return true
}

// methods dispatches GET (and HEAD) to get and POST to post; any other
// method, or one without a handler, is a 405 page.
func methods(c *Console, get, post http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case (r.Method == http.MethodGet || r.Method == http.MethodHead) && get != nil:
			get(w, r)
		case r.Method == http.MethodPost && post != nil:
			post(w, r)
		default:
			var allow []string
			if get != nil {
				allow = append(allow, http.MethodGet, http.MethodHead)
			}
			if post != nil {
				allow = append(allow, http.MethodPost)
			}
			w.Header().Set("Allow", strings.Join(allow, ", "))
			c.fail(w, r, http.StatusMethodNotAllowed, "This page does not accept that method.")
		}
	})
}

func (c *Console) serveStatic(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	c.static.ServeHTTP(w, r)
}

// page is what every full page template receives.
type page struct {
	Title    string
	Nav      string // the active navigation entry
	SignedIn bool
	CSRF     string
	// Who is the signed-in operator (the zero principal when signed
	// out): the templates show only the forms it may use (Can).
	Who     domain.Principal
	Flash   string
	Refresh int // seconds between live refreshes
	// Webhooks is whether the console serves the webhook pages (the
	// navigation shows them to who may use them).
	Webhooks bool
	Data     any
}

// Can reports whether the page's operator holds a permission, by name:
// a template shows a form only when its operator may post it.
func (p page) Can(perm string) bool { return p.Who.Can(domain.Permission(perm)) }

// Operator names who is signed in, for the page's header.
func (p page) Operator() string {
	if name, ok := p.Who.Username(); ok {
		return name
	}
	if p.Who.IsRoot() {
		return "admin token"
	}
	return ""
}

// render writes a full page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	if p.Refresh == 0 {
		p.Refresh = int((c.cfg.RefreshEvery + time.Second - 1) / time.Second)
	}
	c.execute(w, r, status, name, "layout", p)
}

// renderFragment writes one named template alone, for the live refresh.
func (c *Console) renderFragment(w http.ResponseWriter, r *http.Request, page, name string, data any) {
	c.execute(w, r, http.StatusOK, page, name, data)
}

func (c *Console) execute(w http.ResponseWriter, r *http.Request, status int, page, name string, data any) {
	var b strings.Builder
	if err := c.pages[page].ExecuteTemplate(&b, name, data); err != nil {
		c.logger.ErrorContext(r.Context(), "console template failed", "page", page, "template", name,
			"request_id", httpedge.RequestIDFrom(r.Context()), "error", err.Error())
		if page != "error" {
			c.fail(w, r, http.StatusInternalServerError, "Something went wrong on our side.")
		}
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(b.String()))
	}
}

// errorData is what the error page shows.
type errorData struct {
	Status    int
	Message   string
	RequestID string
}

// fail answers with the error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, message string) {
	s, err := c.readSession(r)
	c.render(w, r, status, "error", page{
		Title: http.StatusText(status), SignedIn: err == nil, Who: s.who, Webhooks: c.webhooks != nil,
		Data: errorData{Status: status, Message: message, RequestID: httpedge.RequestIDFrom(r.Context())},
	})
}

// failErr answers with the error page for an error a use case returned:
// the status and words the API would use; internal causes go to the log,
// never to the page.
func (c *Console) failErr(w http.ResponseWriter, r *http.Request, err error) {
	d := httpedge.DescribeError(err)
	if d.Internal {
		c.logger.ErrorContext(r.Context(), "console request failed", "path", r.URL.Path,
			"request_id", httpedge.RequestIDFrom(r.Context()), "error", err.Error())
	}
	if d.RetryAfter > 0 {
		w.Header().Set("Retry-After", httpedge.RetryAfterSeconds(d.RetryAfter))
	}
	c.fail(w, r, d.Status, sentence(d.Message))
}

// sentence capitalises a message and ends it with a period.
func sentence(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}
