package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/adapters/httpedge"
)

const firmwareBody = `{"model":"cam-x1","version":"1.4.0","url":"https://cdn.example.com/fw.bin",` +
	`"size_bytes":1048576,"sha256":"` + sha256Hex + `"}`

// routeCase is one API route with a request that succeeds against the fakes.
type routeCase struct {
	name         string
	method, path string
	body         string
	admin        bool
	status       int
}

var apiRoutes = []routeCase{
	{"register device", http.MethodPost, "/api/v1/admin/devices", `{"device_id":"dev-9","model":"cam-x1","current_version":"1.0.0"}`, true, http.StatusCreated},
	{"rotate token", http.MethodPost, "/api/v1/admin/devices/dev-1/token", "", true, http.StatusOK},
	{"get device", http.MethodGet, "/api/v1/admin/devices/dev-1", "", true, http.StatusOK},
	{"list devices", http.MethodGet, "/api/v1/admin/devices?model=cam-x1&tag=eu&attribute=hw%3Drev2", "", true, http.StatusOK},
	{"set device tags", http.MethodPut, "/api/v1/admin/devices/dev-1/tags", `{"tags":["eu","lab"]}`, true, http.StatusOK},
	{"bulk tag devices", http.MethodPost, "/api/v1/admin/devices/tags", `{"device_ids":["dev-1","dev-2"],"add":["eu"]}`, true, http.StatusOK},
	{"publish firmware", http.MethodPost, "/api/v1/admin/firmwares", firmwareBody, true, http.StatusCreated},
	{"list firmwares", http.MethodGet, "/api/v1/admin/firmwares?model=cam-x1", "", true, http.StatusOK},
	{"revoke firmware", http.MethodPost, "/api/v1/admin/firmwares/" + firmwareID + "/revoke", "", true, http.StatusOK},
	{"start rollout", http.MethodPost, "/api/v1/admin/rollouts", `{"firmware_id":"` + firmwareID + `","percentage":10}`, true, http.StatusCreated},
	{"start staged rollout", http.MethodPost, "/api/v1/admin/rollouts", `{"firmware_id":"` + firmwareID + `","selector":{"tags_all":["eu"],"versions":">=1.0.0 <2.0.0"},` +
		`"stages":[{"percentage":1,"min_finished":5,"success_percent":90},{"percentage":100}],"starts_at":"2026-01-02T03:04:05Z",` +
		`"window":{"daily":"02:00-04:00","time_zone":"Europe/Berlin"},"task_timeout_seconds":3600}`, true, http.StatusCreated},
	{"update rollout", http.MethodPatch, "/api/v1/admin/rollouts/" + rolloutID, `{"percentage":50,"status":"paused"}`, true, http.StatusOK},
	{"get rollout", http.MethodGet, "/api/v1/admin/rollouts/" + rolloutID, "", true, http.StatusOK},
	{"list tasks", http.MethodGet, "/api/v1/admin/tasks?device_id=dev-1&limit=10", "", true, http.StatusOK},
	{"task events", http.MethodGet, "/api/v1/admin/tasks/" + taskID + "/events", "", true, http.StatusOK},
	{"create user", http.MethodPost, "/api/v1/admin/users", `{"username":"bob","role":"releaser","password":"correct horse battery"}`, true, http.StatusCreated},
	{"list users", http.MethodGet, "/api/v1/admin/users", "", true, http.StatusOK},
	{"remove user", http.MethodDelete, "/api/v1/admin/users/bob", "", true, http.StatusNoContent},
	{"create API token", http.MethodPost, "/api/v1/admin/tokens", `{"name":"ci","scopes":["artifacts:write","firmware:write"],"expires_at":"2030-01-01T00:00:00Z"}`, true, http.StatusCreated},
	{"list API tokens", http.MethodGet, "/api/v1/admin/tokens", "", true, http.StatusOK},
	{"revoke API token", http.MethodDelete, "/api/v1/admin/tokens/" + firmwareID, "", true, http.StatusOK},
	{"list audit records", http.MethodGet, "/api/v1/admin/audit?actor=root&limit=2", "", true, http.StatusOK},
	{"check", http.MethodPost, "/api/v1/devices/dev-1/ota/check", `{"model":"cam-x1","current_version":"1.2.0"}`, false, http.StatusOK},
	{"check with attributes", http.MethodPost, "/api/v1/devices/dev-1/ota/check", `{"model":"cam-x1","current_version":"1.2.0","attributes":{"hw":"rev2","timezone":"Europe/Berlin"}}`, false, http.StatusOK},
	{"get task", http.MethodGet, "/api/v1/devices/dev-1/ota/tasks/" + taskID, "", false, http.StatusOK},
	{"report event", http.MethodPost, "/api/v1/devices/dev-1/ota/tasks/" + taskID + "/events", `{"event_id":"e1","status":"downloading","progress":50}`, false, http.StatusOK},
}

func (rc routeCase) token() string {
	if rc.admin {
		return testAdminToken
	}
	return tokenDev1
}

func TestEveryRouteSucceedsWithItsToken(t *testing.T) {
	h := newHarness(t)
	for _, rc := range apiRoutes {
		t.Run(rc.name, func(t *testing.T) {
			rec := h.do(t, req{method: rc.method, path: rc.path, token: rc.token(), body: rc.body})
			if rec.Code != rc.status {
				t.Fatalf("status = %d, want %d: %s", rec.Code, rc.status, rec.Body)
			}
			if rec.Header().Get(httpedge.HeaderRequestID) == "" {
				t.Error("no X-Request-ID")
			}
		})
	}
}

// TestAPIRoutesListedInTests keeps the auth matrix honest: every /api/v1
// route the server registers must be in apiRoutes.
func TestAPIRoutesListedInTests(t *testing.T) {
	h := newHarness(t)
	covered := map[string]bool{}
	for _, rc := range apiRoutes {
		hr := httptest.NewRequest(rc.method, rc.path, nil)
		rec := httptest.NewRecorder()
		h.e.ServeHTTP(rec, hr)
		covered[rc.method+" "+h.obs.last().route] = true
	}
	for _, r := range h.e.Routes() {
		if strings.HasPrefix(r.Path, APIPrefix) && !covered[r.Method+" "+r.Path] {
			t.Errorf("route %s %s is not exercised by apiRoutes", r.Method, r.Path)
		}
	}
}

