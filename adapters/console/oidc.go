package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Single sign-on (OpenID Connect, authorization code flow with PKCE).
//
// GET /console/oidc/start sets a short-lived cookie holding a random state,
// nonce and PKCE verifier, signed with the users' session key, and sends
// the browser to the provider. The provider sends it back to
// /console/oidc/callback, which checks the state against the cookie,
// exchanges the code (with the verifier and the client secret), verifies
// the ID token (signature by the provider's keys, issuer, audience = our
// client id, expiry, nonce), and hands the subject and role claim to
// Accounts.SignInExternal, which provisions the local account — or, when
// the provider grants no role here any more, removes it and refuses the
// sign-in (403), with the request's id and address for its audit record.
// From then on the session is an ordinary user's session (sessions).

// Route paths of single sign-on.
const (
	oidcStartPath    = Prefix + "/oidc/start"
	oidcCallbackPath = Prefix + "/oidc/callback"
	// CallbackPath is where the provider sends the browser back; the
	// redirect URL registered at the provider is the public URL and this.
	CallbackPath = oidcCallbackPath
	oidcCookie   = "ota_console_oidc"
	// oidcFlowTTL bounds a sign-in at the provider: a state older than
	// this is refused.
	oidcFlowTTL = 10 * time.Minute
	// DefaultRoleClaim is the ID token claim whose value is the role.
	DefaultRoleClaim = "ota_role"
)

// OIDCConfig is the console's single sign-on (OTA_OIDC_*).
type OIDCConfig struct {
	// Issuer is the provider's issuer URL; its discovery document is read
	// at start (NewOIDC).
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is the absolute URL of CallbackPath, as registered at
	// the provider.
	RedirectURL string
	// RoleClaim names the ID token claim holding the role: a string, or a
	// list of strings (DefaultRoleClaim when empty).
	RoleClaim string
	// DefaultRole is the role of a user whose claim names none ("": such
	// a user is refused).
	DefaultRole domain.Role
}

// OIDC is a discovered provider, ready to sign operators in.
type OIDC struct {
	cfg      OIDCConfig
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// NewOIDC reads the provider's discovery document (its endpoints and where
// its keys are) within ctx. A provider that does not answer, or answers
// for another issuer, is an error: the service refuses to start rather
// than show a sign-in button that cannot work.
func NewOIDC(ctx context.Context, cfg OIDCConfig) (*OIDC, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" || cfg.ClientSecret == "" || cfg.RedirectURL == "" {
		return nil, errors.New("console: single sign-on needs an issuer, a client id and secret, and a redirect URL")
	}
	if cfg.RoleClaim == "" {
		cfg.RoleClaim = DefaultRoleClaim
	}
	provider, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("console: discovering the OIDC provider %s: %w", cfg.Issuer, err)
	}
	return &OIDC{
		cfg: cfg,
		oauth: oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Endpoint: provider.Endpoint(),
			RedirectURL: cfg.RedirectURL, Scopes: []string{oidc.ScopeOpenID}},
		// The token's times are the provider's wall clock's, so they are
		// checked against the real time, not the console's clock.
		verifier: provider.Verifier(&oidc.Config{ClientID: cfg.ClientID}),
	}, nil
}

// WithOIDC offers single sign-on beside the password (it needs
// WithAccounts, which provisions the provider's users).
func WithOIDC(o *OIDC) Option {
	return func(c *Console) { c.oidc = o }
}

// oidcFlow is what the start of a sign-in leaves in its cookie for the
// callback.
type oidcFlow struct {
	expires  time.Time
	state    string
	nonce    string
	verifier string
	next     string
}

func (s *sessions) encodeFlow(f oidcFlow) string {
	v := url.Values{"exp": {strconv.FormatInt(f.expires.Unix(), 10)}, "state": {f.state}, "nonce": {f.nonce},
		"verifier": {f.verifier}, "next": {f.next}}
	payload := []byte(v.Encode())
	return b64.EncodeToString(payload) + "." + b64.EncodeToString(s.mac(s.userKey, "oidc flow", payload))
}

// decodeFlow reads a flow cookie: genuine (signed under the users' key)
// and unexpired, or false.
func (s *sessions) decodeFlow(value string) (oidcFlow, bool) {
	p, m, ok := strings.Cut(value, ".")
	if !ok || s.userKey == nil {
		return oidcFlow{}, false
	}
	payload, err1 := b64.DecodeString(p)
	sig, err2 := b64.DecodeString(m)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, s.mac(s.userKey, "oidc flow", payload)) {
		return oidcFlow{}, false
	}
	v, err := url.ParseQuery(string(payload))
	if err != nil {
		return oidcFlow{}, false
	}
	exp, err := strconv.ParseInt(v.Get("exp"), 10, 64)
	if err != nil || !s.clock.Now().Before(time.Unix(exp, 0)) {
		return oidcFlow{}, false
	}
	return oidcFlow{expires: time.Unix(exp, 0), state: v.Get("state"), nonce: v.Get("nonce"),
		verifier: v.Get("verifier"), next: safeNext(v.Get("next"))}, true
}

// flowCookie is the flow's cookie. SameSite=Lax, not Strict: the
// provider's redirect back is a navigation from another site, on which a
// Strict cookie is not sent. It is scoped to the callback's folder and
// signed, and it grants nothing without a code the provider issued for it.
func (s *sessions) flowCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: oidcCookie, Value: value, Path: Prefix + "/oidc/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.secureFor(r), SameSite: http.SameSiteLaxMode}
}

