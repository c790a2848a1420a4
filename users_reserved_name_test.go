package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestUsersCreateReservedNameIsAUsageErrorBeforeTheDatabase: a name
// starting "oidc-" or "oidc." is reserved to single sign-on users
// (docs/DOMAIN.md S7: "no password account can be created with one"), so
// `otad users create --username oidc-bob` can never succeed. users.go
// says "The flags are judged before anything connects or migrates", and
// docs/CONFIGURATION.md "a bad flag or command exits 2": the reserved name
// must be refused as a bad --username (exit 2, naming it) before anything
// connects — not, with the database down, as "Postgres cannot be reached",
// nor, with it up, exit 1 after migrating it.
func TestUsersCreateReservedNameIsAUsageErrorBeforeTheDatabase(t *testing.T) {
	env := map[string]string{"OTA_DATABASE_URL": "postgres://postgres@" + deadPort(t) + "/ota?sslmode=disable",
		"OTA_NEW_USER_PASSWORD": "a good long password"}
	for _, name := range []string{"oidc-bob", "oidc.0123456789abcdef0123456789abcdef01234567"} {
		args := []string{"users", "create", "--username", name, "--role", "admin"}
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "username") {
			t.Errorf("otad %s: exit %d, stderr %q; want 2 naming username, before the database",
				strings.Join(args, " "), code, strings.TrimSpace(stderr.String()))
		}
	}
}
