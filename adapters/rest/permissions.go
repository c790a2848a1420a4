package rest

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// adminPermissions is the one table of what each /api/v1/admin route
// requires (docs/DOMAIN.md, roles), keyed by method and the route as the
// OpenAPI document writes it; each operation there names the same
// permission under x-permission (openapi_test.go checks they agree, and
// that every mutating route refuses whoever lacks it). A route missing
// here cannot be served: NewServer panics.
var adminPermissions = map[string]domain.Permission{
	"GET /api/v1/admin/devices":                        domain.PermRead,
	"POST /api/v1/admin/devices":                       domain.PermDevicesWrite,
	"GET /api/v1/admin/devices/{device_id}":            domain.PermRead,
	"POST /api/v1/admin/devices/{device_id}/token":     domain.PermTokensWrite,
	"PUT /api/v1/admin/devices/{device_id}/tags":       domain.PermTagsWrite,
	"POST /api/v1/admin/devices/tags":                  domain.PermTagsWrite,
	"GET /api/v1/admin/devices/pending":                domain.PermRead,
	"POST /api/v1/admin/devices/pending/{id}/accept":   domain.PermAdmissionWrite,
	"POST /api/v1/admin/devices/pending/{id}/reject":   domain.PermAdmissionWrite,
	"DELETE /api/v1/admin/devices/pending/{id}":        domain.PermAdmissionWrite,
	"PUT /api/v1/admin/devices/{device_id}/public_key": domain.PermAdmissionWrite,
	"GET /api/v1/admin/firmwares":                      domain.PermRead,
	"POST /api/v1/admin/firmwares":                     domain.PermFirmwareWrite,
	"POST /api/v1/admin/firmwares/{id}/revoke":         domain.PermFirmwareWrite,
	"GET /api/v1/admin/artifacts":                      domain.PermRead,
	"POST /api/v1/admin/artifacts":                     domain.PermArtifactsWrite,
	"GET /api/v1/admin/artifacts/{id}":                 domain.PermRead,
	"DELETE /api/v1/admin/artifacts/{id}":              domain.PermArtifactsWrite,
	"GET /api/v1/admin/rollouts":                       domain.PermRead,
	"POST /api/v1/admin/rollouts":                      domain.PermRolloutsWrite,
	"GET /api/v1/admin/rollouts/{id}":                  domain.PermRead,
	"PATCH /api/v1/admin/rollouts/{id}":                domain.PermRolloutsWrite,
	"GET /api/v1/admin/rollouts/{id}/failures":         domain.PermRead,
	"GET /api/v1/admin/tasks":                          domain.PermRead,
	"GET /api/v1/admin/tasks/{task_id}/events":         domain.PermRead,
	"GET /api/v1/admin/tasks/{task_id}/log":            domain.PermRead,
	"GET /api/v1/admin/fleet":                          domain.PermRead,
	"GET /api/v1/admin/users":                          domain.PermUsersWrite,
	"POST /api/v1/admin/users":                         domain.PermUsersWrite,
	"DELETE /api/v1/admin/users/{name}":                domain.PermUsersWrite,
	"GET /api/v1/admin/tokens":                         domain.PermRead,
	"POST /api/v1/admin/tokens":                        domain.PermAPITokensWrite,
	"DELETE /api/v1/admin/tokens/{id}":                 domain.PermAPITokensWrite,
	"GET /api/v1/admin/audit":                          domain.PermAuditRead,
	// Reading a subscription reveals where events go: webhooks:write too.
	"GET /api/v1/admin/webhooks":                 domain.PermWebhooksWrite,
	"POST /api/v1/admin/webhooks":                domain.PermWebhooksWrite,
	"GET /api/v1/admin/webhooks/{id}":            domain.PermWebhooksWrite,
	"PATCH /api/v1/admin/webhooks/{id}":          domain.PermWebhooksWrite,
	"DELETE /api/v1/admin/webhooks/{id}":         domain.PermWebhooksWrite,
	"GET /api/v1/admin/webhooks/{id}/deliveries": domain.PermWebhooksWrite,
	"POST /api/v1/admin/webhooks/{id}/test":      domain.PermWebhooksWrite,
}

var routeParam = regexp.MustCompile(`:[A-Za-z0-9_]+|\{[A-Za-z0-9_]+\}`)

// routeShape is a route's method and path with every parameter unnamed
// ("{}"): Echo's ":id" and the document's "{task_id}" name the same
// route, as another adapter may name its parameters as it likes.
func routeShape(method, path string) string {
	return method + " " + routeParam.ReplaceAllString(path, "{}")
}

