package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// requestTimeout bounds every call; the slowest legitimate answer is a
// drained request during shutdown.
const requestTimeout = 30 * time.Second

// exchange is one request and its response, kept for the OpenAPI
// conformance check.
type exchange struct {
	test      string
	method    string
	url       string
	reqHeader http.Header
	reqBody   []byte
	status    int
	header    http.Header
	body      []byte
}

// recorder keeps every exchange of every test of the binary.
type recorder struct {
	mu    sync.Mutex
	items []exchange
}

var recorded = &recorder{}

func (r *recorder) add(x exchange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items = append(r.items, x)
}

func (r *recorder) all() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.items)
}

// client talks to one instance and records everything it sees.
type client struct {
	inst *instance
	hc   *http.Client
}

func newClient(t *testing.T, inst *instance) *client {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{inst: inst, hc: &http.Client{Transport: tr}}
}

// call is one request. body is sent as is when it is a string or []byte,
// else as its JSON encoding; contentType defaults to application/json when
// there is a body.
type call struct {
	method      string
	path        string
	token       string
	body        any
	contentType string
	requestID   string
}

// response is what came back.
type response struct {
	status  int
	header  http.Header
	body    []byte
	elapsed time.Duration
}

func (r *response) String() string {
	b := string(r.body)
	if len(b) > 600 {
		b = b[:600] + "…"
	}
	return fmt.Sprintf("%d %s", r.status, b)
}

// errorCode is the code of an error body ("" if the body is not one).
func (r *response) errorCode() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

// try sends the request and records the exchange. On every response it
// checks what docs/ERRORS.md promises of all of them: an X-Request-ID (the
// caller's when it sent a sane one) and, on errors, the exact
// {"error":{"code","message","request_id"}} shape with request_id equal to
// the header. It is safe to use from several goroutines; transport errors
// are returned, contract violations reported on t.
func (c *client) try(t testing.TB, cl call) (*response, error) {
	t.Helper()
	var body []byte
	switch b := cl.body.(type) {
	case nil:
	case []byte:
		body = b
	case string:
		body = []byte(b)
	default:
		var err error
		if body, err = json.Marshal(b); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, c.inst.URL+cl.path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		ct := cl.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if cl.token != "" {
		req.Header.Set("Authorization", "Bearer "+cl.token)
	}
	if cl.requestID != "" {
		req.Header.Set("X-Request-ID", cl.requestID)
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s on otad %s: %w", cl.method, cl.path, c.inst.Name, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s on otad %s: reading the body: %w", cl.method, cl.path, c.inst.Name, err)
	}
	r := &response{status: resp.StatusCode, header: resp.Header.Clone(), body: rb, elapsed: time.Since(start)}
	recorded.add(exchange{
		test: t.Name(), method: cl.method, url: req.URL.String(), reqHeader: req.Header.Clone(), reqBody: body,
		status: r.status, header: r.header, body: rb,
	})
	if err := checkEnvelope(cl.path, cl.requestID, r); err != nil {
		t.Errorf("%s %s on otad %s: %v\nresponse: %s", cl.method, cl.path, c.inst.Name, err, r)
	}
	return r, nil
}