func TestAuthMatrix(t *testing.T) {
	type authCase struct {
		name   string
		header string // full Authorization header; "" sends none
		path   func(string) string
		status int
		code   string
	}
	same := func(p string) string { return p }
	h := newHarness(t)
	for _, rc := range apiRoutes {
		cases := []authCase{
			{"no token", "", same, 401, httpedge.CodeUnauthorized},
			{"basic scheme", "Basic YWRtaW46c2VjcmV0", same, 401, httpedge.CodeUnauthorized},
			{"bearer without token", "Bearer", same, 401, httpedge.CodeUnauthorized},
			{"bearer with empty token", "Bearer ", same, 401, httpedge.CodeUnauthorized},
			{"two words", "Bearer " + rc.token() + " extra", same, 401, httpedge.CodeUnauthorized},
			{"double space", "Bearer  " + rc.token(), same, 401, httpedge.CodeUnauthorized},
			{"wrong token", "Bearer not-a-real-token", same, 401, httpedge.CodeUnauthorized},
			{"token without scheme", rc.token(), same, 401, httpedge.CodeUnauthorized},
		}
		if rc.admin {
			cases = append(cases,
				authCase{"device token on admin route", "Bearer " + tokenDev1, same, 401, httpedge.CodeUnauthorized},
				authCase{"admin token prefix", "Bearer " + testAdminToken[:len(testAdminToken)-1], same, 401, httpedge.CodeUnauthorized},
				authCase{"lowercase scheme accepted", "bearer " + testAdminToken, same, rc.status, ""},
			)
		} else {
			other := func(id string) func(string) string {
				return func(p string) string { return strings.Replace(p, "/devices/dev-1/", "/devices/"+id+"/", 1) }
			}
			cases = append(cases,
				authCase{"admin token on device route", "Bearer " + testAdminToken, same, 401, httpedge.CodeUnauthorized},
				authCase{"another device's token", "Bearer " + tokenDev2, same, 403, httpedge.CodeForbidden},
				authCase{"own token on another device's path", "Bearer " + tokenDev1, other(dev2), 403, httpedge.CodeForbidden},
				authCase{"own token on a device that does not exist", "Bearer " + tokenDev1, other("ghost"), 403, httpedge.CodeForbidden},
			)
		}
		for _, ac := range cases {
			t.Run(rc.name+"/"+ac.name, func(t *testing.T) {
				before := len(h.fake.called())
				hdr := map[string]string{}
				if ac.header != "" {
					hdr["Authorization"] = ac.header
				}
				rec := h.do(t, req{method: rc.method, path: ac.path(rc.path), body: rc.body, header: hdr})
				if ac.code == "" {
					if rec.Code != ac.status {
						t.Fatalf("status = %d, want %d: %s", rec.Code, ac.status, rec.Body)
					}
					return
				}
				wantError(t, rec, ac.status, ac.code)
				if ac.status == 401 && rec.Header().Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
				if n := len(h.fake.called()); n != before {
					t.Errorf("service called on a refused request: %v", h.fake.called()[before:])
				}
			})
		}
	}
}

func TestEmptyAdminTokenAdmitsNobody(t *testing.T) {
	h := newHarness(t, withConfig(func(c *Config) { c.AdminToken = "" }))
	// An empty bearer is what an empty admin token would match.
	for _, auth := range []string{"Bearer ", "Bearer x"} {
		rec := h.do(t, req{method: http.MethodGet, path: "/api/v1/admin/tasks", header: map[string]string{"Authorization": auth}})
		wantError(t, rec, 401, httpedge.CodeUnauthorized)
	}
}

func TestDeviceAuthErrorsFromService(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"unauthorized", domain.ErrUnauthorized, 401, httpedge.CodeUnauthorized},
		{"not found means unknown token", fmt.Errorf("lookup: %w", domain.ErrNotFound), 401, httpedge.CodeUnauthorized},
		{"busy", &ports.BusyError{Reason: ports.LockUnavailable}, 503, httpedge.CodeServiceBusy},
		{"internal", errors.New("db down at postgres://u:p@10.1.2.3"), 500, httpedge.CodeInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.fake.authFn = func(string) (string, error) { return "", tc.err }
			rec := h.do(t, req{method: http.MethodGet, path: "/api/v1/devices/dev-1/ota/tasks/" + taskID, token: tokenDev1})
			d := wantError(t, rec, tc.status, tc.code)
			if strings.Contains(d.Message, "10.1.2.3") {
				t.Errorf("message leaks the cause: %q", d.Message)
			}
		})
	}
}

// customRetry is an ErrServiceBusy that knows how long to wait.
type customRetry struct{ d time.Duration }

func (e customRetry) Error() string             { return "busy for a while" }
func (e customRetry) Unwrap() error             { return domain.ErrServiceBusy }
func (e customRetry) RetryAfter() time.Duration { return e.d }