// permissionsByShape is adminPermissions keyed by routeShape.
var permissionsByShape = func() map[string]domain.Permission {
	m := make(map[string]domain.Permission, len(adminPermissions))
	for k, p := range adminPermissions {
		method, path, _ := strings.Cut(k, " ")
		m[routeShape(method, path)] = p
	}
	return m
}()

// ctxPrincipal keeps the authenticated operator (domain.Principal) on the
// echo.Context, and httpedge.SetActor the same operator acting in this
// request (with its request id and address), for the handlers that pass
// them on: every change takes its actor, for its audit record.
const ctxPrincipal = "ota.principal"

func principalOf(c echo.Context) domain.Principal {
	p, _ := c.Get(ctxPrincipal).(domain.Principal)
	return p
}

func actorOf(c echo.Context) domain.Actor { return httpedge.ActorIn(c) }

// adminAuth admits a request whose credentials (a bearer secret: the root
// token or an API token; or, to mint a token, a user's password by HTTP
// Basic) hold the permission its route requires: without credentials, or
// with bad ones, 401; with too few permissions, 403 FORBIDDEN, before the
// handler runs, so nothing changes.
func (s *server) adminAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		perm, ok := s.perms[routeShape(c.Request().Method, c.Path())]
		if !ok {
			return domain.ErrForbidden // unreachable: NewServer refuses such a route
		}
		p, err := s.authenticate(c)
		if err != nil {
			return err
		}
		if !p.Can(perm) {
			return fmt.Errorf("%s lacks %s: %w", p, perm, domain.ErrForbidden)
		}
		actor, err := httpedge.ActorOf(c.Request(), p)
		if err != nil {
			return err
		}
		c.Set(ctxPrincipal, p)
		httpedge.SetActor(c, actor)
		return next(c)
	}
}

// passwordRoute is the one route a password may authenticate: a user who
// has no token yet mints one with it.
var passwordRoute = routeShape(http.MethodPost, APIPrefix+"/admin/tokens")

func (s *server) authenticate(c echo.Context) (domain.Principal, error) {
	r := c.Request()
	if user, password, ok := r.BasicAuth(); ok && len(r.Header.Values("Authorization")) == 1 &&
		routeShape(r.Method, c.Path()) == passwordRoute {
		if s.ext.signIn != nil {
			if err := httpedge.SpendSignIn(s.ext.signIn, r, user); err != nil {
				return domain.Principal{}, err
			}
		}
		return s.accounts.SignIn(r.Context(), user, password)
	}
	token, err := bearerToken(r)
	if err != nil {
		return domain.Principal{}, err
	}
	return s.accounts.Authenticate(r.Context(), token)
}

// checkAdminRoutes refuses to build a server with an admin route the
// permission table does not name: it would be open to every operator.
func checkAdminRoutes(e *echo.Echo, perms map[string]domain.Permission) {
	for _, r := range e.Routes() {
		if strings.HasPrefix(r.Path, APIPrefix+"/admin/") {
			if _, ok := perms[routeShape(r.Method, r.Path)]; !ok {
				panic("rest: admin route " + routeShape(r.Method, r.Path) + " has no permission in adminPermissions")
			}
		}
	}
}

// rootOnly authenticates the root token alone, for a server built without
// accounts (WithAccounts).
type rootOnly struct{ hash domain.TokenHash }

func (r rootOnly) Authenticate(_ context.Context, secret string) (domain.Principal, error) {
	if r.hash != (domain.TokenHash{}) && domain.HashToken(secret).Matches(r.hash) {
		return domain.RootPrincipal(), nil
	}
	return domain.Principal{}, domain.ErrUnauthorized
}

func (rootOnly) SessionUser(context.Context, domain.AccountRef) (domain.Principal, error) {
	return domain.Principal{}, domain.ErrUnauthorized
}

func (rootOnly) SignIn(context.Context, string, string) (domain.Principal, error) {
	return domain.Principal{}, domain.ErrUnauthorized
}

// authenticator is what adminAuth asks of ports.AccountService.
type authenticator interface {
	Authenticate(ctx context.Context, secret string) (domain.Principal, error)
	SignIn(ctx context.Context, username, password string) (domain.Principal, error)
}

// WithAccounts serves operators' accounts and API tokens
// (/api/v1/admin/users, /api/v1/admin/tokens) and authenticates admin
// calls through them; without it only the root token is admitted.
func WithAccounts(a ports.AccountService) Option {
	return func(x *extensions) { x.accounts = a }
}

// WithSignInLimiter makes the password route (POST /admin/tokens with
// HTTP Basic) spend the sign-in budget (httpedge.SpendSignIn) before it
// checks the password: the console's limiter, so that the two routes to
// a password share one budget. Without it the route is unlimited.
func WithSignInLimiter(l ports.RateLimiter) Option {
	return func(x *extensions) { x.signIn = l }
}