// do is try for the test's own goroutine: a transport error ends the test.
func (c *client) do(t testing.TB, cl call) *response {
	t.Helper()
	r, err := c.try(t, cl)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var saneRequestID = regexp.MustCompile(`^[\x20-\x7e]{1,128}$`)

// checkEnvelope checks the request id and, for errors, the error body.
// /readyz is the one documented exception: its 503 is the readiness report
// ({"status":"unavailable","checks":{…}}), not an error.
func checkEnvelope(path, sentID string, r *response) error {
	id := r.header.Get("X-Request-ID")
	switch {
	case len(r.header.Values("X-Request-ID")) != 1:
		return fmt.Errorf("want exactly one X-Request-ID header, got %q", r.header.Values("X-Request-ID"))
	case !saneRequestID.MatchString(id):
		return fmt.Errorf("X-Request-ID %q is not 1-128 printable characters", id)
	case sentID != "" && saneRequestID.MatchString(sentID) && id != sentID:
		return fmt.Errorf("X-Request-ID = %q, want the caller's %q", id, sentID)
	}
	if r.status < 400 || path == "/readyz" && r.status == http.StatusServiceUnavailable {
		return nil
	}
	return checkErrorBody(r.body, id)
}

// checkErrorBody checks that body is exactly {"error":{"code","message",
// "request_id"}}, all non-empty strings, request_id equal to the header,
// and that the message leaks no internals.
func checkErrorBody(body []byte, headerID string) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return fmt.Errorf("error body is not a JSON object: %v", err)
	}
	if len(top) != 1 || top["error"] == nil {
		return fmt.Errorf("error body must have exactly the key \"error\", has %v", keys(top))
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(top["error"], &inner); err != nil {
		return fmt.Errorf("\"error\" is not an object: %v", err)
	}
	if got := keys(inner); !slices.Equal(got, []string{"code", "message", "request_id"}) {
		return fmt.Errorf("\"error\" must have exactly code, message, request_id; has %v", got)
	}
	fields := map[string]string{}
	for k, raw := range inner {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || s == "" {
			return fmt.Errorf("error.%s must be a non-empty string, is %s", k, raw)
		}
		fields[k] = s
	}
	if fields["request_id"] != headerID {
		return fmt.Errorf("error.request_id %q differs from X-Request-ID %q", fields["request_id"], headerID)
	}
	for _, leak := range []string{"pq:", "SQLSTATE", "SELECT ", "INSERT ", "UPDATE ", "goroutine ", ".go:", "panic", "redis:", "rueidis"} {
		if strings.Contains(fields["message"], leak) {
			return fmt.Errorf("error.message leaks internals (%q): %q", leak, fields["message"])
		}
	}
	return nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// decode unmarshals a response body, ending the test when it does not fit.
func decode[T any](t testing.TB, r *response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decoding %T from %s: %v", v, r, err)
	}
	return v
}

// wantStatus ends the test unless r has the status.
func wantStatus(t testing.TB, r *response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d: %s", r.status, status, r)
	}
}

// wantError ends the test unless r is the error status and code.
func wantError(t testing.TB, r *response, status int, code string) {
	t.Helper()
	if r.status != status || r.errorCode() != code {
		t.Fatalf("got %s, want %d %s", r, status, code)
	}
}

// ---- the views of adapters/rest/openapi.yaml the tests look into ----

type firmwareJSON struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Version string `json:"version"`
	Status  string `json:"status"`
}

type rolloutJSON struct {
	ID         string `json:"id"`
	FirmwareID string `json:"firmware_id"`
	Percentage int    `json:"percentage"`
	Status     string `json:"status"`
	Stats      *struct {
		Pending     int `json:"pending"`
		Downloading int `json:"downloading"`
		Downloaded  int `json:"downloaded"`
		Installing  int `json:"installing"`
		Succeeded   int `json:"succeeded"`
		Failed      int `json:"failed"`
		Cancelled   int `json:"cancelled"`
	} `json:"stats"`
}

