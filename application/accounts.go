package application

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// AccountStore is what the account use cases read and write: reads
// outside a transaction, changes in one (InAccountTx).
type AccountStore interface {
	// InAccountTx runs fn in one transaction; nothing fn wrote stays if it
	// returns an error.
	InAccountTx(ctx context.Context, fn func(ports.AccountTx) error) error
	// Users lists every account, in no order.
	Users(ctx context.Context) ([]domain.User, error)
	// APITokens lists the tokens of one owner ("": everyone's), in no order.
	APITokens(ctx context.Context, owner string) ([]domain.APIToken, error)
	// TokenByHash reads the token with this hash and its owner, read
	// through the owner: a removed user's token is domain.ErrNotFound.
	TokenByHash(ctx context.Context, h domain.TokenHash) (domain.APIToken, domain.User, error)
}

// RootToken is the break-glass root secret (OTA_ADMIN_TOKEN). It redacts
// itself when printed or logged.
type RootToken string

// String redacts the secret.
func (RootToken) String() string { return "[redacted]" }

// GoString redacts the secret under %#v too.
func (RootToken) GoString() string { return "[redacted]" }

// LogValue redacts the secret in structured logs.
func (RootToken) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// Accounts are the operators' accounts and API tokens, and who a bearer
// secret belongs to.
type Accounts struct {
	store AccountStore
	clock ports.Clock
	ids   ports.IDGenerator
	root  RootToken
}

var _ ports.AccountService = (*Accounts)(nil)

// NewAccounts builds the accounts use cases. An empty root token admits
// nobody as root.
func NewAccounts(store AccountStore, clock ports.Clock, ids ports.IDGenerator, root RootToken) (*Accounts, error) {
	if err := required(store, clock, ids); err != nil {
		return nil, err
	}
	return &Accounts{store: store, clock: clock, ids: ids, root: root}, nil
}

// authorize refuses a principal without the permission.
func authorize(p domain.Principal, perm domain.Permission) error {
	if !p.Can(perm) {
		return fmt.Errorf("%s lacks %s: %w", p, perm, domain.ErrForbidden)
	}
	return nil
}

// Authenticate maps a bearer secret to its principal: the root token
// (compared in constant time), else an API token found by its hash, not
// revoked, not expired, whose owner still exists. Anything else is
// domain.ErrUnauthorized, the same answer whatever was wrong.
func (a *Accounts) Authenticate(ctx context.Context, secret string) (domain.Principal, error) {
	if secret == "" || len(secret) > maxTokenLen {
		return domain.Principal{}, domain.ErrUnauthorized
	}
	if a.root != "" && domain.SecretEqual(secret, string(a.root)) {
		return domain.RootPrincipal(), nil
	}
	if !strings.HasPrefix(secret, domain.APITokenPrefix) {
		return domain.Principal{}, domain.ErrUnauthorized
	}
	h := domain.HashToken(secret)
	t, owner, err := a.store.TokenByHash(ctx, h)
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Principal{}, domain.ErrUnauthorized
	}
	if err != nil {
		return domain.Principal{}, fmt.Errorf("authenticating API token: %w", err)
	}
	now := a.clock.Now()
	if !t.Hash().Matches(h) {
		return domain.Principal{}, domain.ErrUnauthorized
	}
	if err := t.Usable(now); err != nil {
		return domain.Principal{}, err
	}
	if !owner.Is(t.OwnerAccount()) { // not its very owner: a store that lost track of whose it is
		return domain.Principal{}, domain.ErrUnauthorized
	}
	if t.UseNeedsRecord(now) {
		err := a.store.InAccountTx(ctx, func(tx ports.AccountTx) error {
			t, err := tx.LockToken(ctx, t.ID())
			if err != nil {
				return err
			}
			// Judged again as it is now, under lock: a revocation committed
			// since the read above is refused, and no use after it recorded.
			if err := t.Usable(now); err != nil {
				return err
			}
			return tx.PutToken(ctx, t.Used(now))
		})
		// The token revoked, or it or its user removed, since the read: as
		// if before it.
		if errors.Is(err, domain.ErrNotFound) || errors.Is(err, domain.ErrUnauthorized) {
			return domain.Principal{}, domain.ErrUnauthorized
		}
		if err != nil {
			return domain.Principal{}, fmt.Errorf("recording API token use: %w", err)
		}
	}
	return domain.TokenPrincipal(t, owner), nil
}

