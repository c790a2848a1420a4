package ports

import (
	"context"
	"time"

	"github.com/ai-device/ota/domain"
)

// AccountTx is what one accounts transaction may do: the primitives of the
// users and api_tokens tables. The use cases (application/accounts.go)
// decide; the audit record of each change is written through it too
// (RecordAudit), so that a change and its record commit together.
type AccountTx interface {
	// InsertUser stores a new account (domain.ErrUserExists).
	InsertUser(ctx context.Context, u domain.User) error
	// DeleteUser removes an account and every token it owns, and returns
	// the account as it was, for the change's record (domain.ErrNotFound).
	DeleteUser(ctx context.Context, name string) (domain.User, error)
	// LockToken reads a token locked until the transaction ends
	// (domain.ErrNotFound).
	LockToken(ctx context.Context, id domain.UUID) (domain.APIToken, error)
	// PutExternalUser stores a single sign-on user (domain.User.External):
	// a new one, or the role of one already stored, and returns the
	// account as stored (an existing one keeps its creation time, which
	// names it: domain.AccountRef). A password account of that name is left
	// as it is (domain.ErrUserExists).
	PutExternalUser(ctx context.Context, u domain.User) (domain.User, error)
	// PutToken stores a new token, or one LockToken read and the use case
	// changed (its last use, its revocation). Its owner must exist: the
	// very account of t.OwnerAccount(), name and creation time, not
	// another account created under the name since (domain.ErrNotFound
	// otherwise, and nothing is stored).
	PutToken(ctx context.Context, t domain.APIToken) error
	// RecordAudit writes the operator's record of the change this
	// transaction makes.
	RecordAudit(ctx context.Context, rec domain.AuditRecord) error
}

// NewUser is an operator's request to create an account, as received.
type NewUser struct {
	Username string
	Role     string
	Password string
}

// ExternalIdentity is who the identity provider says signed in, as the
// edge verified it (the ID token's signature, issuer, audience, expiry and
// nonce): its subject and the values of its role claim.
type ExternalIdentity struct {
	// Subject is the ID token's "sub".
	Subject string
	// Roles are the role claim's values: one for a string, each element
	// of a list; none when the claim is absent.
	Roles []string
	// DefaultRole is the role of a user whose claim names none
	// (OTA_OIDC_DEFAULT_ROLE); "": such a user is refused.
	DefaultRole domain.Role
	// RequestID and Source are the sign-in request's id and the address
	// it came from, for the audit record of a change the sign-in makes
	// (a user granted no role any more is removed: docs/DOMAIN.md S8).
	RequestID string
	Source    string
}

// NewAPIToken is a principal's request to mint an API token for itself.
type NewAPIToken struct {
	Name      string
	Scopes    []string
	ExpiresAt time.Time
}

// APITokenCredentials is a new token with its secret, shown once.
type APITokenCredentials struct {
	Token  domain.APIToken
	Secret string
}

// AccountService is what the edges ask of operators' accounts. Every call
// but Authenticate carries the principal acting, which it judges.
type AccountService interface {
	// Authenticate maps a bearer secret to who presents it: the root
	// token, or a usable API token of an existing user
	// (domain.ErrUnauthorized otherwise).
	Authenticate(ctx context.Context, secret string) (domain.Principal, error)
	// SignIn checks a user's password: the user's principal, or
	// domain.ErrUnauthorized for an unknown user and a wrong password alike.
	SignIn(ctx context.Context, username, password string) (domain.Principal, error)
	// SignInExternal admits a user the identity provider vouched for
	// (application/oidc.go): their principal, with the role their claim
	// maps to (domain.ErrForbidden when it maps to none and no default is
	// configured).
	SignInExternal(ctx context.Context, id ExternalIdentity) (domain.Principal, error)
	// SessionUser re-reads a signed-in user (the account a console
	// session was issued for): their current role's principal, or
	// domain.ErrUnauthorized once removed — also when another account of
	// the name was created since (domain.User.Is).
	SessionUser(ctx context.Context, account domain.AccountRef) (domain.Principal, error)
	CreateUser(ctx context.Context, actor domain.Actor, req NewUser) (domain.User, error)
	RemoveUser(ctx context.Context, actor domain.Actor, name string) error
	ListUsers(ctx context.Context, p domain.Principal) ([]domain.User, error)
	CreateToken(ctx context.Context, actor domain.Actor, req NewAPIToken) (APITokenCredentials, error)
	ListTokens(ctx context.Context, p domain.Principal) ([]domain.APIToken, error)
	RevokeToken(ctx context.Context, actor domain.Actor, id domain.UUID) (domain.APIToken, error)
}
