package contract_test

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

// TestPostgresAccountStore holds the users and api_tokens tables
// (migration 00120) to the accounts contract.
func TestPostgresAccountStore(t *testing.T) {
	contract.RunAccountStores(t, func(t *testing.T) application.AccountStore {
		db, _ := testenv.PostgresDB(t)
		return postgres.NewAccountRepository(db)
	})
}

// TestPostgresAccountSecretsStoredHashed reads the tables: a token's secret
// and a user's password appear nowhere, only the secret's SHA-256 and the
// password's argon2id hash.
func TestPostgresAccountSecretsStoredHashed(t *testing.T) {
	db, _ := testenv.PostgresDB(t)
	ctx := t.Context()
	now := time.Now()
	const password = "correct horse battery"
	u, err := domain.NewUser("hashed", "admin", password, now)
	if err != nil {
		t.Fatal(err)
	}
	tok, secret, err := domain.NewAPIToken(domain.UUIDOf([16]byte{7}), domain.UserPrincipal(u), "ci", domain.PermissionsOf(domain.PermRead), now.Add(time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	err = postgres.NewAccountRepository(db).InAccountTx(ctx, func(tx ports.AccountTx) error {
		if err := tx.InsertUser(ctx, u); err != nil {
			return err
		}
		return tx.PutToken(ctx, tok)
	})
	if err != nil {
		t.Fatal(err)
	}
	var everything string
	if err := db.GetContext(ctx, &everything, `SELECT (SELECT string_agg(u::text, '|') FROM users u) || (SELECT string_agg(t::text, '|') FROM api_tokens t)`); err != nil {
		t.Fatal(err)
	}
	secretPart := strings.TrimPrefix(secret, domain.APITokenPrefix)
	if strings.Contains(everything, secretPart) || strings.Contains(everything, password) {
		t.Fatalf("a secret is stored in clear: %s", everything)
	}
	var stored []byte
	if err := db.GetContext(ctx, &stored, `SELECT token_hash FROM api_tokens WHERE id = $1`, tok.ID().String()); err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256([]byte(secret)); !bytes.Equal(stored, want[:]) {
		t.Fatalf("token_hash %x, want the secret's sha256", stored)
	}
	var hash string
	if err := db.GetContext(ctx, &hash, `SELECT password_hash FROM users WHERE username = 'hashed'`); err != nil || !strings.HasPrefix(hash, "$argon2id$") {
		t.Fatalf("password_hash %q, %v", hash, err)
	}
}
