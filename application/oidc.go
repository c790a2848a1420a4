package application

import (
	"context"
	"errors"
	"fmt"

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
// authenticated them, but nobody granted them anything here.
func (a *Accounts) SignInExternal(ctx context.Context, id ports.ExternalIdentity) (domain.Principal, error) {
	name, err := domain.ExternalUsername(id.Subject)
	if err != nil {
		return domain.Principal{}, fmt.Errorf("single sign-on: %w", domain.ErrUnauthorized)
	}
	role, ok := domain.RoleFromClaim(id.Roles)
	if !ok && id.DefaultRole == "" {
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