func TestErrorMapping(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("application: tasks repository: %w", err) }
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		code       string
		message    string // exact message when set
		retryAfter string
	}{
		{"not found", wrap(domain.ErrNotFound), 404, httpedge.CodeNotFound, "", ""},
		{"validation error", wrap(&domain.ValidationError{Field: "current_version", Reason: "must be a semantic version such as 1.2.3"}),
			400, httpedge.CodeValidationFailed, "current_version: must be a semantic version such as 1.2.3", ""},
		{"bare validation sentinel", wrap(domain.ErrValidation), 400, httpedge.CodeValidationFailed, "", ""},
		{"unauthorized", wrap(domain.ErrUnauthorized), 401, httpedge.CodeUnauthorized, "", ""},
		{"forbidden", wrap(domain.ErrForbidden), 403, httpedge.CodeForbidden, "", ""},
		{"device exists", wrap(domain.ErrDeviceExists), 409, httpedge.CodeDeviceExists, "", ""},
		{"firmware exists", wrap(domain.ErrFirmwareExists), 409, httpedge.CodeFirmwareExists, "", ""},
		{"firmware revoked", wrap(domain.ErrFirmwareRevoked), 409, httpedge.CodeFirmwareRevoked, "", ""},
		{"model mismatch", wrap(domain.ErrModelMismatch), 409, httpedge.CodeModelMismatch, "", ""},
		{"invalid transition", wrap(domain.ErrInvalidTransition), 409, httpedge.CodeInvalidTransition, "", ""},
		{"transition error", wrap(&domain.TransitionError{Kind: domain.ErrInvalidTransition, Detail: "cannot go back from installing to downloading"}),
			409, httpedge.CodeInvalidTransition, "cannot go back from installing to downloading", ""},
		{"task finished", wrap(&domain.TransitionError{Kind: domain.ErrTaskFinished, Detail: "task already succeeded"}),
			409, httpedge.CodeTaskFinished, "task already succeeded", ""},
		{"bare task finished", wrap(domain.ErrTaskFinished), 409, httpedge.CodeTaskFinished, "", ""},
		{"idempotency conflict", wrap(domain.ErrIdempotencyConflict), 409, httpedge.CodeIdempotencyConflict, "", ""},
		{"service busy", wrap(domain.ErrServiceBusy), 503, httpedge.CodeServiceBusy, "", "1"},
		{"lock timeout", &ports.BusyError{Reason: ports.LockTimeout, Err: context.DeadlineExceeded}, 503, httpedge.CodeServiceBusy, "", "1"},
		{"busy with a hint", wrap(customRetry{2500 * time.Millisecond}), 503, httpedge.CodeServiceBusy, "", "3"},
		{"rate limited", wrap(domain.ErrRateLimited), 429, httpedge.CodeRateLimited, "", "1"},
		{"internal", errors.New(`pq: relation "tasks" does not exist`), 500, httpedge.CodeInternal, "internal error", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.fake.checkFn = func(ports.CheckRequest) (ports.CheckResult, error) { return ports.CheckResult{}, tc.err }
			rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1,
				body: `{"model":"cam-x1","current_version":"1.2.0"}`})
			d := wantError(t, rec, tc.status, tc.code)
			if tc.message != "" && d.Message != tc.message {
				t.Errorf("message = %q, want %q", d.Message, tc.message)
			}
			for _, leak := range []string{"application:", "repository", "pq:", "relation", "lock "} {
				if strings.Contains(d.Message, leak) {
					t.Errorf("message %q leaks %q", d.Message, leak)
				}
			}
			if got := rec.Header().Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tc.retryAfter)
			}
		})
	}
}

func TestInternalErrorIsLoggedWithRequestID(t *testing.T) {
	h := newHarness(t)
	h.fake.checkFn = func(ports.CheckRequest) (ports.CheckResult, error) {
		return ports.CheckResult{}, errors.New("pq: connection reset")
	}
	rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1,
		body: `{"model":"cam-x1","current_version":"1.2.0"}`, header: map[string]string{httpedge.HeaderRequestID: "trace-500"}})
	d := wantError(t, rec, 500, httpedge.CodeInternal)
	if d.Message != "internal error" || d.RequestID != "trace-500" {
		t.Errorf("detail = %+v", d)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, `"msg":"internal error"`) || !strings.Contains(logs, "pq: connection reset") ||
		!strings.Contains(logs, `"request_id":"trace-500"`) {
		t.Errorf("internal error not logged with its request id:\n%s", logs)
	}
}

func TestPanicBecomesInternal(t *testing.T) {
	h := newHarness(t)
	h.fake.checkFn = func(ports.CheckRequest) (ports.CheckResult, error) { panic("boom: secret detail") }
	rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1,
		body: `{"model":"cam-x1","current_version":"1.2.0"}`})
	d := wantError(t, rec, 500, httpedge.CodeInternal)
	if strings.Contains(d.Message, "boom") {
		t.Errorf("panic value leaked: %q", d.Message)
	}
}

// TestPathParametersAreDecodedOnce: a path parameter is percent-decoded
// exactly once, as written on the wire. Go leaves URL.RawPath empty when
// the escaping is the default one, and Echo would then route on the
// decoded path and hand "dev%2D1" to a handler that decodes it again, into
// another device's id ("dev-1") that its token then matches.
func TestPathParametersAreDecodedOnce(t *testing.T) {
	h := newHarness(t)
	body := `{"model":"cam-x1","current_version":"1.2.0"}`
	rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev%2D1/ota/check", token: tokenDev1, body: body})
	if rec.Code != http.StatusOK {
		t.Fatalf("dev%%2D1 (dev-1 escaped once): status %d, want 200: %s", rec.Code, rec.Body)
	}
	rec = h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev%252D1/ota/check", token: tokenDev1, body: body})
	wantError(t, rec, http.StatusForbidden, httpedge.CodeForbidden)
}

func TestRequestID(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, sent string
		keep       bool
	}{
		{"sane id is echoed", "abc-123_XYZ.~!", true},
		{"128 characters kept", strings.Repeat("a", 128), true},
		{"129 characters replaced", strings.Repeat("a", 129), false},
		{"control character replaced", "abc\x01def", false},
		{"non-ASCII replaced", "req-é", false},
		{"DEL replaced", "abc\x7f", false},
	} {
		for _, path := range []string{"/healthz", "/api/v1/nope", "/api/v1/admin/tasks"} {
			t.Run(tc.name+path, func(t *testing.T) {
				rec := h.do(t, req{method: http.MethodGet, path: path, header: map[string]string{httpedge.HeaderRequestID: tc.sent}})
				got := rec.Header().Get(httpedge.HeaderRequestID)
				if tc.keep {
					if got != tc.sent {
						t.Errorf("X-Request-ID = %q, want %q", got, tc.sent)
					}
					return
				}
				if _, err := uuid.Parse(got); err != nil || got == tc.sent {
					t.Errorf("X-Request-ID = %q, want a new UUID", got)
				}
			})
		}
	}
	t.Run("generated when absent, unique", func(t *testing.T) {
		a := h.do(t, req{method: http.MethodGet, path: "/healthz"}).Header().Get(httpedge.HeaderRequestID)
		b := h.do(t, req{method: http.MethodGet, path: "/healthz"}).Header().Get(httpedge.HeaderRequestID)
		if _, err := uuid.Parse(a); err != nil || a == b {
			t.Errorf("ids %q, %q", a, b)
		}
	})
}

func TestUnknownRouteAndWrongMethod(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
		route        string // the label in the access log and the metrics
	}{
		{http.MethodGet, "/api/v1/nope", 404, httpedge.CodeNotFound, httpedge.UnmatchedRoute},
		{http.MethodGet, "/", 404, httpedge.CodeNotFound, httpedge.UnmatchedRoute},
		{http.MethodGet, "/api/v1/admin/unknown", 404, httpedge.CodeNotFound, httpedge.UnmatchedRoute},
		{http.MethodGet, "/api/v1/devices/dev-1/ota/nothing", 404, httpedge.CodeNotFound, httpedge.UnmatchedRoute},
		{http.MethodDelete, "/api/v1/admin/firmwares", 405, httpedge.CodeMethodNotAllowed, "/api/v1/admin/firmwares"},
		{http.MethodPut, "/api/v1/admin/rollouts/" + rolloutID, 405, httpedge.CodeMethodNotAllowed, "/api/v1/admin/rollouts/:id"},
		{http.MethodGet, "/api/v1/devices/dev-1/ota/check", 405, httpedge.CodeMethodNotAllowed, "/api/v1/devices/:device_id/ota/check"},
		{http.MethodPost, "/healthz", 405, httpedge.CodeMethodNotAllowed, "/healthz"},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			rec := h.do(t, req{method: tc.method, path: tc.path})
			wantError(t, rec, tc.status, tc.code)
			if tc.status == 405 && rec.Header().Get("Allow") == "" {
				t.Error("405 without Allow")
			}
			if got := h.obs.last(); got.route != tc.route || got.code != tc.status {
				t.Errorf("observed %+v, want route %q", got, tc.route)
			}
			if want := `"route":"` + tc.route + `"`; !strings.Contains(h.logs.String(), want) {
				t.Errorf("access log lacks %s:\n%s", want, h.logs.String())
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	h := newHarness(t)
	pad := func(n int) string {
		prefix := `{"model":"cam-x1","current_version":"1.2.0","pad":"`
		return prefix + strings.Repeat("x", n-len(prefix)-2) + `"}`
	}
	over := pad(65 << 10)
	t.Run("65 KiB with Content-Length", func(t *testing.T) {
		rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1, body: over})
		wantError(t, rec, 413, httpedge.CodePayloadTooLarge)
	})
	t.Run("65 KiB without Content-Length", func(t *testing.T) {
		hr := httptest.NewRequest(http.MethodPost, "/api/v1/admin/firmwares", strings.NewReader(over))
		hr.ContentLength = -1
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Authorization", "Bearer "+testAdminToken)
		rec := httptest.NewRecorder()
		h.e.ServeHTTP(rec, hr)
		wantError(t, rec, 413, httpedge.CodePayloadTooLarge)
	})
	t.Run("65 KiB on a no-field call", func(t *testing.T) {
		rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/admin/firmwares/" + firmwareID + "/revoke", token: testAdminToken, body: over})
		wantError(t, rec, 413, httpedge.CodePayloadTooLarge)
	})
	t.Run("exactly 64 KiB is accepted", func(t *testing.T) {
		rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1, body: pad(64 << 10)})
		if rec.Code != 200 {
			t.Fatalf("status = %d: %s", rec.Code, rec.Body)
		}
	})
	t.Run("unauthenticated large body is 401, not read", func(t *testing.T) {
		rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/admin/firmwares", body: over})
		wantError(t, rec, 401, httpedge.CodeUnauthorized)
	})
}

func TestMediaType(t *testing.T) {
	h := newHarness(t)
	check := `{"model":"cam-x1","current_version":"1.2.0"}`
	for _, tc := range []struct {
		ct     string
		status int
	}{
		{"application/json", 200},
		{"application/json; charset=utf-8", 200},
		{"Application/JSON; charset=UTF-8", 200},
		{"text/plain", 415},
		{"application/x-www-form-urlencoded", 415},
		{"application/json; charset=iso-8859-1", 415},
		{"application/jsonx", 415},
		{"-", 415}, // no Content-Type at all
		{"garbage;;", 415},
	} {
		t.Run(tc.ct, func(t *testing.T) {
			rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1, body: check, contentType: tc.ct})
			if tc.status == 415 {
				wantError(t, rec, 415, httpedge.CodeUnsupportedMediaType)
			} else if rec.Code != tc.status {
				t.Fatalf("status = %d: %s", rec.Code, rec.Body)
			}
		})
	}
}

