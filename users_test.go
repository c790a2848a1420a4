package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// TestUsersCreate makes the first admin on a fresh database, the password
// from stdin: it is stored hashed and never printed; a second account of
// the same name, a bad role and a missing password fail.
func TestUsersCreate(t *testing.T) {
	base := os.Getenv("OTA_TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("OTA_TEST_REQUIRE_SERVICES") != "" {
			t.Fatal("OTA_TEST_REQUIRE_SERVICES is set but OTA_TEST_DATABASE_URL is not")
		}
		t.Skip("no Postgres: set OTA_TEST_DATABASE_URL")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("ota_users_test_%d", time.Now().UnixNano())
	u.Path = "/" + name
	admin, err := sql.Open("postgres", base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(`CREATE DATABASE "` + name + `"`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(`DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`)
		admin.Close()
	})
	const password = "correct horse battery staple"
	env := map[string]string{"OTA_DATABASE_URL": u.String()}
	create := func(in string, args ...string) (int, string) {
		stdin = strings.NewReader(in)
		t.Cleanup(func() { stdin = os.Stdin })
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"users", "create"}, args...), func(k string) string { return env[k] }, &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	code, out := create(password+"\n", "--username", "ada", "--role", "admin")
	if code != 0 || !strings.Contains(out, "created user ada (role admin)") || strings.Contains(out, password) {
		t.Fatalf("users create: %d %q", code, out)
	}
	db, err := sql.Open("postgres", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var role, hash string
	if err := db.QueryRow(`SELECT role, password_hash FROM users WHERE username = 'ada'`).Scan(&role, &hash); err != nil || role != "admin" ||
		!strings.HasPrefix(hash, "$argon2id$") || strings.Contains(hash, password) {
		t.Fatalf("stored %q %q, %v", role, hash, err)
	}
	for _, tc := range []struct {
		in   string
		args []string
		code int
	}{
		{password, []string{"--username", "ada", "--role", "viewer"}, 1},
		{password, []string{"--username", "bob", "--role", "root"}, 2}, // a bad flag, refused before connecting
		{"", []string{"--username", "bob", "--role", "viewer"}, 1},
		{password, []string{"--username", "bob"}, 2},
	} {
		if code, out := create(tc.in, tc.args...); code != tc.code || strings.Contains(out, password) {
			t.Errorf("users create %v: %d %q, want %d", tc.args, code, out, tc.code)
		}
	}
}

// The API's password route (POST /admin/tokens with HTTP Basic) spends
// the sign-in budget (docs/DOMAIN.md S5) in the wired service, as the
// console does: past OTA_CONSOLE_SIGNIN_RATE_BURST guesses at a user's
// password, the right one too is 429 RATE_LIMITED with Retry-After,
// before it is checked.
func TestAPIPasswordRouteSpendsTheSignInBudget(t *testing.T) {
	env := edgeEnv()
	env["OTA_CONSOLE_SIGNIN_RATE_LIMIT"], env["OTA_CONSOLE_SIGNIN_RATE_BURST"] = "0.001", "3"
	h := memoryEdgeWith(t, env).h
	const password = "correct horse battery"
	if a := call(t, h, "POST", "/api/v1/admin/users", edgeAdminToken,
		mustJSON(t, map[string]any{"username": "alice", "role": "releaser", "password": password})); a.status != 201 {
		t.Fatalf("creating alice: %d %s", a.status, a.body)
	}
	mint := func(pw string) edgeAnswer {
		req := httptest.NewRequest("POST", "/api/v1/admin/tokens", strings.NewReader(`{"name":"ci","scopes":["read"],"expires_at":"`+
			time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth("alice", pw)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return edgeAnswer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	}
	for i := range 3 {
		if a := mint("a guess"); a.status != 401 {
			t.Fatalf("guess %d within the budget: %d %s, want 401", i+1, a.status, a.body)
		}
	}
	a := mint(password)
	if a.status != 429 || a.errorCode() != "RATE_LIMITED" || a.header.Get("Retry-After") == "" {
		t.Fatalf("the right password past the budget: %d %s (Retry-After %q), want 429 RATE_LIMITED", a.status, a.body, a.header.Get("Retry-After"))
	}
}
