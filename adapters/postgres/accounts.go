package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// AccountRepository stores operators' accounts and API tokens in the users
// and api_tokens tables (migration 00120).
type AccountRepository struct{ db *sqlx.DB }

// NewAccountRepository stores accounts through the given pool.
func NewAccountRepository(db *sqlx.DB) *AccountRepository { return &AccountRepository{db: db} }

// A token is read through its owner (tokensOfUsers), whose creation time
// names the very account that owns it (domain.AccountRef).
const (
	userColumns  = `username, role, password_hash, created_at`
	tokenColumns = `t.id, t.username, u.created_at AS owner_created_at, t.name, t.token_hash, t.scopes, t.created_at,
		t.expires_at, t.last_used_at, t.revoked_at`
	tokensOfUsers = `api_tokens t JOIN users u ON u.username = t.username`
)

type userRow struct {
	Username     string    `db:"username"`
	Role         string    `db:"role"`
	PasswordHash string    `db:"password_hash"`
	CreatedAt    time.Time `db:"created_at"`
}

func (r userRow) toDomain() (domain.User, error) {
	role, err := domain.ParseRole(r.Role)
	if err != nil {
		return domain.User{}, fmt.Errorf("user %s has a corrupt role: %w", r.Username, err)
	}
	return domain.RehydrateUser(r.Username, role, r.PasswordHash, r.CreatedAt), nil
}

type tokenRow struct {
	ID             string         `db:"id"`
	Username       string         `db:"username"`
	OwnerCreatedAt time.Time      `db:"owner_created_at"`
	Name           string         `db:"name"`
	TokenHash      []byte         `db:"token_hash"`
	Scopes         pq.StringArray `db:"scopes"`
	CreatedAt      time.Time      `db:"created_at"`
	ExpiresAt      time.Time      `db:"expires_at"`
	LastUsedAt     sql.NullTime   `db:"last_used_at"`
	RevokedAt      sql.NullTime   `db:"revoked_at"`
}

func (r tokenRow) toDomain() (domain.APIToken, error) {
	id, err := domain.ParseUUID("id", r.ID)
	if err != nil {
		return domain.APIToken{}, err
	}
	scopes, err := domain.ParsePermissions(r.Scopes)
	var h domain.TokenHash
	if err != nil || copy(h[:], r.TokenHash) != len(h) {
		return domain.APIToken{}, fmt.Errorf("API token %s is corrupt: %v", r.ID, err)
	}
	return domain.RehydrateAPIToken(id, domain.NewAccountRef(r.Username, r.OwnerCreatedAt), r.Name, h, scopes, r.CreatedAt, r.ExpiresAt,
		fromNullTime(r.LastUsedAt), fromNullTime(r.RevokedAt)), nil
}

// InAccountTx runs fn in one read-committed transaction.
func (s *AccountRepository) InAccountTx(ctx context.Context, fn func(ports.AccountTx) error) error {
	return inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error { return fn(accountTx{tx}) })
}

// Users lists every account.
func (s *AccountRepository) Users(ctx context.Context) ([]domain.User, error) {
	var rows []userRow
	if err := s.db.SelectContext(ctx, &rows, `SELECT `+userColumns+` FROM users`); err != nil {
		return nil, fmt.Errorf("listing users: %w", unavailable(err))
	}
	return domainOf(rows)
}

// APITokens lists one owner's tokens ("": everyone's).
func (s *AccountRepository) APITokens(ctx context.Context, owner string) ([]domain.APIToken, error) {
	var rows []tokenRow
	if err := s.db.SelectContext(ctx, &rows, `SELECT `+tokenColumns+` FROM `+tokensOfUsers+` WHERE $1 = '' OR t.username = $1`, owner); err != nil {
		return nil, fmt.Errorf("listing API tokens: %w", unavailable(err))
	}
	return domainOf(rows)
}

// TokenByHash reads a token and its owner in one statement, through the
// owner: a token whose user is gone is not found.
func (s *AccountRepository) TokenByHash(ctx context.Context, h domain.TokenHash) (domain.APIToken, domain.User, error) {
	var row struct {
		tokenRow
		Role         string `db:"role"`
		PasswordHash string `db:"password_hash"`
	}
	err := s.db.GetContext(ctx, &row, `SELECT `+tokenColumns+`, u.role, u.password_hash
		FROM `+tokensOfUsers+` WHERE t.token_hash = $1`, h[:])
	if err != nil {
		return domain.APIToken{}, domain.User{}, fmt.Errorf("loading API token: %w", notFound(err))
	}
	t, err := row.tokenRow.toDomain()
	if err != nil {
		return domain.APIToken{}, domain.User{}, err
	}
	u, err := userRow{Username: row.Username, Role: row.Role, PasswordHash: row.PasswordHash, CreatedAt: row.OwnerCreatedAt}.toDomain()
	return t, u, err
}