func TestBodyDecoding(t *testing.T) {
	h := newHarness(t)
	checkPath := "/api/v1/devices/dev-1/ota/check"
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
		inMessage        string
	}{
		{"syntax error", checkPath, `{"model":`, 400, httpedge.CodeMalformedJSON, ""},
		{"bare garbage", checkPath, `hello`, 400, httpedge.CodeMalformedJSON, ""},
		{"trailing data", checkPath, `{"model":"cam-x1","current_version":"1.2.0"} {}`, 400, httpedge.CodeMalformedJSON, ""},
		{"trailing garbage", checkPath, `{"model":"cam-x1","current_version":"1.2.0"}x`, 400, httpedge.CodeMalformedJSON, ""},
		{"array", checkPath, `[{"model":"cam-x1"}]`, 400, httpedge.CodeMalformedJSON, "object"},
		{"string", checkPath, `"cam-x1"`, 400, httpedge.CodeMalformedJSON, "object"},
		{"null", checkPath, `null`, 400, httpedge.CodeMalformedJSON, "object"},
		{"whitespace only", checkPath, "  \n ", 400, httpedge.CodeMalformedJSON, "required"},
		{"wrong type string field", checkPath, `{"model":5,"current_version":"1.2.0"}`, 400, httpedge.CodeValidationFailed, "model"},
		{"wrong type nested", checkPath, `{"model":{"a":1},"current_version":"1.2.0"}`, 400, httpedge.CodeValidationFailed, "model"},
		{"missing model", checkPath, `{"current_version":"1.2.0"}`, 400, httpedge.CodeValidationFailed, "model"},
		{"missing current_version", checkPath, `{"model":"cam-x1"}`, 400, httpedge.CodeValidationFailed, "current_version"},
		{"null counts as missing", checkPath, `{"model":null,"current_version":"1.2.0"}`, 400, httpedge.CodeValidationFailed, "model"},
		{"invalid UTF-8", checkPath, "{\"model\":\"cam-\xff\",\"current_version\":\"1.2.0\"}", 400, httpedge.CodeValidationFailed, "UTF-8"},
		{"percentage as string", "/api/v1/admin/rollouts", `{"firmware_id":"x","percentage":"50"}`, 400, httpedge.CodeValidationFailed, "percentage"},
		{"percentage fractional", "/api/v1/admin/rollouts", `{"firmware_id":"x","percentage":50.5}`, 400, httpedge.CodeValidationFailed, "percentage"},
		{"percentage overflow", "/api/v1/admin/rollouts", `{"firmware_id":"x","percentage":1e40}`, 400, httpedge.CodeValidationFailed, "percentage"},
		{"size_bytes as string", "/api/v1/admin/firmwares", strings.Replace(firmwareBody, `1048576`, `"1048576"`, 1), 400, httpedge.CodeValidationFailed, "size_bytes"},
		{"mandatory as string", "/api/v1/admin/firmwares", strings.Replace(firmwareBody, `}`, `,"mandatory":"yes"}`, 1), 400, httpedge.CodeValidationFailed, "mandatory"},
		{"missing sha256", "/api/v1/admin/firmwares", `{"model":"m","version":"1.0.0","url":"https://x/y","size_bytes":1}`, 400, httpedge.CodeValidationFailed, "sha256"},
		{"missing event_id", "/api/v1/devices/dev-1/ota/tasks/" + taskID + "/events", `{"status":"failed"}`, 400, httpedge.CodeValidationFailed, "event_id"},
		{"progress as bool", "/api/v1/devices/dev-1/ota/tasks/" + taskID + "/events", `{"event_id":"e","status":"downloading","progress":true}`, 400, httpedge.CodeValidationFailed, "progress"},
		{"missing device_id", "/api/v1/admin/devices", `{"model":"cam-x1"}`, 400, httpedge.CodeValidationFailed, "device_id"},
		{"empty PATCH body", "/api/v1/admin/rollouts/" + rolloutID, "", 400, httpedge.CodeMalformedJSON, ""},
		{"revoke with malformed body", "/api/v1/admin/firmwares/" + firmwareID + "/revoke", `{`, 400, httpedge.CodeMalformedJSON, ""},
		{"revoke with array body", "/api/v1/admin/firmwares/" + firmwareID + "/revoke", `[]`, 400, httpedge.CodeMalformedJSON, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if strings.HasPrefix(tc.path, "/api/v1/admin/rollouts/") {
				method = http.MethodPatch
			}
			token := tokenDev1
			if strings.HasPrefix(tc.path, "/api/v1/admin") {
				token = testAdminToken
			}
			r := req{method: method, path: tc.path, token: token, body: tc.body}
			if tc.body == "" {
				r.header = map[string]string{"Content-Type": "application/json"}
			}
			before := len(h.fake.called())
			rec := h.do(t, r)
			d := wantError(t, rec, tc.status, tc.code)
			if !strings.Contains(d.Message, tc.inMessage) {
				t.Errorf("message %q does not mention %q", d.Message, tc.inMessage)
			}
			if n := len(h.fake.called()); n != before {
				t.Errorf("service called with a refused body: %v", h.fake.called()[before:])
			}
		})
	}
}

func TestEmptyBodyAcceptedWhereNoFields(t *testing.T) {
	h := newHarness(t)
	for _, path := range []string{"/api/v1/admin/devices/dev-1/token", "/api/v1/admin/firmwares/" + firmwareID + "/revoke"} {
		for _, body := range []string{"", "{}"} {
			t.Run(path+" "+body, func(t *testing.T) {
				rec := h.do(t, req{method: http.MethodPost, path: path, token: testAdminToken, body: body})
				if rec.Code != 200 {
					t.Fatalf("status = %d: %s", rec.Code, rec.Body)
				}
			})
		}
		t.Run(path+" with a field", func(t *testing.T) {
			rec := h.do(t, req{method: http.MethodPost, path: path, token: testAdminToken, body: `{"ignored":true}`})
			if d := wantError(t, rec, 400, httpedge.CodeValidationFailed); !strings.HasPrefix(d.Message, "ignored:") {
				t.Errorf("message %q does not name the field", d.Message)
			}
		})
		t.Run(path+" text/plain body", func(t *testing.T) {
			rec := h.do(t, req{method: http.MethodPost, path: path, token: testAdminToken, body: "hi", contentType: "text/plain"})
			wantError(t, rec, 415, httpedge.CodeUnsupportedMediaType)
		})
	}
}

