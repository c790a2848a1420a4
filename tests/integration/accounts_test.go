package integration

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestAccountsOverHTTP: an admin makes a releaser, who mints a CI token
// with their password; the token may publish firmware and nothing else
// (403, nothing written), cannot mint a wider token, and fails with 401
// from the request after its user is removed.
func TestAccountsOverHTTP(t *testing.T) {
	s := newStack(t)
	name := "rel-" + uuid.NewString()[:8]
	const password = "correct horse battery"
	user := js(map[string]any{"username": name, "role": "releaser", "password": password})
	s.ok(call{method: "POST", path: "/api/v1/admin/users", token: adminToken, body: user}, 201)
	if code, body, _ := s.do(call{method: "POST", path: "/api/v1/admin/users", token: adminToken, body: user}); code != 409 || body["error"].(map[string]any)["code"] != "USER_EXISTS" {
		t.Fatalf("a second %s: %d %v", name, code, body)
	}

	mint := func(auth string, scopes ...string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", s.srv.URL+"/api/v1/admin/tokens", strings.NewReader(string(js(map[string]any{
			"name": "ci", "scopes": scopes, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}))))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = jsonDecode(resp, &out)
		return resp.StatusCode, out
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(name+":"+password))
	if code, _ := mint("Basic " + base64.StdEncoding.EncodeToString([]byte(name+":wrong password!"))); code != 401 {
		t.Fatalf("a wrong password: %d", code)
	}
	code, tok := mint(basic, "firmware:write", "api_tokens:write")
	if code != 201 || !strings.HasPrefix(tok["token"].(string), "ota_") {
		t.Fatalf("minting: %d %v", code, tok)
	}
	secret := tok["token"].(string)

	s.ok(call{method: "POST", path: "/api/v1/admin/firmwares", token: secret, body: js(map[string]any{
		"model": "cam-acc", "version": "1.0.0", "url": "https://files.example/fw.bin", "size_bytes": 10, "sha256": strings.Repeat("b", 64)})}, 201)
	before := s.digest()
	for _, c := range []call{
		{method: "POST", path: "/api/v1/admin/devices", token: secret, body: js(map[string]any{"device_id": "dev-acc", "model": "cam-acc"})},
		{method: "POST", path: "/api/v1/admin/users", token: secret, body: js(map[string]any{"username": "mallory", "role": "admin", "password": password})},
		{method: "GET", path: "/api/v1/admin/firmwares", token: secret},
	} {
		if code, body, _ := s.do(c); code != 403 || body["error"].(map[string]any)["code"] != "FORBIDDEN" {
			t.Errorf("%s %s with a firmware token: %d %v, want 403", c.method, c.path, code, body)
		}
	}
	if code, body := mint("Bearer "+secret, "firmware:write", "artifacts:write"); code != 403 {
		t.Errorf("a token minting a wider token: %d %v", code, body)
	}
	if after := s.digest(); after != before {
		t.Errorf("refused requests wrote:\n%s\n%s", before, after)
	}

	// The listings: the user among the users, and the token among the
	// user's own, by name and never with its secret.
	listed := func(path, token, field, want string) map[string]any {
		t.Helper()
		for _, it := range s.ok(call{method: "GET", path: path, token: token}, 200)["items"].([]any) {
			if item := it.(map[string]any); item[field] == want {
				return item
			}
		}
		t.Fatalf("GET %s does not list %s %q", path, field, want)
		return nil
	}
	listed("/api/v1/admin/users", adminToken, "username", name)
	code, reader := mint(basic, "read")
	if code != 201 {
		t.Fatalf("minting a read token: %d %v", code, reader)
	}
	if item := listed("/api/v1/admin/tokens", reader["token"].(string), "name", "ci"); item["token"] != nil {
		t.Errorf("a token's listing shows its secret: %v", item)
	}
	s.ok(call{method: "DELETE", path: "/api/v1/admin/users/" + name, token: adminToken}, 204)
	if code, body, _ := s.do(call{method: "POST", path: "/api/v1/admin/firmwares", token: secret, body: js(map[string]any{
		"model": "cam-acc", "version": "1.0.1", "url": "https://files.example/fw.bin", "size_bytes": 10, "sha256": strings.Repeat("b", 64)})}); code != 401 {
		t.Errorf("a removed user's token: %d %v, want 401", code, body)
	}
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }
