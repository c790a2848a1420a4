package contract

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// RunAccountStores runs the contract of the accounts store
// (application.AccountStore): users are unique and removed with their
// tokens; a token round-trips, is found by its hash through its owner, and
// keeps its last use and revocation; a token is written only while its
// very owner exists, never onto another account created under its name;
// a failed transaction leaves nothing.
func RunAccountStores(t *testing.T, newStore func(t *testing.T) application.AccountStore) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 123456789, time.UTC)
	user := func(t *testing.T, role domain.Role) domain.User {
		u, err := domain.NewUser(repoName("u"), string(role), "correct horse battery", at)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	token := func(t *testing.T, u domain.User, perms ...domain.Permission) (domain.APIToken, string) {
		tok, secret, err := domain.NewAPIToken(domain.UUIDOf([16]byte(uuid.New())), domain.UserPrincipal(u), "ci",
			domain.PermissionsOf(perms...), at.Add(time.Hour), at)
		if err != nil {
			t.Fatal(err)
		}
		return tok, secret
	}
	tx := func(t *testing.T, s application.AccountStore, fn func(ports.AccountTx) error) error {
		t.Helper()
		return s.InAccountTx(t.Context(), fn)
	}

	t.Run("Users", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		u := user(t, domain.RoleReleaser)
		if err := tx(t, s, func(tx ports.AccountTx) error { return tx.InsertUser(ctx, u) }); err != nil {
			t.Fatal(err)
		}
		again, _ := domain.NewUser(u.Name(), "admin", "another long password", at)
		if err := tx(t, s, func(tx ports.AccountTx) error { return tx.InsertUser(ctx, again) }); !errors.Is(err, domain.ErrUserExists) {
			t.Fatalf("second user %s: %v, want ErrUserExists", u.Name(), err)
		}
		users, err := s.Users(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(users, func(x domain.User) bool { return x.Name() == u.Name() })
		if i < 0 || users[i] != u || !users[i].PasswordMatches("correct horse battery") {
			t.Fatalf("stored user %+v, want %+v", users, u)
		}
		var removed domain.User
		if err := tx(t, s, func(tx ports.AccountTx) (err error) { removed, err = tx.DeleteUser(ctx, u.Name()); return err }); err != nil {
			t.Fatal(err)
		}
		if removed != u {
			t.Errorf("DeleteUser answered %+v, want the removed account %+v", removed, u)
		}
		if err := tx(t, s, func(tx ports.AccountTx) error { _, err := tx.DeleteUser(ctx, u.Name()); return err }); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("removing a removed user: %v", err)
		}
	})

	t.Run("ExternalUsers", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		name, err := domain.ExternalUsername(repoName("sub"))
		if err != nil {
			t.Fatal(err)
		}
		// put signs the user in at at, or — once they have an account —
		// an hour later: the account keeps its creation time.
		signedIn := false
		put := func(role domain.Role) error {
			when := at
			if signedIn {
				when = at.Add(time.Hour)
			}
			signedIn = true
			u, err := domain.NewExternalUser(name, role, when)
			if err != nil {
				t.Fatal(err)
			}
			var got domain.User
			err = tx(t, s, func(tx ports.AccountTx) (err error) { got, err = tx.PutExternalUser(ctx, u); return err })
			// The account as stored: a new one, or the one already there
			// with its own creation time, which names it.
			if err == nil && (got.Name() != name || got.Role() != role || !got.CreatedAt().Equal(at.Truncate(time.Microsecond))) {
				t.Errorf("PutExternalUser answered %+v, want %s, a %s created at %s", got, name, role, at)
			}
			return err
		}
		stored := func() domain.User {
			t.Helper()
			users, err := s.Users(ctx)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(users, func(x domain.User) bool { return x.Name() == name })
			if i < 0 {
				t.Fatalf("external user %s not stored", name)
			}
			return users[i]
		}
		if err := put(domain.RoleRolloutManager); err != nil {
			t.Fatal(err)
		}
		if u := stored(); u.Role() != domain.RoleRolloutManager || !u.External() || u.PasswordMatches("") {
			t.Fatalf("stored %+v, want an external rollout manager without a password", u)
		}
		if err := put(domain.RoleReleaser); err != nil {
			t.Fatalf("second sign-in: %v", err)
		}
		if u := stored(); u.Role() != domain.RoleReleaser || !u.CreatedAt().Equal(at.Truncate(time.Microsecond)) {
			t.Fatalf("after a role change %+v, want a releaser created at %s", u, at)
		}
		// A password account is never turned into an external one, even
		// one whose name was taken before such names were reserved.
		hash, err := domain.HashPassword("correct horse battery")
		if err != nil {
			t.Fatal(err)
		}
		pwName, _ := domain.ExternalUsername(repoName("old"))
		pw := domain.RehydrateUser(pwName, domain.RoleViewer, hash, at)
		if err := tx(t, s, func(tx ports.AccountTx) error { return tx.InsertUser(ctx, pw) }); err != nil {
			t.Fatal(err)
		}
		ext := domain.RehydrateUser(pw.Name(), domain.RoleAdmin, "", at)
		if err := tx(t, s, func(tx ports.AccountTx) error { _, err := tx.PutExternalUser(ctx, ext); return err }); !errors.Is(err, domain.ErrUserExists) {
			t.Fatalf("external user over a password account: %v, want ErrUserExists", err)
		}
		users, _ := s.Users(ctx)
		if i := slices.IndexFunc(users, func(x domain.User) bool { return x.Name() == pw.Name() }); i < 0 || users[i] != pw {
			t.Fatalf("the password account changed: %+v", users)
		}
	})

	t.Run("Tokens", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		u, other := user(t, domain.RoleReleaser), user(t, domain.RoleViewer)
		tok, secret := token(t, u, domain.PermFirmwareWrite, domain.PermArtifactsWrite)
		if err := tx(t, s, func(tx ports.AccountTx) error { return tx.PutToken(ctx, tok) }); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("a token of no user: %v, want ErrNotFound", err)
		}
		otherTok, _ := token(t, other, domain.PermRead)
		err := tx(t, s, func(tx ports.AccountTx) error {
			return errors.Join(tx.InsertUser(ctx, u), tx.InsertUser(ctx, other), tx.PutToken(ctx, tok), tx.PutToken(ctx, otherTok))
		})
		if err != nil {
			t.Fatal(err)
		}
		got, owner, err := s.TokenByHash(ctx, domain.HashToken(secret))
		if err != nil || got != tok || owner != u {
			t.Fatalf("TokenByHash = %+v, %+v, %v; want %+v of %+v", got, owner, err, tok, u)
		}
		if _, _, err := s.TokenByHash(ctx, domain.HashToken(secret+"x")); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("an unknown hash: %v", err)
		}
		used, revoked := at.Add(time.Minute), at.Add(2*time.Minute)
		usedUs, revokedUs := used.Truncate(time.Microsecond), revoked.Truncate(time.Microsecond)
		err = tx(t, s, func(tx ports.AccountTx) error {
			locked, err := tx.LockToken(ctx, tok.ID())
			if err != nil {
				return err
			}
			return tx.PutToken(ctx, locked.Used(used).Revoke(revoked))
		})
		if err != nil {
			t.Fatal(err)
		}
		mine, err := s.APITokens(ctx, u.Name())
		if err != nil || len(mine) != 1 || !mine[0].LastUsedAt().Equal(usedUs) || !mine[0].RevokedAt().Equal(revokedUs) || mine[0].Scopes() != tok.Scopes() {
			t.Fatalf("APITokens(%s) = %+v, %v", u.Name(), mine, err)
		}
		all, err := s.APITokens(ctx, "")
		if err != nil || len(all) < 2 {
			t.Fatalf("APITokens(all) = %d tokens, %v", len(all), err)
		}
		if _, err := tx2(t, s, func(tx ports.AccountTx) (domain.APIToken, error) {
			return tx.LockToken(ctx, domain.UUIDOf([16]byte(uuid.New())))
		}); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("locking an unknown token: %v", err)
		}
		// Removing a user removes its tokens, at once.
		if err := tx(t, s, func(tx ports.AccountTx) error { _, err := tx.DeleteUser(ctx, u.Name()); return err }); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.TokenByHash(ctx, domain.HashToken(secret)); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("a removed user's token: %v, want ErrNotFound", err)
		}
		if mine, err := s.APITokens(ctx, u.Name()); err != nil || len(mine) != 0 {
			t.Fatalf("a removed user's tokens: %+v, %v", mine, err)
		}
		if theirs, err := s.APITokens(ctx, other.Name()); err != nil || len(theirs) != 1 {
			t.Fatalf("another user's tokens after a removal: %+v, %v", theirs, err)
		}
	})

	// A token is its very owner's: minted by an account that is then
	// removed, and whose name is given to a new account, it is written
	// nowhere — not onto the new account (ErrNotFound) — while the new
	// account's own tokens are written, read back as its, and updated.
	t.Run("TokenOfARemovedAccountOfTheName", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		old := user(t, domain.RoleReleaser)
		if err := tx(t, s, func(tx ports.AccountTx) error { return tx.InsertUser(ctx, old) }); err != nil {
			t.Fatal(err)
		}
		stale, staleSecret := token(t, old, domain.PermFirmwareWrite)
		if err := tx(t, s, func(tx ports.AccountTx) error { _, err := tx.DeleteUser(ctx, old.Name()); return err }); err != nil {
			t.Fatal(err)
		}
		successor, err := domain.NewUser(old.Name(), string(domain.RoleReleaser), "the new hire's own password", at.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := tx(t, s, func(tx ports.AccountTx) error { return tx.InsertUser(ctx, successor) }); err != nil {
			t.Fatal(err)
		}
		if err := tx(t, s, func(tx ports.AccountTx) error { return tx.PutToken(ctx, stale) }); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("a token of the removed account of the name: %v, want ErrNotFound", err)
		}
		if _, _, err := s.TokenByHash(ctx, domain.HashToken(staleSecret)); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("the removed account's token was stored: %v", err)
		}
		if mine, err := s.APITokens(ctx, successor.Name()); err != nil || len(mine) != 0 {
			t.Fatalf("the new account owns %d tokens it never minted (%v)", len(mine), err)
		}
		own, ownSecret := token(t, successor, domain.PermFirmwareWrite)
		if err := tx(t, s, func(tx ports.AccountTx) error { return tx.PutToken(ctx, own) }); err != nil {
			t.Fatal(err)
		}
		got, owner, err := s.TokenByHash(ctx, domain.HashToken(ownSecret))
		if err != nil || got != own || owner != successor || !got.OwnerAccount().Equal(successor.Ref()) {
			t.Fatalf("TokenByHash = %+v, %+v, %v; want %+v of %+v", got, owner, err, own, successor)
		}
		if mine, err := s.APITokens(ctx, successor.Name()); err != nil || len(mine) != 1 || !mine[0].OwnerAccount().Equal(successor.Ref()) {
			t.Fatalf("APITokens(%s) = %+v, %v; want its own token, of its account", successor.Name(), mine, err)
		}
		revoked := at.Add(2 * time.Minute)
		err = tx(t, s, func(tx ports.AccountTx) error {
			locked, err := tx.LockToken(ctx, own.ID())
			if err != nil {
				return err
			}
			if !locked.OwnerAccount().Equal(successor.Ref()) {
				return fmt.Errorf("LockToken read the owner %+v, want %+v", locked.OwnerAccount(), successor.Ref())
			}
			return tx.PutToken(ctx, locked.Revoke(revoked))
		})
		if err != nil {
			t.Fatal(err)
		}
		if mine, err := s.APITokens(ctx, successor.Name()); err != nil || len(mine) != 1 || !mine[0].RevokedAt().Equal(revoked.Truncate(time.Microsecond)) {
			t.Fatalf("the new account's revoked token: %+v, %v", mine, err)
		}
	})

	t.Run("RolledBack", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		u := user(t, domain.RoleAdmin)
		tok, secret := token(t, u, domain.PermRead)
		boom := errors.New("boom")
		err := tx(t, s, func(tx ports.AccountTx) error {
			if err := errors.Join(tx.InsertUser(ctx, u), tx.PutToken(ctx, tok)); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("InAccountTx = %v, want fn's error", err)
		}
		users, err := s.Users(ctx)
		if err != nil || slices.ContainsFunc(users, func(x domain.User) bool { return x.Name() == u.Name() }) {
			t.Fatalf("a failed transaction kept its user: %v", err)
		}
		if _, _, err := s.TokenByHash(ctx, domain.HashToken(secret)); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("a failed transaction kept its token: %v", err)
		}
	})
}

// tx2 runs fn in a transaction and returns what it found.
func tx2[T any](t *testing.T, s application.AccountStore, fn func(ports.AccountTx) (T, error)) (T, error) {
	var out T
	err := s.InAccountTx(t.Context(), func(tx ports.AccountTx) error {
		var err error
		out, err = fn(tx)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("in transaction: %w", err)
	}
	return out, nil
}
