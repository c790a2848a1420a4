package integration

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestAuditOverHTTP: changes made over the API by root, a user and the
// user's token are read back from GET /admin/audit on Postgres, newest
// first, each naming its actor; the filters and the cursor select them;
// no secret (a password, a token) is in any record; a releaser may not
// read the log.
func TestAuditOverHTTP(t *testing.T) {
	s := newStack(t)
	name := "aud-" + uuid.NewString()[:8]
	const password = "correct horse battery"
	s.ok(call{method: "POST", path: "/api/v1/admin/users", token: adminToken,
		body: js(map[string]any{"username": name, "role": "releaser", "password": password})}, 201)
	req, _ := http.NewRequest("POST", s.srv.URL+"/api/v1/admin/tokens", strings.NewReader(string(js(map[string]any{
		"name": "ci", "scopes": []string{"firmware:write"}, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}))))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(name+":"+password)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tok map[string]any
	_ = jsonDecode(resp, &tok)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("minting: %d %v", resp.StatusCode, tok)
	}
	secret, tokID := tok["token"].(string), tok["id"].(string)
	fw := s.ok(call{method: "POST", path: "/api/v1/admin/firmwares", token: secret, body: js(map[string]any{
		"model": "cam-aud", "version": "1.0.0", "url": "https://files.example/fw.bin", "size_bytes": 10, "sha256": strings.Repeat("b", 64)})}, 201)

	list := func(q url.Values) ([]map[string]any, string) {
		t.Helper()
		body := s.ok(call{method: "GET", path: "/api/v1/admin/audit?" + q.Encode(), token: adminToken}, 200)
		raw, _ := json.Marshal(body)
		if strings.Contains(string(raw), password) || strings.Contains(string(raw), strings.TrimPrefix(secret, "ota_")) {
			t.Fatalf("a secret is in the audit log: %s", raw)
		}
		var items []map[string]any
		for _, it := range body["items"].([]any) {
			items = append(items, it.(map[string]any))
		}
		next, _ := body["next"].(string)
		return items, next
	}
	actions := func(items []map[string]any) string {
		var out []string
		for _, it := range items {
			out = append(out, it["action"].(string))
		}
		return strings.Join(out, " ")
	}
	all, _ := list(url.Values{})
	if got := actions(all); got != "firmware.publish api_token.create user.create" {
		t.Fatalf("records %q, want firmware.publish api_token.create user.create", got)
	}
	pub, mint, create := all[0], all[1], all[2]
	if pub["actor_kind"] != "token" || !strings.Contains(pub["actor"].(string), tokID) || pub["target"] != fw["id"] || pub["before"] != nil {
		t.Errorf("the publish's record: %v", pub)
	}
	if after, ok := pub["after"].(map[string]any); !ok || after["version"] != "1.0.0" {
		t.Errorf("the publish's after state: %#v", pub["after"])
	}
	if mint["actor"] != "user:"+name || mint["actor_kind"] != "user" {
		t.Errorf("the token's creation: %v", mint)
	}
	if create["actor"] != "root" || create["target"] != name || create["request_id"] == "" {
		t.Errorf("the user's creation: %v", create)
	}
	for q, want := range map[string]string{
		"actor=" + name:              "firmware.publish api_token.create",
		"actor=" + tokID:             "firmware.publish",
		"actor=root":                 "user.create",
		"target=" + name:             "user.create",
		"action=api_token.create":    "api_token.create",
		"until=2000-01-01T00:00:00Z": "",
		"since=" + url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)): "firmware.publish api_token.create user.create",
	} {
		v, _ := url.ParseQuery(q)
		if items, _ := list(v); actions(items) != want {
			t.Errorf("%s: %q, want %q", q, actions(items), want)
		}
	}
	var paged []map[string]any
	q := url.Values{"limit": {"1"}}
	for range 4 {
		items, next := list(q)
		paged = append(paged, items...)
		if next == "" {
			break
		}
		q.Set("after", next)
	}
	if got := actions(paged); got != actions(all) {
		t.Errorf("paging one at a time: %q, want %q", got, actions(all))
	}
	if code, body, _ := s.do(call{method: "GET", path: "/api/v1/admin/audit", token: secret}); code != 403 {
		t.Errorf("a releaser's token read the audit log: %d %v", code, body)
	}
}
