package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/tests/testenv"
)

const rootToken = "audit-root-token-0123456789"

const password = "correct horse battery"

// caller is one principal of the table: the root, a user's token with all
// of the user's role, or a narrower scoped token.
type caller struct {
	name   string // for messages
	bearer string
	perms  domain.PermissionSet
	kind   string // actor_kind as recorded
	user   string // actor_user ("" for the root)
	token  string // actor_token ("" for the root)
}

type rig struct {
	t    *testing.T
	url  string
	db   *sqlx.DB
	reqs *postgres.AuthRequestRepository
}

type answer struct {
	status int
	body   map[string]any
	raw    string
}

func (r rig) call(method, path, auth string, body []byte, contentType, requestID string) answer {
	r.t.Helper()
	req, err := http.NewRequest(method, r.url+path, bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	if auth != "" {
		if !strings.HasPrefix(auth, "Basic ") {
			auth = "Bearer " + auth
		}
		req.Header.Set("Authorization", auth)
	}
	if contentType == "" && body != nil {
		contentType = "application/json"
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if requestID != "" {
		req.Header.Set("X-Request-ID", requestID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

// root makes a change as the root (setting up a case), which must succeed.
func (r rig) root(method, path string, body any, want int) map[string]any {
	r.t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	a := r.call(method, path, rootToken, b, "", "")
	if a.status != want {
		r.t.Fatalf("setting up: %s %s: %d %s", method, path, a.status, a.raw)
	}
	return a.body
}

func (r rig) mint(user string, scopes []domain.Permission) (secret, id string) {
	r.t.Helper()
	names := make([]string, len(scopes))
	for i, p := range scopes {
		names[i] = string(p)
	}
	b, _ := json.Marshal(map[string]any{"name": "t-" + uuid.NewString()[:8], "scopes": names,
		"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	a := r.call(http.MethodPost, "/api/v1/admin/tokens", basic, b, "", "")
	if a.status != http.StatusCreated {
		r.t.Fatalf("minting a token for %s: %d %s", user, a.status, a.raw)
	}
	return a.body["token"].(string), a.body["id"].(string)
}

func uniq(prefix string) string { return prefix + "-" + uuid.NewString()[:8] }

func publicKeyPEM(t *testing.T) string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(pub)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// op is one mutating route; prepare makes a fresh target for c (as the
// root) and says the path, the body and its type.
type op struct {
	method, route string
	prepare       func(c caller) (path string, body []byte, contentType string)
	// refusedTo names callers who hold the permission and are still
	// refused, as documented (the root has no user to own an API token).
	refusedTo func(c caller) bool
}

func js(v any) []byte { b, _ := json.Marshal(v); return b }

// TestEveryChangeWritesOneRecord: for every mutating admin route of the
// OpenAPI document, for the root, each role and a scoped token, the route
// is allowed or refused (403) as the role table says; each allowed change
// writes exactly one audit record, in its request, naming its actor; each
// refused one writes none.
func TestEveryChangeWritesOneRecord(t *testing.T) {
	db, dbURL := testenv.PostgresDB(t)
	// The webhook subscriptions point at a receiver on loopback, which
	// deliveries may reach only when allowed.
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer receiver.Close()
	o := testenv.StartOtad(t, testenv.OtadConfig{Name: "audit", DatabaseURL: dbURL, RedisURL: testenv.RedisURL(t), AdminToken: rootToken,
		// Every token here is minted with a password, from this one address:
		// more attempts than the sign-in budget's default burst.
		Env: map[string]string{"OTA_WEBHOOK_ALLOW_PRIVATE": "true", "OTA_CONSOLE_SIGNIN_RATE_BURST": "1000"}})
	r := rig{t: t, url: o.URL, db: db, reqs: postgres.NewAuthRequestRepository(db)}

	callers := []caller{{name: "root", bearer: rootToken, perms: domain.RootPrincipal().Permissions(), kind: "root"}}
	for _, role := range domain.Roles() {
		user := uniq(strings.ReplaceAll(string(role), "_", "-"))
		r.root(http.MethodPost, "/api/v1/admin/users", map[string]any{"username": user, "role": string(role), "password": password}, 201)
		perms := domain.RolePermissions(role)
		secret, id := r.mint(user, perms.List())
		callers = append(callers, caller{name: string(role), bearer: secret, perms: perms, kind: "token", user: user, token: id})
	}
	ci := uniq("ci")
	r.root(http.MethodPost, "/api/v1/admin/users", map[string]any{"username": ci, "role": "releaser", "password": password}, 201)
	ciScopes := domain.PermissionsOf(domain.PermArtifactsWrite, domain.PermFirmwareWrite)
	secret, id := r.mint(ci, ciScopes.List())
	callers = append(callers, caller{name: "ci token", bearer: secret, perms: ciScopes, kind: "token", user: ci, token: id})

	device := func() string {
		d := uniq("dev")
		r.root(http.MethodPost, "/api/v1/admin/devices", map[string]any{"device_id": d, "model": "cam-audit"}, 201)
		return d
	}
	firmware := func() string {
		return r.root(http.MethodPost, "/api/v1/admin/firmwares", map[string]any{"model": uniq("cam"), "version": "1.0.0",
			"url": "https://files.example/fw.bin", "size_bytes": 10, "sha256": strings.Repeat("c", 64)}, 201)["id"].(string)
	}
	artifact := func() string {
		a := r.call(http.MethodPost, "/api/v1/admin/artifacts?filename="+uniq("fw")+".bin", rootToken,
			[]byte("firmware "+uuid.NewString()), "application/octet-stream", "")
		if a.status != http.StatusCreated {
			t.Fatalf("uploading: %d %s", a.status, a.raw)
		}
		return a.body["id"].(string)
	}
	pending := func() string {
		key, err := domain.ParseDeviceKey("public_key", publicKeyPEM(t))
		if err != nil {
			t.Fatal(err)
		}
		d, err := domain.ParseDeviceID(uniq("mender"))
		if err != nil {
			t.Fatal(err)
		}
		var made domain.AuthRequest
		if err := r.reqs.Ask(t.Context(), d, key, func(*domain.AuthRequest, int) (*domain.AuthRequest, error) {
			q, err := domain.NewAuthRequest(domain.UUIDOf(uuid.New()), d, `{"device_id":"`+d.String()+`"}`, key, "", time.Now())
			made = q
			return &q, err
		}); err != nil {
			t.Fatal(err)
		}
		return made.ID().String()
	}
	webhook := func() string {
		return r.root(http.MethodPost, "/api/v1/admin/webhooks", map[string]any{"url": receiver.URL + "/" + uniq("hook"),
			"event_types": []string{"task.failed"}}, 201)["id"].(string)
	}
	ops := []op{
		{method: "POST", route: "/api/v1/admin/devices", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/devices", js(map[string]any{"device_id": uniq("dev"), "model": "cam-audit"}), ""
		}},
		{method: "POST", route: "/api/v1/admin/devices/{device_id}/token", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/devices/" + device() + "/token", nil, ""
		}},
		{method: "PUT", route: "/api/v1/admin/devices/{device_id}/tags", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/devices/" + device() + "/tags", js(map[string]any{"tags": []string{"lab"}}), ""
		}},
		{method: "POST", route: "/api/v1/admin/devices/tags", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/devices/tags", js(map[string]any{"device_ids": []string{device(), device()}, "add": []string{"eu"}}), ""
		}},
		{method: "POST", route: "/api/v1/admin/devices/pending/{id}/accept", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/devices/pending/" + pending() + "/accept", js(map[string]any{"model": "cam-audit"}), ""
		}},
		{method: "POST", route: "/api/v1/admin/devices/pending/{id}/reject", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/devices/pending/" + pending() + "/reject", nil, ""
		}},
		{method: "DELETE", route: "/api/v1/admin/devices/pending/{id}", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/devices/pending/" + pending(), nil, ""
		}},
		{method: "PUT", route: "/api/v1/admin/devices/{device_id}/public_key", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/devices/" + device() + "/public_key", js(map[string]any{"public_key": publicKeyPEM(t)}), ""
		}},
		{method: "POST", route: "/api/v1/admin/firmwares", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/firmwares", js(map[string]any{"model": uniq("cam"), "version": "1.0.0",
				"url": "https://files.example/fw.bin", "size_bytes": 10, "sha256": strings.Repeat("d", 64)}), ""
		}},
		{method: "POST", route: "/api/v1/admin/firmwares/{id}/revoke", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/firmwares/" + firmware() + "/revoke", nil, ""
		}},
		{method: "POST", route: "/api/v1/admin/artifacts", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/artifacts?filename=" + uniq("fw") + ".bin", []byte("image " + uuid.NewString()), "application/octet-stream"
		}},
		{method: "DELETE", route: "/api/v1/admin/artifacts/{id}", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/artifacts/" + artifact(), nil, ""
		}},
		{method: "POST", route: "/api/v1/admin/rollouts", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/rollouts", js(map[string]any{"firmware_id": firmware(), "percentage": 10}), ""
		}},
		{method: "PATCH", route: "/api/v1/admin/rollouts/{id}", prepare: func(caller) (string, []byte, string) {
			ro := r.root(http.MethodPost, "/api/v1/admin/rollouts", map[string]any{"firmware_id": firmware(), "percentage": 10}, 201)
			return "/api/v1/admin/rollouts/" + ro["id"].(string), js(map[string]any{"percentage": 20}), ""
		}},
		{method: "POST", route: "/api/v1/admin/users", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/users", js(map[string]any{"username": uniq("new"), "role": "viewer", "password": password}), ""
		}},
		{method: "DELETE", route: "/api/v1/admin/users/{name}", prepare: func(caller) (string, []byte, string) {
			u := uniq("gone")
			r.root(http.MethodPost, "/api/v1/admin/users", map[string]any{"username": u, "role": "viewer", "password": password}, 201)
			return "/api/v1/admin/users/" + u, nil, ""
		}},
		{method: "POST", route: "/api/v1/admin/tokens", prepare: func(c caller) (string, []byte, string) {
			scope := c.perms.List()[0]
			// Within the caller's own token's hour: a token mints none that outlives it.
			return "/api/v1/admin/tokens", js(map[string]any{"name": uniq("tok"), "scopes": []string{string(scope)},
				"expires_at": time.Now().Add(30 * time.Minute).UTC().Format(time.RFC3339)}), ""
		}, refusedTo: func(c caller) bool { return c.user == "" }},
		{method: "DELETE", route: "/api/v1/admin/tokens/{id}", prepare: func(c caller) (string, []byte, string) {
			owner := c.user
			if owner == "" {
				owner = callers[1].user // the root revokes anyone's
			}
			_, id := r.mint(owner, []domain.Permission{domain.PermRead})
			return "/api/v1/admin/tokens/" + id, nil, ""
		}},
	}
	ops = append(ops,
		op{method: "POST", route: "/api/v1/admin/webhooks", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/webhooks", js(map[string]any{"url": receiver.URL + "/" + uniq("hook")}), ""
		}},
		op{method: "PATCH", route: "/api/v1/admin/webhooks/{id}", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/webhooks/" + webhook(), js(map[string]any{"enabled": false, "rotate_secret": true}), ""
		}},
		op{method: "DELETE", route: "/api/v1/admin/webhooks/{id}", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/webhooks/" + webhook(), nil, ""
		}},
		op{method: "POST", route: "/api/v1/admin/webhooks/{id}/test", prepare: func(caller) (string, []byte, string) {
			return "/api/v1/admin/webhooks/" + webhook() + "/test", nil, ""
		}},
	)
	checkCoversDocument(t, ops)

	for _, c := range callers {
		for _, o := range ops {
			path, body, ct := o.prepare(c)
			rid := uuid.NewString()
			a := r.call(o.method, path, c.bearer, body, ct, rid)
			perm := routePermission(t, o.method, o.route)
			allowed := c.perms.Has(perm) && (o.refusedTo == nil || !o.refusedTo(c))
			var kinds []string
			var users, tokens []string
			if err := db.Select(&kinds, `SELECT actor_kind FROM audit_log WHERE request_id = $1`, rid); err != nil {
				t.Fatal(err)
			}
			if err := db.Select(&users, `SELECT coalesce(actor_user, '') FROM audit_log WHERE request_id = $1`, rid); err != nil {
				t.Fatal(err)
			}
			if err := db.Select(&tokens, `SELECT coalesce(actor_token::text, '') FROM audit_log WHERE request_id = $1`, rid); err != nil {
				t.Fatal(err)
			}
			switch {
			case allowed && (a.status < 200 || a.status > 299):
				t.Errorf("%s %s as %s: %d %s, want allowed", o.method, o.route, c.name, a.status, a.raw)
			case allowed && len(kinds) != 1:
				t.Errorf("%s %s as %s: %d audit records, want 1", o.method, o.route, c.name, len(kinds))
			case allowed && (kinds[0] != c.kind || users[0] != c.user || tokens[0] != c.token):
				t.Errorf("%s %s as %s: recorded actor %s/%s/%s, want %s/%s/%s", o.method, o.route, c.name,
					kinds[0], users[0], tokens[0], c.kind, c.user, c.token)
			case !allowed && a.status != http.StatusForbidden:
				t.Errorf("%s %s as %s: %d %s, want 403", o.method, o.route, c.name, a.status, a.raw)
			case !allowed && len(kinds) != 0:
				t.Errorf("%s %s as %s was refused but wrote %d audit records", o.method, o.route, c.name, len(kinds))
			}
		}
	}
}

