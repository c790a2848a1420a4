package rest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/adapters/httpedge"
)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPISpec())
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is invalid: %v", err)
	}
	return doc
}

var echoParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// TestOpenAPIMatchesRoutes keeps the document and the router in step: every
// registered route is documented, and every documented operation exists.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadSpec(t)
	h := newHarness(t)

	served := map[string]bool{}
	for _, r := range h.e.Routes() {
		served[r.Method+" "+echoParam.ReplaceAllString(r.Path, "{$1}")] = true
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			// Operations mounted by another adapter (x-served-by) are
			// checked by that adapter's tests.
			if op.Extensions["x-served-by"] == nil {
				documented[method+" "+path] = true
			}
		}
	}
	for k := range served {
		if !documented[k] {
			t.Errorf("route %s is not in openapi.yaml", k)
		}
	}
	for k := range documented {
		if !served[k] {
			t.Errorf("openapi.yaml documents %s, which the server does not serve", k)
		}
	}
	if len(served) < 17 {
		t.Errorf("only %d routes served", len(served))
	}
}

// TestOpenAPIErrorCodes checks the document's ErrorCode enum against the
// codes this package can send.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadSpec(t)
	var inDoc []string
	for _, v := range doc.Components.Schemas["ErrorCode"].Value.Enum {
		inDoc = append(inDoc, v.(string))
	}
	inCode := []string{httpedge.CodeMalformedJSON, httpedge.CodeValidationFailed, httpedge.CodeUnauthorized, httpedge.CodeForbidden, httpedge.CodeNotFound,
		httpedge.CodeMethodNotAllowed, httpedge.CodeDeviceExists, httpedge.CodeUserExists, httpedge.CodeFirmwareExists, httpedge.CodeFirmwareRevoked, httpedge.CodeModelMismatch,
		httpedge.CodeFirmwareGone, httpedge.CodeLinkInvalid, httpedge.CodeLinkExpired,
		httpedge.CodeInvalidTransition, httpedge.CodeTaskFinished, httpedge.CodeIdempotencyConflict, httpedge.CodePayloadTooLarge,
		httpedge.CodeUnsupportedMediaType, httpedge.CodeRateLimited, httpedge.CodeServiceBusy, httpedge.CodeInternal,
		httpedge.CodeArtifactTooLarge, httpedge.CodeChecksumMismatch, httpedge.CodeArtifactUnreadable, httpedge.CodeArtifactInUse,
		httpedge.CodeUploadIncomplete}
	sort.Strings(inDoc)
	sort.Strings(inCode)
	if strings.Join(inDoc, ",") != strings.Join(inCode, ",") {
		t.Errorf("ErrorCode enum %v, code sends %v", inDoc, inCode)
	}
}

// TestResponsesMatchOpenAPI sends real requests to the server over fakes
// and validates each request and response against the document.
func TestResponsesMatchOpenAPI(t *testing.T) {
	doc := loadSpec(t)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	ok := fakeCheck{"postgres", func(context.Context) error { return nil }}
	down := fakeCheck{"redis", func(context.Context) error { return context.DeadlineExceeded }}

	type tc struct {
		name string
		r    req
		want int
		prep func(*fakeServices)
		opts []harnessOption
	}
	cases := []tc{
		{name: "healthz", r: req{method: http.MethodGet, path: "/healthz"}, want: 200},
		{name: "readyz ok", r: req{method: http.MethodGet, path: "/readyz"}, want: 200, opts: []harnessOption{withChecks(ok)}},
		{name: "readyz down", r: req{method: http.MethodGet, path: "/readyz"}, want: 503, opts: []harnessOption{withChecks(ok, down)}},
		{name: "metrics", r: req{method: http.MethodGet, path: "/metrics"}, want: 200},
		{name: "openapi", r: req{method: http.MethodGet, path: "/openapi.yaml"}, want: 200},
		{name: "check no update", r: req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1,
			body: `{"model":"cam-x1","current_version":"1.2.0"}`}, want: 200,
			prep: func(f *fakeServices) {
				f.checkFn = func(ports.CheckRequest) (ports.CheckResult, error) { return ports.CheckResult{PollAfter: 3600e9}, nil }
			}},
		{name: "check busy", r: req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1,
			body: `{"model":"cam-x1","current_version":"1.2.0"}`}, want: 503,
			prep: func(f *fakeServices) {
				f.checkFn = func(ports.CheckRequest) (ports.CheckResult, error) {
					return ports.CheckResult{}, &ports.BusyError{Reason: ports.LockTimeout}
				}
			}},
		{name: "check rate limited", r: req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/check", token: tokenDev1,
			body: `{"model":"cam-x1","current_version":"1.2.0"}`}, want: 429,
			prep: func(f *fakeServices) {
				f.checkFn = func(ports.CheckRequest) (ports.CheckResult, error) { return ports.CheckResult{}, domain.ErrRateLimited }
			}},
		{name: "event conflict", r: req{method: http.MethodPost, path: "/api/v1/devices/dev-1/ota/tasks/" + taskID + "/events", token: tokenDev1,
			body: `{"event_id":"e1","status":"installing"}`}, want: 409,
			prep: func(f *fakeServices) {
				f.eventFn = func(ports.EventRequest) (ports.TaskView, error) {
					return ports.TaskView{}, domain.ErrIdempotencyConflict
				}
			}},
		{name: "forbidden", r: req{method: http.MethodGet, path: "/api/v1/devices/dev-2/ota/tasks/" + taskID, token: tokenDev1}, want: 403},
		{name: "unauthorized", r: req{method: http.MethodGet, path: "/api/v1/admin/tasks"}, want: 401},
		{name: "audit", r: req{method: http.MethodGet, path: "/api/v1/admin/audit?actor=admin&action=firmware.revoke&since=2026-12-01T00:00:00Z&limit=2",
			token: testAdminToken}, want: 200},
		{name: "audit forbidden", r: req{method: http.MethodGet, path: "/api/v1/admin/audit", token: "role-viewer"}, want: 403},
		{name: "validation", r: req{method: http.MethodPost, path: "/api/v1/admin/devices", token: testAdminToken, body: `{"model":"m"}`}, want: 400},
		{name: "unsupported media", r: req{method: http.MethodPost, path: "/api/v1/admin/devices", token: testAdminToken, body: `x`, contentType: "text/plain"}, want: 415},
		{name: "internal", r: req{method: http.MethodGet, path: "/api/v1/admin/rollouts/" + rolloutID, token: testAdminToken}, want: 500,
			prep: func(f *fakeServices) { f.adminErr = io.ErrUnexpectedEOF }},
		{name: "not found", r: req{method: http.MethodGet, path: "/api/v1/admin/devices/ghost", token: testAdminToken}, want: 404,
			prep: func(f *fakeServices) { f.adminErr = domain.ErrNotFound }},
	}
	for _, rc := range apiRoutes {
		cases = append(cases, tc{name: rc.name, r: req{method: rc.method, path: rc.path, token: rc.token(), body: rc.body}, want: rc.status})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, c.opts...)
			if c.prep != nil {
				c.prep(h.fake)
			}
			rec := h.do(t, c.r)
			if rec.Code != c.want {
				t.Fatalf("status = %d, want %d: %s", rec.Code, c.want, rec.Body)
			}
			validateAgainstSpec(t, router, c.r, rec)
		})
	}
}

func validateAgainstSpec(t *testing.T, router routers.Router, r req, rec *httptest.ResponseRecorder) {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr := httptest.NewRequest(r.method, r.path, body)
	if r.body != "" {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		hr.Header.Set("Content-Type", ct)
	}
	route, params, err := router.FindRoute(hr)
	if err != nil {
		t.Fatalf("%s %s is not in the document: %v", r.method, r.path, err)
	}
	in := &openapi3filter.RequestValidationInput{
		Request: hr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}
	// Requests the server accepted must be valid by the document too.
	if rec.Code < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("request does not match the document: %v", err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 rec.Code,
		Header:                 rec.Header(),
		Body:                   io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("response does not match the document: %v\nbody: %s", err, rec.Body)
	}
}
