package memory

import (
	"context"
	"maps"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Accounts are the users and api_tokens tables of a Store; its unlocked
// methods are a ports.AccountTx.
type Accounts struct{ s *Store }

func NewAccounts(s *Store) *Accounts { return &Accounts{s: s} }

// InAccountTx runs fn in a transaction of the store (Store.tx).
func (a *Accounts) InAccountTx(ctx context.Context, fn func(ports.AccountTx) error) error {
	return a.s.tx(ctx, func() error { return fn(a) })
}

func (a *Accounts) Users(ctx context.Context) ([]domain.User, error) {
	return locked(ctx, a.s, func() ([]domain.User, error) { return where(a.s.users, func(domain.User) bool { return true }), nil })
}

func (a *Accounts) APITokens(ctx context.Context, owner string) ([]domain.APIToken, error) {
	return locked(ctx, a.s, func() ([]domain.APIToken, error) {
		return where(a.s.tokens, func(t domain.APIToken) bool { return owner == "" || t.Owner() == owner }), nil
	})
}

func (a *Accounts) TokenByHash(ctx context.Context, h domain.TokenHash) (t domain.APIToken, u domain.User, err error) {
	err = do(ctx, a.s, func() error {
		ts := append(where(a.s.tokens, func(t domain.APIToken) bool { return t.Hash() == h }), domain.APIToken{})
		u, err = found(a.s.users, ts[0].Owner()) // the zero token has no owner: ErrNotFound
		t = ts[0]
		return err
	})
	return t, u, err
}

func (a *Accounts) InsertUser(_ context.Context, u domain.User) error {
	if has(a.s.users, u.Name()) {
		return domain.ErrUserExists
	}
	a.s.users[u.Name()] = u
	return nil
}

func (a *Accounts) PutExternalUser(_ context.Context, u domain.User) (domain.User, error) {
	if old, ok := a.s.users[u.Name()]; ok {
		if !old.External() {
			return domain.User{}, domain.ErrUserExists
		}
		u = domain.RehydrateUser(u.Name(), u.Role(), "", old.CreatedAt())
	}
	a.s.users[u.Name()] = u
	return u, nil
}

func (a *Accounts) DeleteUser(_ context.Context, name string) (domain.User, error) {
	u, err := found(a.s.users, name)
	delete(a.s.users, name)
	maps.DeleteFunc(a.s.tokens, func(_ string, t domain.APIToken) bool { return t.Owner() == name })
	return u, err
}

// PutToken writes the token only while its very owner exists (the
// account of that name and creation time, domain.User.Is).
func (a *Accounts) PutToken(_ context.Context, t domain.APIToken) error {
	if u, ok := a.s.users[t.Owner()]; !ok || !u.Is(t.OwnerAccount()) {
		return domain.ErrNotFound
	}
	a.s.tokens[t.ID().String()] = t
	return nil
}

func (a *Accounts) LockToken(_ context.Context, id domain.UUID) (domain.APIToken, error) {
	return found(a.s.tokens, id.String())
}

func (a *Accounts) RecordAudit(_ context.Context, rec domain.AuditRecord) error {
	a.s.record(rec)
	return nil
}