var specRoute = regexp.MustCompile(`(?m)^  (/api/v1/admin/\S+):\s*$`)
var specMethod = regexp.MustCompile(`(?m)^    (get|post|put|patch|delete):\s*$`)
var specPermission = regexp.MustCompile(`(?m)^      x-permission:\s*(\S+)\s*$`)

// spec reads the OpenAPI document's admin operations and their
// permissions (method + " " + route → x-permission).
func spec(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../../adapters/rest/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	out := map[string]string{}
	routes := specRoute.FindAllStringSubmatchIndex(doc, -1)
	for i, m := range routes {
		end := len(doc)
		if i+1 < len(routes) {
			end = routes[i+1][0]
		}
		route, block := doc[m[2]:m[3]], doc[m[1]:end]
		// the next top-level path (not an admin one) ends the block too
		if j := regexp.MustCompile(`(?m)^  /`).FindStringIndex(block); j != nil {
			block = block[:j[0]]
		}
		methods := specMethod.FindAllStringSubmatchIndex(block, -1)
		for k, mm := range methods {
			mend := len(block)
			if k+1 < len(methods) {
				mend = methods[k+1][0]
			}
			perm := specPermission.FindStringSubmatch(block[mm[1]:mend])
			if perm != nil {
				out[strings.ToUpper(block[mm[2]:mm[3]])+" "+route] = perm[1]
			}
		}
	}
	return out
}

func routePermission(t *testing.T, method, route string) domain.Permission {
	p, ok := spec(t)[method+" "+route]
	if !ok {
		t.Fatalf("%s %s is not in the OpenAPI document", method, route)
	}
	return domain.Permission(p)
}

// checkCoversDocument: the table names every mutating admin operation
// of the document, so that a new route cannot go unaudited unnoticed.
func checkCoversDocument(t *testing.T, ops []op) {
	t.Helper()
	var want, have []string
	for k := range spec(t) {
		if !strings.HasPrefix(k, "GET ") {
			want = append(want, k)
		}
	}
	for _, o := range ops {
		have = append(have, o.method+" "+o.route)
	}
	sort.Strings(want)
	sort.Strings(have)
	if !slices.Equal(want, have) {
		t.Fatalf("the table's routes differ from the document's mutating admin operations:\n table: %v\n  spec: %v", have, want)
	}
}