func TestBodyValuesPassedThrough(t *testing.T) {
	h := newHarness(t)
	t.Run("NUL reaches the service", func(t *testing.T) {
		rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/tasks/" + taskID + "/events", token: tokenDev1,
			body: `{"event_id":"e\u00001","status":"failed","error_code":"E_FLASH","error_message":"bad\u0000block","unknown":[1,2]}`})
		if rec.Code != 200 {
			t.Fatalf("status = %d: %s", rec.Code, rec.Body)
		}
		ev := h.fake.lastEvent
		if ev.EventID != "e\x001" || ev.ErrorMessage != "bad\x00block" || ev.Status != "failed" || ev.ErrorCode != "E_FLASH" || ev.Progress != nil {
			t.Errorf("event = %+v", ev)
		}
	})
	t.Run("progress zero is not missing", func(t *testing.T) {
		h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/tasks/" + taskID + "/events", token: tokenDev1,
			body: `{"event_id":"e2","status":"downloading","progress":0}`})
		if p := h.fake.lastEvent.Progress; p == nil || *p != 0 {
			t.Errorf("progress = %v", p)
		}
	})
	t.Run("check request", func(t *testing.T) {
		h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1,
			body: `{"model":"cam-x1","current_version":""}`})
		if got := h.fake.lastCheck; got.Device.ID().String() != dev1 || got.Device.Tasks == nil || got.Model != "cam-x1" || got.CurrentVersion != "" {
			t.Errorf("check = %+v", got)
		}
	})
	t.Run("firmware spec", func(t *testing.T) {
		body := `{"model":"cam-x1","version":"2.0.0","url":"https://x/fw","size_bytes":9007199254740993,"sha256":"` + sha256Hex +
			`","md5":"0123456789abcdef0123456789abcdef","mandatory":false,"min_source_version":"1.0.0","release_notes":"n","signature":"sig"}`
		h.do(t, req{method: http.MethodPost, path: "/api/v1/admin/firmwares", token: testAdminToken, body: body})
		want := domain.FirmwareSpec{Model: "cam-x1", Version: "2.0.0", URL: "https://x/fw", SizeBytes: 9007199254740993,
			SHA256: sha256Hex, MD5: "0123456789abcdef0123456789abcdef", MinSourceVersion: "1.0.0", ReleaseNotes: "n", Signature: "sig"}
		if got := h.fake.lastSpec; got != want {
			t.Errorf("spec = %+v", got)
		}
	})
	t.Run("rollout start", func(t *testing.T) {
		h.do(t, req{method: http.MethodPost, path: "/api/v1/admin/rollouts", token: testAdminToken,
			body: `{"firmware_id":"` + firmwareID + `","percentage":0,"max_attempts":5,"min_sample":null}`})
		got := h.fake.lastStart
		if got.FirmwareID != firmwareID || got.Spec.Percentage != 0 || got.Spec.NoPercentage || got.Spec.MaxAttempts == nil || *got.Spec.MaxAttempts != 5 ||
			got.Spec.MinSample != nil || got.Spec.FailureThresholdPercent != nil {
			t.Errorf("start = %+v", got)
		}
	})
	t.Run("staged rollout start", func(t *testing.T) {
		rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/admin/rollouts", token: testAdminToken,
			body: `{"firmware_id":"` + firmwareID + `","selector":{"tags_any":["eu"],"attributes":{"hw":"rev2"},"versions":">=1.0.0"},` +
				`"stages":[{"percentage":1,"min_finished":5,"success_percent":90,"soak_seconds":600},{"percentage":100}],` +
				`"starts_at":"2026-01-02T03:04:05Z","window":{"daily":"02:00-04:00","time_zone":"Europe/Berlin"},` +
				`"task_timeout_seconds":3600,"allow_downgrade":true}`})
		if rec.Code != http.StatusCreated {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		sp := h.fake.lastStart.Spec
		// The body's stages as given (the domain applies the defaults).
		if len(sp.Stages) != 2 || !sp.NoPercentage || *sp.Stages[0].Percentage != 1 || *sp.Stages[0].MinFinished != 5 ||
			*sp.Stages[0].SuccessPercent != 90 || sp.Stages[0].Soak != 10*time.Minute ||
			*sp.Stages[1].Percentage != 100 || sp.Stages[1].MinFinished != nil || sp.Stages[1].SuccessPercent != nil || sp.Stages[1].Soak != 0 {
			t.Errorf("stages = %+v", sp.Stages)
		}
		if sp.Selector.Versions != ">=1.0.0" || sp.Selector.Attributes["hw"] != "rev2" || len(sp.Selector.TagsAny) != 1 {
			t.Errorf("selector = %+v", sp.Selector)
		}
		if sp.StartsAt == nil || !sp.StartsAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) || sp.Window == nil ||
			*sp.Window != (domain.WindowSpec{Daily: "02:00-04:00", TimeZone: "Europe/Berlin"}) ||
			sp.TaskTimeout == nil || *sp.TaskTimeout != time.Hour || !sp.AllowDowngrade {
			t.Errorf("schedule = %+v", sp)
		}
		for _, bad := range []string{`{"firmware_id":"` + firmwareID + `","percentage":1,"starts_at":"tomorrow"}`, `{"firmware_id":"` + firmwareID + `","percentage":1,"task_timeout_seconds":-1}`,
			`{"firmware_id":"` + firmwareID + `","stages":[{"min_finished":3}]}`, `{"firmware_id":"` + firmwareID + `","percentage":1,"window":{}}`} {
			if rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/admin/rollouts", token: testAdminToken, body: bad}); rec.Code != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400", bad, rec.Code)
			}
		}
	})
	t.Run("check attributes", func(t *testing.T) {
		h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1,
			body: `{"model":"cam-x1","current_version":"1.2.0","attributes":{"hw":"rev2"}}`})
		if got := h.fake.lastCheck.Attributes; got["hw"] != "rev2" || len(got) != 1 {
			t.Errorf("attributes = %v", got)
		}
		if rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1,
			body: `{"model":"cam-x1","current_version":"1.2.0","attributes":{"hw":2}}`}); rec.Code != http.StatusBadRequest {
			t.Errorf("a number attribute: status %d, want 400", rec.Code)
		}
	})
	t.Run("rollout change", func(t *testing.T) {
		h.do(t, req{method: http.MethodPatch, path: "/api/v1/admin/rollouts/" + rolloutID, token: testAdminToken, body: `{"status":"cancelled"}`})
		got := h.fake.lastChange
		if got.Percentage != nil || got.Status == nil || *got.Status != "cancelled" {
			t.Errorf("change = %+v", got)
		}
	})
	t.Run("register", func(t *testing.T) {
		h.do(t, req{method: http.MethodPost, path: "/api/v1/admin/devices", token: testAdminToken, body: `{"device_id":"d","model":"m"}`})
		if got := h.fake.lastReg; got != (ports.RegisterDevice{DeviceID: "d", Model: "m"}) {
			t.Errorf("register = %+v", got)
		}
	})
	t.Run("task query", func(t *testing.T) {
		h.do(t, req{method: http.MethodGet, path: "/api/v1/admin/tasks?device_id=dev-1&rollout_id=r&status=failed&limit=abc&after=Y3Vy", token: testAdminToken})
		want := ports.TaskQuery{DeviceID: "dev-1", RolloutID: "r", Status: "failed", Limit: "abc", After: "Y3Vy"}
		if got := h.fake.lastQuery; got != want {
			t.Errorf("query = %+v", got)
		}
	})
	t.Run("device listing by version and last seen", func(t *testing.T) {
		h.do(t, req{method: http.MethodGet, path: "/api/v1/admin/devices?model=cam&version=1.2.0&seen_before=2026-01-02T03%3A04%3A05Z&after=d", token: testAdminToken})
		got := h.fake.lastDevices
		if got.Model != "cam" || got.Version != "1.2.0" || got.SeenBefore != "2026-01-02T03:04:05Z" || got.After != "d" {
			t.Errorf("device query = %+v", got)
		}
	})
	t.Run("query with invalid UTF-8", func(t *testing.T) {
		rec := h.do(t, req{method: http.MethodGet, path: "/api/v1/admin/tasks?device_id=%ff", token: testAdminToken})
		wantError(t, rec, 400, httpedge.CodeValidationFailed)
	})
	t.Run("device listing by tags and attributes", func(t *testing.T) {
		h.do(t, req{method: http.MethodGet, path: "/api/v1/admin/devices?tag=eu&tag=beta&attribute=hw%3Drev2", token: testAdminToken})
		got := h.fake.lastDevices
		if !slices.Equal(got.Tags, []string{"eu", "beta"}) || !slices.Equal(got.Attributes, []string{"hw=rev2"}) {
			t.Errorf("device query = %+v", got)
		}
	})
	t.Run("repeated query parameter with invalid UTF-8", func(t *testing.T) {
		for _, path := range []string{"/api/v1/admin/devices?tag=eu&tag=%ff", "/api/v1/admin/devices?attribute=hw%3D%ff"} {
			rec := h.do(t, req{method: http.MethodGet, path: path, token: testAdminToken})
			wantError(t, rec, 400, httpedge.CodeValidationFailed)
		}
	})
	t.Run("escaped path parameters are decoded", func(t *testing.T) {
		// %37 is "7" and %44 is "D": the task id is decoded once, then
		// parsed into its canonical lowercase form.
		escaped := "%37" + strings.ToUpper(taskID[1:8]) + "%2D" + taskID[9:]
		rec := h.do(t, req{method: http.MethodGet, path: "/api/v1/devices/dev%2D1/ota/tasks/" + escaped, token: tokenDev1})
		if rec.Code != 200 {
			t.Fatalf("status = %d: %s", rec.Code, rec.Body)
		}
		if args := h.fake.lastArgs; len(args) != 2 || args[0] != dev1 || args[1] != taskID {
			t.Errorf("args = %q", args)
		}
	})
}

