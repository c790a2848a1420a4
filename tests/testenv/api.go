package testenv

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// PostJSON posts body as JSON to url with the bearer token and returns the
// answer's status and its JSON object (nil when the answer is not one):
// the admin calls of the tests that drive a running otad.
func PostJSON(t testing.TB, url, token string, body any) (int, map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}
