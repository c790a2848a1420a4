package application

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// SignInExternal admits a user the identity provider vouched for (console
// single sign-on; the edge has verified the ID token). The user becomes,
// or stays, a local account named from their subject
// (domain.ExternalUsername) without a password, whose role is set from the
// role claim at every sign-in (domain.RoleFromClaim), so that a change at
// the provider applies from the next sign-in; until then the session acts
// with the stored role, and removing the account ends it as any other.
// A claim naming no role takes the default role when one is configured,
// else the user is refused (domain.ErrForbidden): the provider
// authenticated them, but nobody granted them anything here — and the
// account they had, if any, is removed (withdrawExternal), so that the
// role the provider withdrew does not go on acting in their other
// sessions.
func (a *Accounts) SignInExternal(ctx context.Context, id ports.ExternalIdentity) (domain.Principal, error) {
	name, err := domain.ExternalUsername(id.Subject)
	if err != nil {
		return domain.Principal{}, fmt.Errorf("single sign-on: %w", domain.ErrUnauthorized)
	}
	role, ok := domain.RoleFromClaim(id.Roles)
	if !ok && id.DefaultRole == "" {
		if err := a.withdrawExternal(ctx, name, id); err != nil {
			return domain.Principal{}, fmt.Errorf("single sign-on: withdrawing %s: %w", name, err)
		}
		return domain.Principal{}, fmt.Errorf("%w: the identity provider grants %s no role here", domain.ErrForbidden, name)
	}
	if !ok {
		role = id.DefaultRole
	}
	u, err := domain.NewExternalUser(name, role, a.clock.Now())
	if err != nil {
		return domain.Principal{}, err
	}
	err = a.store.InAccountTx(ctx, func(tx ports.AccountTx) error {
		u, err = tx.PutExternalUser(ctx, u) // as stored: an existing account keeps its creation, which names it
		return err
	})
	if errors.Is(err, domain.ErrUserExists) {
		// A password account holds the name (made before names were
		// reserved): it is not the provider's to sign in as.
		return domain.Principal{}, fmt.Errorf("%w: %s is a password account", domain.ErrForbidden, name)
	}
	if err != nil {
		return domain.Principal{}, fmt.Errorf("single sign-on: %w", err)
	}
	return domain.UserPrincipal(u), nil
}

// errNotExternal rolls back withdrawExternal's removal of an account that
// turned out to have a password: that is not the provider's to remove.
var errNotExternal = errors.New("not a single sign-on account")

// withdrawExternal removes the single sign-on account name, when there is
// one, because the provider now grants it no role: the stored role would
// otherwise go on acting in the user's running sessions (S3) until they
// expire. It is a removal as an admin's is — its tokens go with it, its
// sessions end at their next request — with its audit record in the same
// transaction, whose actor is the account itself, as the provider answered
// for it at this sign-in. A password account of the name is left as it is,
// and no account at all is nothing to do.
func (a *Accounts) withdrawExternal(ctx context.Context, name string, id ports.ExternalIdentity) error {
	users, err := a.store.Users(ctx)
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(users, func(u domain.User) bool { return u.Name() == name }); i < 0 || !users[i].External() {
		return nil
	}
	now := a.clock.Now()
	err = a.store.InAccountTx(ctx, func(tx ports.AccountTx) error {
		u, err := tx.DeleteUser(ctx, name)
		if err != nil {
			return err
		}
		if !u.External() {
			return errNotExternal
		}
		actor, err := domain.NewActor(domain.UserPrincipal(u), id.RequestID, id.Source)
		if err != nil {
			return err
		}
		rec, err := actor.Record(now, domain.AuditUserRemove, name, userFacts(u), nil)
		if err != nil {
			return err
		}
		return tx.RecordAudit(ctx, rec)
	})
	if errors.Is(err, domain.ErrNotFound) || errors.Is(err, errNotExternal) {
		return nil // removed, or replaced, since the read: nothing of the provider's to withdraw
	}
	return err
}