// A malformed id in a URL path is parsed once, at the edge, and answered
// NOT_FOUND (as before ids were typed: no such resource can exist) without
// reaching the service; a malformed id in a body is VALIDATION_FAILED.
func TestMalformedIDsStopAtTheEdge(t *testing.T) {
	paths := []struct {
		name, method, path, token, body string
	}{
		{"task of a device", http.MethodGet, "/api/v1/devices/dev-1/ota/tasks/abc%2Fdef", tokenDev1, ""},
		{"task id not a UUID", http.MethodGet, "/api/v1/devices/dev-1/ota/tasks/7d0c7f4e-3b9a-4d2e-9a57-6f1f7c2b9e0", tokenDev1, ""},
		{"admin device", http.MethodGet, "/api/v1/admin/devices/bad%20id", testAdminToken, ""},
		{"admin device too long", http.MethodGet, "/api/v1/admin/devices/" + strings.Repeat("d", 65), testAdminToken, ""},
		{"token rotation", http.MethodPost, "/api/v1/admin/devices/bad%00id/token", testAdminToken, ""},
		{"device tags", http.MethodPut, "/api/v1/admin/devices/bad%2Fid/tags", testAdminToken, `{"tags":["eu"]}`},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			h := newHarness(t)
			rec := h.do(t, req{method: p.method, path: p.path, token: p.token, body: p.body})
			wantError(t, rec, 404, httpedge.CodeNotFound)
			for _, c := range h.fake.called() {
				if c != "AuthenticateDevice" {
					t.Errorf("the service was asked %s", c)
				}
			}
		})
	}
	t.Run("event on a malformed task id", func(t *testing.T) {
		h := newHarness(t)
		rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/tasks/not-a-task/events", token: tokenDev1,
			body: `{"event_id":"e1","status":"downloading"}`})
		if rec.Code != 200 {
			t.Fatalf("status = %d: %s", rec.Code, rec.Body)
		}
		// Handed on as the zero id: the use case judges the event first,
		// then answers NOT_FOUND without a read (application tests).
		if args := h.fake.lastArgs; len(args) != 2 || args[0] != dev1 || args[1] != "" {
			t.Errorf("args = %q, want the zero task id", args)
		}
	})
	t.Run("firmware id in a rollout body", func(t *testing.T) {
		h := newHarness(t)
		h.do(t, req{method: http.MethodPost, path: "/api/v1/admin/rollouts", token: testAdminToken,
			body: `{"firmware_id":"not-a-uuid","percentage":5}`})
		// Handed on as given: the use case reads it for the API and the
		// console alike (NOT_FOUND: application and console tests).
		if args := h.fake.lastArgs; len(args) != 1 || args[0] != "not-a-uuid" {
			t.Errorf("args = %q, want the body's firmware id", args)
		}
	})
}