type taskJSON struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	Progress  int    `json:"progress"`
	Attempt   int    `json:"attempt"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
	Firmware  struct {
		ID        string `json:"id"`
		Version   string `json:"version"`
		URL       string `json:"url"`
		SizeBytes int64  `json:"size_bytes"`
		SHA256    string `json:"sha256"`
	} `json:"firmware"`
}

type adminTaskJSON struct {
	taskJSON
	ActionID   int64   `json:"action_id"`
	DeviceID   string  `json:"device_id"`
	FirmwareID string  `json:"firmware_id"`
	RolloutID  string  `json:"rollout_id"`
	ErrorCode  *string `json:"error_code"`
}

type checkJSON struct {
	UpdateAvailable  bool      `json:"update_available"`
	Task             *taskJSON `json:"task"`
	PollAfterSeconds int64     `json:"poll_after_seconds"`
}

type deviceJSON struct {
	DeviceID       string         `json:"device_id"`
	Model          string         `json:"model"`
	CurrentVersion *string        `json:"current_version"`
	LastSeenAt     *string        `json:"last_seen_at"`
	ActiveTask     *adminTaskJSON `json:"active_task"`
}

type readinessJSON struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// ---- operator and device calls ----

// registerDevice registers a device through the admin API and returns its
// token.
func (c *client) registerDevice(t testing.TB, admin, id, model, version string) string {
	t.Helper()
	body := map[string]any{"device_id": id, "model": model}
	if version != "" {
		body["current_version"] = version
	}
	r := c.do(t, call{method: http.MethodPost, path: "/api/v1/admin/devices", token: admin, body: body})
	wantStatus(t, r, http.StatusCreated)
	reg := decode[struct {
		DeviceID  string `json:"device_id"`
		Model     string `json:"model"`
		Token     string `json:"token"`
		CreatedAt string `json:"created_at"`
	}](t, r)
	if reg.DeviceID != id || reg.Model != model || reg.Token == "" {
		t.Fatalf("registration of %s answered %s", id, r)
	}
	if _, err := time.Parse(time.RFC3339Nano, reg.CreatedAt); err != nil {
		t.Fatalf("registration created_at %q: %v", reg.CreatedAt, err)
	}
	return reg.Token
}

// publishFirmware publishes model@version and returns its id.
func (c *client) publishFirmware(t testing.TB, admin, model, version string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(model + "@" + version))
	r := c.do(t, call{method: http.MethodPost, path: "/api/v1/admin/firmwares", token: admin, body: map[string]any{
		"model": model, "version": version, "url": "https://fw.example.com/" + model + "/" + version + ".bin",
		"size_bytes": 4 << 20, "sha256": hex.EncodeToString(sum[:]), "release_notes": "e2e " + version,
	}})
	wantStatus(t, r, http.StatusCreated)
	fw := decode[firmwareJSON](t, r)
	if fw.ID == "" || fw.Model != model || fw.Version != version || fw.Status != "released" {
		t.Fatalf("published firmware answered %s", r)
	}
	return fw.ID
}

// startRollout rolls firmware out to percentage of its fleet and returns the
// rollout's id.
func (c *client) startRollout(t testing.TB, admin, firmwareID string, percentage int) string {
	t.Helper()
	r := c.do(t, call{method: http.MethodPost, path: "/api/v1/admin/rollouts", token: admin,
		body: map[string]any{"firmware_id": firmwareID, "percentage": percentage}})
	wantStatus(t, r, http.StatusCreated)
	ro := decode[rolloutJSON](t, r)
	if ro.ID == "" || ro.FirmwareID != firmwareID || ro.Percentage != percentage || ro.Status != "active" {
		t.Fatalf("started rollout answered %s", r)
	}
	return ro.ID
}

// checkCall is a device's poll.
func checkCall(device, token, model, version string) call {
	return call{method: http.MethodPost, path: "/api/v1/devices/" + device + "/ota/check", token: token,
		body: map[string]any{"model": model, "current_version": version}}
}

// eventCall is a device's progress report; progress < 0 leaves it out.
func eventCall(device, token, taskID, eventID, status string, progress int) call {
	body := map[string]any{"event_id": eventID, "status": status}
	if progress >= 0 {
		body["progress"] = progress
	}
	return call{method: http.MethodPost, path: "/api/v1/devices/" + device + "/ota/tasks/" + taskID + "/events",
		token: token, body: body}
}

func getTaskCall(device, token, taskID string) call {
	return call{method: http.MethodGet, path: "/api/v1/devices/" + device + "/ota/tasks/" + taskID, token: token}
}

// metricSum scrapes /metrics and sums the samples of a metric whose labels
// contain every one of labels (such as `outcome="created"`); it is for
// diagnostics, not assertions, as metric names are not part of the contract.
func (c *client) metricSum(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	r := c.do(t, call{method: http.MethodGet, path: "/metrics"})
	var sum float64
	for line := range strings.SplitSeq(string(r.body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		sample, value, ok := strings.Cut(line, " ")
		if !ok || !containsAll(sample, labels) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(value, &v); err == nil {
			sum += v
		}
	}
	return sum
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// warm opens n connections to the instance and leaves them idle in the
// client's pool, so that a following burst of n requests needs no handshake.
func (c *client) warm(t testing.TB, n int) {
	t.Helper()
	_, errs := burst(n, func(int) (*response, error) {
		return c.try(t, call{method: http.MethodGet, path: "/healthz"})
	})
	for _, err := range errs {
		if err != nil {
			t.Fatalf("warming connections to otad %s: %v", c.inst.Name, err)
		}
	}
}