// accountTx is one accounts transaction's primitives, each one statement.
type accountTx struct{ tx *sqlx.Tx }

func (a accountTx) InsertUser(ctx context.Context, u domain.User) error {
	_, err := a.tx.ExecContext(ctx, `INSERT INTO users (`+userColumns+`) VALUES ($1, $2, $3, $4)`,
		u.Name(), string(u.Role()), u.PasswordHash(), dbTime(u.CreatedAt()))
	if pq.As(err, pqerror.UniqueViolation) != nil {
		return domain.ErrUserExists
	}
	return unavailable(err)
}

// PutExternalUser inserts a single sign-on user, or updates the role of
// one (which keeps its creation time), and returns the stored row; a
// password account of the same name is not touched (the WHERE leaves it,
// and no row comes back).
func (a accountTx) PutExternalUser(ctx context.Context, u domain.User) (domain.User, error) {
	if !u.External() {
		return domain.User{}, fmt.Errorf("user %s has a password: not an external user", u.Name())
	}
	var r userRow
	err := a.tx.GetContext(ctx, &r, `INSERT INTO users (`+userColumns+`) VALUES ($1, $2, '', $3)
		ON CONFLICT (username) DO UPDATE SET role = EXCLUDED.role WHERE users.password_hash = ''
		RETURNING `+userColumns, u.Name(), string(u.Role()), dbTime(u.CreatedAt()))
	if errors.Is(err, sql.ErrNoRows) {
		return domain.User{}, domain.ErrUserExists
	}
	if err != nil {
		return domain.User{}, unavailable(err)
	}
	return r.toDomain()
}

func (a accountTx) DeleteUser(ctx context.Context, name string) (domain.User, error) {
	var r userRow
	if err := a.tx.GetContext(ctx, &r, `DELETE FROM users WHERE username = $1 RETURNING `+userColumns, name); err != nil {
		return domain.User{}, fmt.Errorf("user %s: %w", name, notFound(err))
	}
	return r.toDomain()
}

func (a accountTx) LockToken(ctx context.Context, id domain.UUID) (domain.APIToken, error) {
	return loadByID[domain.APIToken]("API token", id, func(r *tokenRow) error {
		return a.tx.GetContext(ctx, r, `SELECT `+tokenColumns+` FROM `+tokensOfUsers+` WHERE t.id = $1 FOR UPDATE OF t`, id.String())
	})
}

// PutToken writes the token only while its very owner exists: the row is
// selected from the user of that name and creation time, so a token of an
// account since removed — even one whose name was given to a new account
// — writes nothing (ErrNotFound). A removal committing concurrently fails
// the foreign key, ErrNotFound too.
func (a accountTx) PutToken(ctx context.Context, t domain.APIToken) error {
	h := t.Hash()
	owner := t.OwnerAccount()
	res, err := a.tx.ExecContext(ctx, `INSERT INTO api_tokens (id, username, name, token_hash, scopes, created_at, expires_at, last_used_at, revoked_at)
		SELECT $1::uuid, u.username, $3::text, $4::bytea, $5::text[], $6::timestamptz, $7::timestamptz, $8::timestamptz, $9::timestamptz
		FROM users u WHERE u.username = $2 AND u.created_at = $10
		ON CONFLICT (id) DO UPDATE SET last_used_at = EXCLUDED.last_used_at, revoked_at = EXCLUDED.revoked_at`,
		t.ID().String(), owner.Name(), t.Name(), h[:], pq.StringArray(permissionNames(t.Scopes())), dbTime(t.CreatedAt()),
		dbTime(t.ExpiresAt()), nullTime(t.LastUsedAt()), nullTime(t.RevokedAt()), dbTime(owner.CreatedAt()))
	if pq.As(err, pqerror.ForeignKeyViolation) != nil {
		return fmt.Errorf("user %s: %w", t.Owner(), domain.ErrNotFound)
	}
	if err != nil {
		return unavailable(err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return unavailable(err)
	} else if n == 0 {
		return fmt.Errorf("user %s created %s: %w", owner.Name(), owner.CreatedAt().Format(time.RFC3339Nano), domain.ErrNotFound)
	}
	return nil
}

func permissionNames(s domain.PermissionSet) []string {
	var out []string
	for _, p := range s.List() {
		out = append(out, string(p))
	}
	return out
}

func (a accountTx) RecordAudit(ctx context.Context, rec domain.AuditRecord) error {
	return writeAudit(ctx, a.tx, rec)
}
