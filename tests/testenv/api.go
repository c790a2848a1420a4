package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// CallJSON calls url with method, the Authorization header auth and body as
// JSON (none when nil), and returns the answer's JSON object (nil when it
// is not one), status and raw body. It does not fail the test, so that it
// may run on goroutines of its own and inside wait conditions.
func CallJSON(method, url, auth string, body any) (map[string]any, int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return nil, 0, nil, err
	}
	req.Header.Set("Authorization", auth)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, res.StatusCode, raw, err
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m, res.StatusCode, raw, nil
}

// PostJSON posts body as JSON to url with the bearer token and returns the
// answer's status and its JSON object (nil when the answer is not one):
// the admin calls of the tests that drive a running otad.
func PostJSON(t testing.TB, url, token string, body any) (int, map[string]any) {
	t.Helper()
	out, status, _, err := CallJSON(http.MethodPost, url, "Bearer "+token, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, out
}

// ListTasks lists a device's tasks through the admin API of the otad at
// baseURL, decoding each into T (the fields a test reads). It does not fail
// the test, for conditions checked from other goroutines.
func ListTasks[T any](baseURL, adminToken, device string) ([]T, error) {
	_, status, raw, err := CallJSON(http.MethodGet, baseURL+"/api/v1/admin/tasks?device_id="+url.QueryEscape(device), "Bearer "+adminToken, nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("listing tasks of %s: %d %s", device, status, raw)
	}
	var page struct {
		Items []T `json:"items"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, err
	}
	return page.Items, nil
}

// UploadArtifact stores the file at path in the otad at baseURL (POST
// /api/v1/admin/artifacts, a raw body named after the file) with the admin
// token, and returns the new artifact's id; anything but 201 fails t.
func UploadArtifact(t testing.TB, baseURL, adminToken, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	req, err := http.NewRequest(http.MethodPost, baseURL+"/api/v1/admin/artifacts?filename="+url.QueryEscape(filepath.Base(path)), f)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/octet-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var a struct {
		ID string `json:"id"`
	}
	if res.StatusCode != http.StatusCreated || json.Unmarshal(body, &a) != nil || a.ID == "" {
		t.Fatalf("upload: %d %s", res.StatusCode, body)
	}
	return a.ID
}