// SignIn checks a user's password. An unknown user costs a hash as a wrong
// password does, so the answer's timing does not tell which names exist.
// Accounts are few (operators): the user is found in the listing. The
// principal is the very account the password was checked against
// (domain.Principal.Account): if it is removed and its name given to a new
// account meanwhile, what the principal goes on to do (a session, a token)
// is refused, not done as the new account.
func (a *Accounts) SignIn(ctx context.Context, username, password string) (domain.Principal, error) {
	users, err := a.store.Users(ctx)
	if err != nil {
		return domain.Principal{}, fmt.Errorf("signing in: %w", err)
	}
	i := slices.IndexFunc(users, func(u domain.User) bool { return u.Name() == username })
	if i < 0 {
		decoy().PasswordMatches(password)
		return domain.Principal{}, domain.ErrUnauthorized
	}
	if !users[i].PasswordMatches(password) {
		return domain.Principal{}, domain.ErrUnauthorized
	}
	return domain.UserPrincipal(users[i]), nil
}

// SessionUser re-reads a signed-in user for one request of their
// session: their principal with the role they hold now, or
// domain.ErrUnauthorized when the account the session was issued for is
// gone, so that removing a user ends their sessions at once and a new role
// applies from the next request — also when the name now belongs to
// another account, created after it (domain.User.Is: the name and the
// creation time both).
func (a *Accounts) SessionUser(ctx context.Context, account domain.AccountRef) (domain.Principal, error) {
	users, err := a.store.Users(ctx)
	if err != nil {
		return domain.Principal{}, fmt.Errorf("reading session user: %w", err)
	}
	i := slices.IndexFunc(users, func(u domain.User) bool { return u.Is(account) })
	if i < 0 {
		return domain.Principal{}, domain.ErrUnauthorized
	}
	return domain.UserPrincipal(users[i]), nil
}

// decoy is a user hashed once, whose password check SignIn spends on an
// unknown name (its answer is ignored).
var decoy = sync.OnceValue(func() domain.User {
	u, err := domain.NewUser("decoy", string(domain.RoleViewer), "decoy password, never admitted", time.Time{})
	if err != nil {
		panic(err)
	}
	return u
})

// withAudit makes a change to the accounts and records rec in the same
// transaction: an account change is never kept without its audit record.
func (a *Accounts) withAudit(ctx context.Context, rec domain.AuditRecord, change func(ports.AccountTx) error) error {
	return a.store.InAccountTx(ctx, func(tx ports.AccountTx) error {
		if err := change(tx); err != nil {
			return err
		}
		return tx.RecordAudit(ctx, rec)
	})
}

// CreateUser makes an account (users:write).
func (a *Accounts) CreateUser(ctx context.Context, actor domain.Actor, req ports.NewUser) (domain.User, error) {
	if err := authorize(actor.Principal(), domain.PermUsersWrite); err != nil {
		return domain.User{}, err
	}
	u, err := domain.NewUser(req.Username, req.Role, req.Password, a.clock.Now())
	if err != nil {
		return domain.User{}, err
	}
	rec, err := actor.Record(u.CreatedAt(), domain.AuditUserCreate, u.Name(), nil, userFacts(u))
	if err != nil {
		return domain.User{}, err
	}
	err = a.withAudit(ctx, rec, func(tx ports.AccountTx) error { return tx.InsertUser(ctx, u) })
	if err != nil {
		return domain.User{}, fmt.Errorf("creating user: %w", err)
	}
	return u, nil
}

// RemoveUser removes an account (users:write) with every token it owns,
// in one transaction: the user's tokens fail from their next request.
func (a *Accounts) RemoveUser(ctx context.Context, actor domain.Actor, name string) error {
	if err := authorize(actor.Principal(), domain.PermUsersWrite); err != nil {
		return err
	}
	if _, err := domain.ParseUsername(name); err != nil {
		return fmt.Errorf("user: %w", domain.ErrNotFound)
	}
	now := a.clock.Now()
	err := a.store.InAccountTx(ctx, func(tx ports.AccountTx) error {
		u, err := tx.DeleteUser(ctx, name)
		if err != nil {
			return err
		}
		rec, err := actor.Record(now, domain.AuditUserRemove, name, userFacts(u), nil) // who was removed, with what role
		if err != nil {
			return err
		}
		return tx.RecordAudit(ctx, rec)
	})
	if err != nil {
		return fmt.Errorf("removing user: %w", err)
	}
	return nil
}

