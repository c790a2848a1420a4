package rest

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/adapters/httpedge"
)

// fakeAccounts authenticates the table test's principals by their bearer
// ("role-<role>": that role's session; "ci-token": a releaser's token
// scoped to artifacts:write and firmware:write) and records every other
// call in the fake services' log.
type fakeAccounts struct{ f *fakeServices }

var testCITokenScopes = domain.PermissionsOf(domain.PermArtifactsWrite, domain.PermFirmwareWrite)

func testUser(role domain.Role) domain.User {
	return domain.RehydrateUser(strings.ReplaceAll(string(role), "_", "-"), role, "$argon2id$x", time.Unix(0, 0))
}

// testPrincipals are the table's callers, by bearer.
func testPrincipals(t *testing.T) map[string]domain.Principal {
	out := map[string]domain.Principal{testAdminToken: domain.RootPrincipal()}
	for _, r := range domain.Roles() {
		out["role-"+string(r)] = domain.UserPrincipal(testUser(r))
	}
	rel := testUser(domain.RoleReleaser)
	tok, _, err := domain.NewAPIToken(testArtifactID, domain.UserPrincipal(rel), "ci", testCITokenScopes, time.Now().Add(time.Hour), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out["ci-token"] = domain.TokenPrincipal(tok, rel)
	return out
}

func (a fakeAccounts) Authenticate(_ context.Context, secret string) (domain.Principal, error) {
	if secret == "ci-token" {
		rel := testUser(domain.RoleReleaser)
		tok, _, _ := domain.NewAPIToken(testArtifactID, domain.UserPrincipal(rel), "ci", testCITokenScopes, time.Now().Add(time.Hour), time.Now())
		return domain.TokenPrincipal(tok, rel), nil
	}
	if secret == testAdminToken {
		return domain.RootPrincipal(), nil
	}
	if name, ok := strings.CutPrefix(secret, "role-"); ok {
		if r, err := domain.ParseRole(name); err == nil {
			return domain.UserPrincipal(testUser(r)), nil
		}
	}
	return domain.Principal{}, domain.ErrUnauthorized
}

// testPassword is the password fakeAccounts.SignIn admits, for any name.
const testPassword = "hunter2-password"

func (a fakeAccounts) SessionUser(context.Context, domain.AccountRef) (domain.Principal, error) {
	return domain.Principal{}, domain.ErrUnauthorized
}

// SignInExternal is the console's (single sign-on); the API never calls it.
func (a fakeAccounts) SignInExternal(context.Context, ports.ExternalIdentity) (domain.Principal, error) {
	return domain.Principal{}, domain.ErrUnauthorized
}

func (a fakeAccounts) SignIn(_ context.Context, _, password string) (domain.Principal, error) {
	if password != testPassword {
		return domain.Principal{}, domain.ErrUnauthorized
	}
	return domain.UserPrincipal(testUser(domain.RoleAdmin)), nil
}

func (a fakeAccounts) CreateUser(_ context.Context, _ domain.Actor, req ports.NewUser) (domain.User, error) {
	a.f.record("CreateUser", req.Username)
	return testUser(domain.RoleViewer), nil
}

func (a fakeAccounts) RemoveUser(_ context.Context, _ domain.Actor, name string) error {
	a.f.record("RemoveUser", name)
	return nil
}

func (a fakeAccounts) ListUsers(context.Context, domain.Principal) ([]domain.User, error) {
	return nil, nil
}

func (a fakeAccounts) CreateToken(_ context.Context, _ domain.Actor, req ports.NewAPIToken) (ports.APITokenCredentials, error) {
	a.f.record("CreateToken", req.Name)
	tok, secret, err := domain.NewAPIToken(testArtifactID, domain.UserPrincipal(testUser(domain.RoleAdmin)), req.Name,
		testCITokenScopes, time.Now().Add(time.Hour), time.Now())
	return ports.APITokenCredentials{Token: tok, Secret: secret}, err
}

func (a fakeAccounts) ListTokens(context.Context, domain.Principal) ([]domain.APIToken, error) {
	return nil, nil
}

func (a fakeAccounts) RevokeToken(_ context.Context, _ domain.Actor, id domain.UUID) (domain.APIToken, error) {
	a.f.record("RevokeToken", id.String())
	tok, _, err := domain.NewAPIToken(id, domain.UserPrincipal(testUser(domain.RoleAdmin)), "ci", testCITokenScopes, time.Now().Add(time.Hour), time.Now())
	return tok.Revoke(time.Now()), err
}

// recordingArtifacts logs the artifact service's changes in the fake
// services' log.
type recordingArtifacts struct {
	*fakeArtifacts
	f *fakeServices
}

func (r recordingArtifacts) Upload(ctx context.Context, actor domain.Actor, up ports.ArtifactUpload) (domain.Artifact, bool, error) {
	r.f.record("Upload")
	return r.fakeArtifacts.Upload(ctx, actor, up)
}

func (r recordingArtifacts) DeleteArtifact(ctx context.Context, actor domain.Actor, id domain.UUID) error {
	r.f.record("DeleteArtifact", id.String())
	return r.fakeArtifacts.DeleteArtifact(ctx, actor, id)
}

var mutating = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// TestAdminRoutesRefuseWhoLacksThePermission is the one table over every
// /api/v1/admin operation of the OpenAPI document (another adapter's
// included: they are mounted here as recording stubs), so that a new route
// cannot be forgotten: its x-permission is the route table's, without
// credentials it is 401, and for the root token, every role and a scoped
// token it is allowed or refused as the role table says — refused being
// 403 FORBIDDEN with no service called (nothing changed).
func TestAdminRoutesRefuseWhoLacksThePermission(t *testing.T) {
	doc := loadSpec(t)
	fake := &fakeServices{}
	type op struct{ method, path, perm string }
	var ops []op
	var mounts []httpedge.Mount
	for path, item := range doc.Paths.Map() {
		if !strings.HasPrefix(path, APIPrefix+"/admin/") {
			continue
		}
		for method, o := range item.Operations() {
			perm, _ := o.Extensions["x-permission"].(string)
			ops = append(ops, op{method, path, perm})
			if o.Extensions["x-served-by"] != nil {
				// Another adapter names its parameters as it likes (Mender's
				// "/tasks/:id/log" is the document's {task_id}).
				echoPath := routeParam.ReplaceAllString(strings.TrimPrefix(path, APIPrefix+"/admin"), ":other_name")
				mounts = append(mounts, func(add func(string, string, echo.HandlerFunc, ...echo.MiddlewareFunc)) {
					add(method, echoPath, func(c echo.Context) error {
						fake.record("mounted " + method + " " + path)
						return c.NoContent(http.StatusNoContent)
					})
				})
			}
		}
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := NewServer(Config{AdminToken: testAdminToken, AdminMounts: mounts}, fake, fake, nil, nil, nil, logger,
		WithFleet(fake), WithArtifacts(recordingArtifacts{&fakeArtifacts{}, fake}), WithAccounts(fakeAccounts{fake}),
		WithAudit(newTestAudit(t, &testAuditLog{})), WithWebhooks(newFakeWebhooks(fake)))
	h := &harness{e: e, fake: fake, logs: logs}
	if len(ops) < 30 {
		t.Fatalf("only %d admin operations in the document", len(ops))
	}
	params := strings.NewReplacer("{device_id}", "dev-1", "{id}", testArtifactID.String(), "{task_id}", testArtifactID.String(), "{name}", "bob")
	principals := testPrincipals(t)
	for _, o := range ops {
		key := o.method + " " + o.path
		want, ok := adminPermissions[key]
		if !ok || string(want) != o.perm {
			t.Errorf("%s: x-permission %q, the route table says %q", key, o.perm, want)
			continue
		}
		url := params.Replace(o.path)
		if rec := h.do(t, req{method: o.method, path: url, body: "{}"}); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s without credentials: %d, want 401", key, rec.Code)
		}
		for bearer, p := range principals {
			before := len(fake.called())
			rec := h.do(t, req{method: o.method, path: url, token: bearer, body: "{}"})
			switch {
			case p.Can(want) && (rec.Code == http.StatusForbidden || rec.Code == http.StatusUnauthorized):
				t.Errorf("%s as %s (%v): refused %d, want allowed; %s", key, p, p.Permissions().List(), rec.Code, rec.Body)
			case !p.Can(want) && rec.Code != http.StatusForbidden:
				t.Errorf("%s as %s: %d, want 403; %s", key, p, rec.Code, rec.Body)
			case !p.Can(want):
				if d := wantError(t, rec, http.StatusForbidden, httpedge.CodeForbidden); strings.Contains(d.Message, "lacks") {
					t.Errorf("%s: the 403 names internals: %q", key, d.Message)
				}
				if slices.Contains(mutating, o.method) && len(fake.called()) != before {
					t.Errorf("%s as %s was refused but called %v", key, p, fake.called()[before:])
				}
			}
		}
	}
	// A password mints a token, and authenticates nothing else.
	basic := map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("bob:"+testPassword))}
	mint := req{method: http.MethodPost, path: APIPrefix + "/admin/tokens", body: `{"name":"x","scopes":["read"],"expires_at":"2030-01-01T00:00:00Z"}`, header: basic}
	if rec := h.do(t, mint); rec.Code != http.StatusCreated {
		t.Errorf("minting with a password: %d %s", rec.Code, rec.Body)
	}
	if rec := h.do(t, req{method: http.MethodGet, path: APIPrefix + "/admin/users", header: basic}); rec.Code != http.StatusUnauthorized {
		t.Errorf("a password on another route: %d, want 401", rec.Code)
	}
	mint.header = map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("bob:wrong-password"))}
	if rec := h.do(t, mint); rec.Code != http.StatusUnauthorized {
		t.Errorf("a wrong password: %d", rec.Code)
	}
	// None of the secrets above is logged.
	for _, secret := range []string{"ci-token", testAdminToken, "role-admin", "hunter2", "Ym9i"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the secret %q reached the log", secret)
		}
	}
	if !strings.Contains(logs.String(), "/admin/tokens") {
		t.Error("the log holds no request: the check above proves nothing")
	}
}

// TestAdminRouteWithoutPermissionPanics: a route the table does not name
// cannot be served (it would be open to every operator).
func TestAdminRouteWithoutPermissionPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewServer served an admin route without a permission")
		}
	}()
	mount := httpedge.Mount(func(add func(string, string, echo.HandlerFunc, ...echo.MiddlewareFunc)) {
		add(http.MethodPost, "/unlisted", func(c echo.Context) error { return nil })
	})
	NewServer(Config{AdminToken: testAdminToken, AdminMounts: []httpedge.Mount{mount}}, &fakeServices{}, &fakeServices{}, nil, nil, nil, nil)
}