func TestHealthAndReadiness(t *testing.T) {
	ok := fakeCheck{"postgres", func(context.Context) error { return nil }}
	t.Run("healthz", func(t *testing.T) {
		h := newHarness(t)
		rec := h.do(t, req{method: http.MethodGet, path: "/healthz"})
		if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"status":"ok"}` {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	})
	t.Run("all ready", func(t *testing.T) {
		h := newHarness(t, withChecks(ok, fakeCheck{"redis", func(context.Context) error { return nil }}))
		rec := h.do(t, req{method: http.MethodGet, path: "/readyz"})
		if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"status":"ok","checks":{"postgres":"ok","redis":"ok"}}` {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	})
	t.Run("a failing and a hanging check", func(t *testing.T) {
		h := newHarness(t,
			withConfig(func(c *Config) { c.ReadyTimeout = 50 * time.Millisecond }),
			withChecks(
				fakeCheck{"postgres", func(context.Context) error {
					return errors.New("dial tcp 10.9.8.7:5432: password=hunter2 postgres://u:p@db/ota: connection refused")
				}},
				fakeCheck{"redis", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
			))
		start := time.Now()
		rec := h.do(t, req{method: http.MethodGet, path: "/readyz"})
		if time.Since(start) > 2*time.Second {
			t.Error("readiness did not respect its timeout")
		}
		if rec.Code != 503 {
			t.Fatalf("status %d", rec.Code)
		}
		m := decodeMap(t, rec)
		checks, _ := m["checks"].(map[string]any)
		if m["status"] != "unavailable" || checks["postgres"] != "failed" || checks["redis"] != "timeout" {
			t.Errorf("body %s", rec.Body)
		}
		for _, secret := range []string{"10.9.8.7", "hunter2", "postgres://"} {
			if strings.Contains(rec.Body.String(), secret) {
				t.Errorf("readiness body leaks %q", secret)
			}
		}
	})
	t.Run("metrics and openapi", func(t *testing.T) {
		h := newHarness(t)
		rec := h.do(t, req{method: http.MethodGet, path: "/metrics"})
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), "up 1") {
			t.Fatalf("metrics %d %s", rec.Code, rec.Body)
		}
		rec = h.do(t, req{method: http.MethodGet, path: "/openapi.yaml"})
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/yaml" || !strings.HasPrefix(rec.Body.String(), "openapi: 3.0") {
			t.Fatalf("openapi %d %q", rec.Code, rec.Header().Get("Content-Type"))
		}
	})
	t.Run("nil metrics handler is 404", func(t *testing.T) {
		e := NewServer(Config{AdminToken: testAdminToken}, &fakeServices{}, &fakeServices{}, nil, nil, nil, nil)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		wantError(t, rec, 404, httpedge.CodeNotFound)
	})
}

func TestAccessLogAndMetrics(t *testing.T) {
	h := newHarness(t)
	rec := h.do(t, req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/tasks/" + taskID + "/events", token: tokenDev1,
		body: `{"event_id":"e1","status":"downloading"}`, header: map[string]string{httpedge.HeaderRequestID: "log-test-1"}})
	if rec.Code != 200 {
		t.Fatal(rec.Code)
	}
	h.do(t, req{method: http.MethodGet, path: "/api/v1/admin/tasks", token: testAdminToken})
	h.do(t, req{method: http.MethodGet, path: "/api/v1/admin/tasks", header: map[string]string{"Authorization": "Bearer " + testAdminToken + "x"}})

	logs := h.logs.String()
	for _, secret := range []string{tokenDev1, testAdminToken, "Authorization", "Bearer"} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain %q:\n%s", secret, logs)
		}
	}
	first := strings.SplitN(logs, "\n", 2)[0]
	for _, want := range []string{`"msg":"http request"`, `"method":"POST"`,
		`"route":"/api/v1/devices/:device_id/ota/tasks/:task_id/events"`, `"status":200`, `"duration_ms":`,
		`"request_id":"log-test-1"`, `"device_id":"dev-1"`, `"task_id":"` + taskID + `"`} {
		if !strings.Contains(first, want) {
			t.Errorf("access log line lacks %s:\n%s", want, first)
		}
	}
	if !strings.Contains(logs, `"error_code":"UNAUTHORIZED"`) {
		t.Errorf("refused request not logged with its code:\n%s", logs)
	}
	if got := h.obs.obs[0]; got != (observation{"POST", "/api/v1/devices/:device_id/ota/tasks/:task_id/events", 200}) {
		t.Errorf("observation = %+v", got)
	}
	if got := h.obs.last(); got != (observation{"GET", "/api/v1/admin/tasks", 401}) {
		t.Errorf("observation = %+v", got)
	}
}

func TestAdminTokenRedacts(t *testing.T) {
	tok := AdminToken("s3cret")
	for _, s := range []string{tok.String(), fmt.Sprintf("%v %s %#v %+v", tok, tok, tok, Config{AdminToken: tok})} {
		if strings.Contains(s, "s3cret") {
			t.Errorf("token printed: %q", s)
		}
	}
}

// A device may be called "tags": the bulk-tag route does not shadow its
// own routes.
func TestDeviceNamedTags(t *testing.T) {
	h := newHarness(t)
	for _, r := range []req{
		{method: http.MethodGet, path: "/api/v1/admin/devices/tags", token: testAdminToken},
		{method: http.MethodPost, path: "/api/v1/admin/devices/tags/token", token: testAdminToken},
		{method: http.MethodPut, path: "/api/v1/admin/devices/tags/tags", token: testAdminToken, body: `{"tags":["x"]}`},
	} {
		if rec := h.do(t, r); rec.Code != http.StatusOK {
			t.Errorf("%s %s: %d %s", r.method, r.path, rec.Code, rec.Body)
		}
		if args := h.fake.lastArgs; len(args) == 0 || args[0] != "tags" {
			t.Errorf("%s %s: called with %q, want device tags", r.method, r.path, args)
		}
	}
}