func randomString() (string, error) {
	b := make([]byte, nonceLen)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return b64.EncodeToString(b), nil
}

// oidcStart sends the browser to the provider with a fresh state, nonce
// and PKCE challenge.
func (c *Console) oidcStart(w http.ResponseWriter, r *http.Request) {
	state, err1 := randomString()
	nonce, err2 := randomString()
	if err := errors.Join(err1, err2); err != nil {
		c.failErr(w, r, err)
		return
	}
	f := oidcFlow{expires: c.clock.Now().Add(oidcFlowTTL), state: state, nonce: nonce,
		verifier: oauth2.GenerateVerifier(), next: safeNext(r.URL.Query().Get("next"))}
	http.SetCookie(w, c.sessions.flowCookie(r, c.sessions.encodeFlow(f), int(oidcFlowTTL/time.Second)))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, c.oidc.oauth.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(f.verifier)), http.StatusFound)
}

// errSSO is a sign-in the provider's answer does not support; the log
// says why, the page does not.
var errSSO = errors.New("single sign-on refused")

// oidcCallback finishes a sign-in: within the address's sign-in budget,
// with the flow's cookie, the state it holds, a code the provider
// exchanges, and an ID token for us with the flow's nonce.
func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if !c.allowSignIn(w, r, Prefix+"/", "") {
		return
	}
	id, next, err := c.oidcIdentity(r)
	// The flow's cookie is spent, whatever happened.
	http.SetCookie(w, c.sessions.flowCookie(r, "", -1))
	var p domain.Principal
	if err == nil {
		id.RequestID, id.Source = httpedge.RequestIDFrom(r.Context()), httpedge.SourceAddress(r)
		p, err = c.accounts.SignInExternal(r.Context(), id)
	}
	if err != nil {
		c.logger.WarnContext(r.Context(), "console single sign-on refused", "request_id", httpedge.RequestIDFrom(r.Context()),
			"error", err.Error())
		switch {
		case errors.Is(err, domain.ErrForbidden):
			c.showSignIn(w, r, http.StatusForbidden, next, "", "Your account at the identity provider grants no role in this console.")
		case errors.Is(err, errSSO), errors.Is(err, domain.ErrUnauthorized):
			c.showSignIn(w, r, http.StatusUnauthorized, next, "", "Single sign-on failed. Please try again.")
		default:
			c.failErr(w, r, err)
		}
		return
	}
	account, _ := p.Account()
	if _, err := c.sessions.start(w, r, account); err != nil {
		c.failErr(w, r, err)
		return
	}
	// A page, not a redirect: the session cookie is SameSite=Strict, and a
	// redirect would still belong to the provider's cross-site navigation,
	// so the browser would not send the cookie to the next page.
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	_ = signedInPage.Execute(w, next)
}

var signedInPage = template.Must(template.New("signed-in").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={{.}}">
<title>Signed in</title></head><body><p>Signed in. <a id="continue" href="{{.}}">Continue</a>.</p></body></html>
`))

// oidcIdentity checks the provider's answer and reads who signed in.
func (c *Console) oidcIdentity(r *http.Request) (ports.ExternalIdentity, string, error) {
	next := Prefix + "/"
	ck, err := r.Cookie(oidcCookie)
	if err != nil {
		return ports.ExternalIdentity{}, next, fmt.Errorf("%w: no flow cookie", errSSO)
	}
	f, ok := c.sessions.decodeFlow(ck.Value)
	if !ok {
		return ports.ExternalIdentity{}, next, fmt.Errorf("%w: the flow cookie is not genuine or has expired", errSSO)
	}
	next = f.next
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		return ports.ExternalIdentity{}, next, fmt.Errorf("%w: the provider answered %q", errSSO, e)
	}
	if !hmac.Equal([]byte(q.Get("state")), []byte(f.state)) {
		return ports.ExternalIdentity{}, next, fmt.Errorf("%w: the state does not match the flow's", errSSO)
	}
	tok, err := c.oidc.oauth.Exchange(r.Context(), q.Get("code"), oauth2.VerifierOption(f.verifier))
	if err != nil {
		return ports.ExternalIdentity{}, next, fmt.Errorf("%w: exchanging the code: %w", errSSO, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return ports.ExternalIdentity{}, next, fmt.Errorf("%w: the token response has no ID token", errSSO)
	}
	idt, err := c.oidc.verifier.Verify(r.Context(), raw)
	if err != nil {
		return ports.ExternalIdentity{}, next, fmt.Errorf("%w: %w", errSSO, err)
	}
	if !hmac.Equal([]byte(idt.Nonce), []byte(f.nonce)) {
		return ports.ExternalIdentity{}, next, fmt.Errorf("%w: the ID token's nonce is not the flow's", errSSO)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return ports.ExternalIdentity{}, next, fmt.Errorf("%w: reading the ID token's claims: %w", errSSO, err)
	}
	return ports.ExternalIdentity{Subject: idt.Subject, Roles: claimValues(claims[c.oidc.cfg.RoleClaim]),
		DefaultRole: c.oidc.cfg.DefaultRole}, next, nil
}

// claimValues reads a role claim: a string is one value, a list its
// string elements; anything else none.
func claimValues(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
