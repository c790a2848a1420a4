package rest

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/adapters/httpedge"
)

// addAccountRoutes serves operators' accounts and API tokens.
func (s *server) addAccountRoutes(admin httpedge.AddRoute) {
	if s.ext.accounts == nil {
		return
	}
	admin(http.MethodPost, "/users", s.createUser)
	admin(http.MethodGet, "/users", s.listUsers)
	admin(http.MethodDelete, "/users/:name", s.removeUser)
	admin(http.MethodPost, "/tokens", s.createToken)
	admin(http.MethodGet, "/tokens", s.listTokens)
	admin(http.MethodDelete, "/tokens/:id", s.revokeToken)
}

type userView struct {
	Username  string `json:"username"`
	Role      string `json:"role"`
	CreatedAt string `json:"created_at"`
}

func newUserView(u domain.User) userView {
	return userView{Username: u.Name(), Role: string(u.Role()), CreatedAt: timestamp(u.CreatedAt())}
}

type apiTokenView struct {
	ID         string   `json:"id"`
	Owner      string   `json:"owner"`
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	CreatedAt  string   `json:"created_at"`
	ExpiresAt  string   `json:"expires_at"`
	LastUsedAt *string  `json:"last_used_at"`
	RevokedAt  *string  `json:"revoked_at"`
	// Token is the secret, in the creation's answer only.
	Token string `json:"token,omitempty"`
}

func newAPITokenView(t domain.APIToken) apiTokenView {
	v := apiTokenView{ID: t.ID().String(), Owner: t.Owner(), Name: t.Name(), Scopes: []string{},
		CreatedAt: timestamp(t.CreatedAt()), ExpiresAt: timestamp(t.ExpiresAt()), LastUsedAt: optTime(t.LastUsedAt()), RevokedAt: optTime(t.RevokedAt())}
	for _, p := range t.Scopes().List() {
		v.Scopes = append(v.Scopes, string(p))
	}
	return v
}

type createUserBody struct {
	Username *string `json:"username"`
	Role     *string `json:"role"`
	Password *string `json:"password"`
}

func (s *server) createUser(c echo.Context) error {
	var b createUserBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	if err := required(has("username", b.Username), has("role", b.Role), has("password", b.Password)); err != nil {
		return err
	}
	u, err := s.ext.accounts.CreateUser(c.Request().Context(), actorOf(c), ports.NewUser{Username: *b.Username, Role: *b.Role, Password: *b.Password})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, newUserView(u))
}

func (s *server) listUsers(c echo.Context) error {
	users, err := s.ext.accounts.ListUsers(c.Request().Context(), principalOf(c))
	if err != nil {
		return err
	}
	return itemsOf(c, users, newUserView)
}

func (s *server) removeUser(c echo.Context) error {
	if err := s.ext.accounts.RemoveUser(c.Request().Context(), actorOf(c), httpedge.PathParam(c, "name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// createTokenBody is POST /admin/tokens's body. expires_at is read as a
// string and judged by the domain (domain.ParseInstant), as every other
// operator time is: one that is not an RFC 3339 date-time is
// VALIDATION_FAILED naming it, not MALFORMED_JSON (time.Time's own JSON
// decoding would fail the whole body).
type createTokenBody struct {
	Name      *string   `json:"name"`
	Scopes    *[]string `json:"scopes"`
	ExpiresAt *string   `json:"expires_at"`
}

func (s *server) createToken(c echo.Context) error {
	var b createTokenBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	if err := required(has("name", b.Name), has("scopes", b.Scopes), has("expires_at", b.ExpiresAt)); err != nil {
		return err
	}
	expires, err := domain.ParseInstant("expires_at", *b.ExpiresAt)
	if err != nil {
		return err
	}
	cred, err := s.ext.accounts.CreateToken(c.Request().Context(), actorOf(c), ports.NewAPIToken{Name: *b.Name, Scopes: *b.Scopes, ExpiresAt: expires})
	if err != nil {
		return err
	}
	v := newAPITokenView(cred.Token)
	v.Token = cred.Secret
	return c.JSON(http.StatusCreated, v)
}

func (s *server) listTokens(c echo.Context) error {
	tokens, err := s.ext.accounts.ListTokens(c.Request().Context(), principalOf(c))
	if err != nil {
		return err
	}
	return itemsOf(c, tokens, newAPITokenView)
}

func (s *server) revokeToken(c echo.Context) error {
	t, err := s.ext.accounts.RevokeToken(c.Request().Context(), actorOf(c), pathUUID(c, "id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newAPITokenView(t))
}