// ListUsers lists the accounts (users:write: only those who manage
// accounts see them).
func (a *Accounts) ListUsers(ctx context.Context, p domain.Principal) ([]domain.User, error) {
	if err := authorize(p, domain.PermUsersWrite); err != nil {
		return nil, err
	}
	users, err := a.store.Users(ctx)
	slices.SortFunc(users, func(x, y domain.User) int { return strings.Compare(x.Name(), y.Name()) })
	return users, err
}

// CreateToken mints an API token for the principal's own user
// (api_tokens:write), with scopes within the principal's permissions
// (domain.NewAPIToken refuses wider ones).
func (a *Accounts) CreateToken(ctx context.Context, actor domain.Actor, req ports.NewAPIToken) (ports.APITokenCredentials, error) {
	p := actor.Principal()
	if err := authorize(p, domain.PermAPITokensWrite); err != nil {
		return ports.APITokenCredentials{}, err
	}
	scopes, err := domain.ParsePermissions(req.Scopes)
	if err != nil {
		return ports.APITokenCredentials{}, err
	}
	t, secret, err := domain.NewAPIToken(a.ids.NewID(), p, req.Name, scopes, req.ExpiresAt, a.clock.Now())
	if err != nil {
		return ports.APITokenCredentials{}, err
	}
	rec, err := actor.Record(t.CreatedAt(), domain.AuditTokenCreate, t.ID().String(), nil, tokenFacts(t))
	if err != nil {
		return ports.APITokenCredentials{}, err
	}
	err = a.withAudit(ctx, rec, func(tx ports.AccountTx) error { return tx.PutToken(ctx, t) })
	if errors.Is(err, domain.ErrNotFound) {
		// The principal's account was removed after it authenticated
		// (another account may hold its name now: the token is not its).
		return ports.APITokenCredentials{}, domain.ErrUnauthorized
	}
	if err != nil {
		return ports.APITokenCredentials{}, fmt.Errorf("creating API token: %w", err)
	}
	return ports.APITokenCredentials{Token: t, Secret: secret}, nil
}

// ListTokens lists the principal's own tokens — those of the very account
// it acts for, none of another account created under its name since — or
// everyone's for those who manage accounts (users:write).
func (a *Accounts) ListTokens(ctx context.Context, p domain.Principal) ([]domain.APIToken, error) {
	if err := authorize(p, domain.PermRead); err != nil {
		return nil, err
	}
	owner, _ := p.Username()
	if p.Can(domain.PermUsersWrite) {
		owner = ""
	} else if owner == "" {
		return []domain.APIToken{}, nil
	}
	tokens, err := a.store.APITokens(ctx, owner)
	if owner != "" {
		tokens = slices.DeleteFunc(tokens, func(t domain.APIToken) bool { return !t.OwnedBy(p) })
	}
	slices.SortFunc(tokens, func(x, y domain.APIToken) int {
		return cmp.Or(x.CreatedAt().Compare(y.CreatedAt()), strings.Compare(x.ID().String(), y.ID().String()))
	})
	return tokens, err
}

// RevokeToken ends a token (api_tokens:write): one's own
// (domain.APIToken.OwnedBy: the very account's, not that of another
// account created under its name since), or anyone's for those who manage
// accounts. Another user's token is domain.ErrNotFound to everyone else,
// as if it did not exist.
func (a *Accounts) RevokeToken(ctx context.Context, actor domain.Actor, id domain.UUID) (domain.APIToken, error) {
	p := actor.Principal()
	if err := authorize(p, domain.PermAPITokensWrite); err != nil {
		return domain.APIToken{}, err
	}
	if id.IsZero() {
		return domain.APIToken{}, fmt.Errorf("API token: %w", domain.ErrNotFound)
	}
	var out domain.APIToken
	err := a.store.InAccountTx(ctx, func(tx ports.AccountTx) error {
		t, err := tx.LockToken(ctx, id)
		if err != nil {
			return err
		}
		if !t.OwnedBy(p) && !p.Can(domain.PermUsersWrite) {
			return fmt.Errorf("API token: %w", domain.ErrNotFound)
		}
		now := a.clock.Now()
		out = t.Revoke(now)
		if err := tx.PutToken(ctx, out); err != nil {
			return err
		}
		rec, err := actor.Record(now, domain.AuditTokenRevoke, id.String(), tokenFacts(t), tokenFacts(out))
		if err != nil {
			return err
		}
		return tx.RecordAudit(ctx, rec)
	})
	if err != nil {
		return domain.APIToken{}, fmt.Errorf("revoking API token: %w", err)
	}
	return out, nil
}
