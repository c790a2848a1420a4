package memory

import (
	"context"
	"maps"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Accounts are users and api_tokens behind the Store's lock; its unlocked methods are a ports.AccountTx.
type Accounts struct {
	s      *Store
	users  map[string]domain.User
	tokens map[string]domain.APIToken
}

// NewAccounts returns empty account tables over s's lock.
func NewAccounts(s *Store) *Accounts {
	return &Accounts{s: s, users: map[string]domain.User{}, tokens: map[string]domain.APIToken{}}
}

// InAccountTx runs fn holding the lock; what fn wrote is undone if it fails.
func (a *Accounts) InAccountTx(ctx context.Context, fn func(ports.AccountTx) error) error {
	return do(ctx, a.s, func() error {
		users, tokens, records, events := maps.Clone(a.users), maps.Clone(a.tokens), len(a.s.audit), len(a.s.outbox)
		if err := fn(a); err != nil {
			a.users, a.tokens, a.s.audit, a.s.outbox = users, tokens, a.s.audit[:records], a.s.outbox[:events]
			return err
		}
		return nil
	})
}

func (a *Accounts) Users(ctx context.Context) ([]domain.User, error) {
	return locked(ctx, a.s, func() ([]domain.User, error) { return where(a.users, func(domain.User) bool { return true }), nil })
}

func (a *Accounts) APITokens(ctx context.Context, owner string) ([]domain.APIToken, error) {
	return locked(ctx, a.s, func() ([]domain.APIToken, error) {
		return where(a.tokens, func(t domain.APIToken) bool { return owner == "" || t.Owner() == owner }), nil
	})
}

func (a *Accounts) TokenByHash(ctx context.Context, h domain.TokenHash) (t domain.APIToken, u domain.User, err error) {
	err = do(ctx, a.s, func() error {
		ts := append(where(a.tokens, func(t domain.APIToken) bool { return t.Hash() == h }), domain.APIToken{})
		u, err = found(a.users, ts[0].Owner()) // the zero token has no owner: ErrNotFound
		t = ts[0]
		return err
	})
	return t, u, err
}

func (a *Accounts) InsertUser(_ context.Context, u domain.User) error {
	if has(a.users, u.Name()) {
		return domain.ErrUserExists
	}
	a.users[u.Name()] = u
	return nil
}

func (a *Accounts) PutExternalUser(_ context.Context, u domain.User) error {
	if old, ok := a.users[u.Name()]; ok {
		if !old.External() {
			return domain.ErrUserExists
		}
		u = domain.RehydrateUser(u.Name(), u.Role(), "", old.CreatedAt())
	}
	a.users[u.Name()] = u
	return nil
}

func (a *Accounts) DeleteUser(_ context.Context, name string) error {
	_, err := found(a.users, name)
	delete(a.users, name)
	maps.DeleteFunc(a.tokens, func(_ string, t domain.APIToken) bool { return t.Owner() == name })
	return err
}

func (a *Accounts) PutToken(_ context.Context, t domain.APIToken) error {
	if !has(a.users, t.Owner()) {
		return domain.ErrNotFound
	}
	a.tokens[t.ID().String()] = t
	return nil
}

func (a *Accounts) LockToken(_ context.Context, id domain.UUID) (domain.APIToken, error) {
	return found(a.tokens, id.String())
}

func (a *Accounts) RecordAudit(_ context.Context, rec domain.AuditRecord) error {
	a.s.record(rec)
	return nil
}
