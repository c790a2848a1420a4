package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"

	"github.com/ai-device/ota/adapters/httpedge"
)

// The fleet routes join apiRoutes, so the route, OpenAPI and auth tests
// that walk every route cover them too.
func init() {
	apiRoutes = append(apiRoutes,
		routeCase{"list rollouts", http.MethodGet, "/api/v1/admin/rollouts?model=cam-x1&limit=10", "", true, http.StatusOK},
		routeCase{"rollout failures", http.MethodGet, "/api/v1/admin/rollouts/" + rolloutID + "/failures?limit=5", "", true, http.StatusOK},
		routeCase{"fleet overview", http.MethodGet, "/api/v1/admin/fleet?model=cam-x1", "", true, http.StatusOK},
	)
}

func (f *fakeServices) ListRollouts(_ context.Context, q ports.RolloutQuery) ([]ports.RolloutSummary, error) {
	f.record("ListRollouts", q.Model, q.Limit)
	if f.adminErr != nil {
		return nil, f.adminErr
	}
	return []ports.RolloutSummary{{Rollout: testRollout(), Model: "cam-x1", Version: "1.4.0",
		Stats: domain.TaskStats{Pending: 3, Succeeded: 7, Failed: 1}}}, nil
}

func (f *fakeServices) RecentFailures(_ context.Context, id domain.UUID, limit string) ([]ports.TaskView, error) {
	f.record("RecentFailures", id.String(), limit)
	if f.adminErr != nil {
		return nil, f.adminErr
	}
	return []ports.TaskView{{Task: testTask(domain.TaskFailed), Firmware: testFirmware(domain.FirmwareReleased)}}, nil
}

func (f *fakeServices) FleetOverview(_ context.Context, model string) ([]ports.ModelFleet, error) {
	f.record("FleetOverview", model)
	if f.adminErr != nil {
		return nil, f.adminErr
	}
	return []ports.ModelFleet{{Model: "cam-x1", Devices: 5, PolledLastHour: 2, PolledLastDay: 4, NewestVersion: "1.4.0",
		OnNewest: 3, Versions: []ports.VersionShare{{Version: "1.4.0", Devices: 3}, {Version: "", Devices: 2}}}}, nil
}

func TestFleetRoutesPassQueryAndRenderViews(t *testing.T) {
	h := newHarness(t)
	rec := h.do(t, req{method: http.MethodGet, path: "/api/v1/admin/rollouts?model=cam-x1&limit=10", token: testAdminToken})
	if rec.Code != http.StatusOK {
		t.Fatalf("list rollouts: %d %s", rec.Code, rec.Body)
	}
	if args := h.fake.lastArgs; len(args) != 2 || args[0] != "cam-x1" || args[1] != "10" {
		t.Errorf("ListRollouts got %v, want the model and limit as received", args)
	}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("body %s: %v", rec.Body, err)
	}
	item := list.Items[0]
	if item["model"] != "cam-x1" || item["version"] != "1.4.0" || item["id"] != rolloutID || item["status"] != "paused" {
		t.Errorf("rollout summary %v", item)
	}
	if stats, _ := item["stats"].(map[string]any); stats["succeeded"] != float64(7) || stats["failed"] != float64(1) {
		t.Errorf("stats %v", item["stats"])
	}

	rec = h.do(t, req{method: http.MethodGet, path: "/api/v1/admin/fleet", token: testAdminToken})
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `{"version":null,"devices":2}`) ||
		!strings.Contains(rec.Body.String(), `"newest_version":"1.4.0","on_newest":3`) {
		t.Errorf("fleet: %d %s", rec.Code, rec.Body)
	}

	rec = h.do(t, req{method: http.MethodGet, path: "/api/v1/admin/rollouts/" + rolloutID + "/failures", token: testAdminToken})
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"status":"failed"`) {
		t.Errorf("failures: %d %s", rec.Code, rec.Body)
	}
	if args := h.fake.lastArgs; len(args) != 2 || args[0] != rolloutID || args[1] != "" {
		t.Errorf("RecentFailures got %v", args)
	}
}

func TestFleetRoutesErrors(t *testing.T) {
	doc := loadSpec(t)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		err  error
		path string
		want int
	}{
		{"bad limit", &domain.ValidationError{Field: "limit", Reason: "must be an integer from 1 to 500"}, "/api/v1/admin/rollouts?limit=0", 400},
		{"unknown rollout", domain.ErrNotFound, "/api/v1/admin/rollouts/" + rolloutID + "/failures", 404},
		{"bad model", &domain.ValidationError{Field: "model", Reason: "bad"}, "/api/v1/admin/fleet?model=x", 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.fake.adminErr = c.err
			r := req{method: http.MethodGet, path: c.path, token: testAdminToken}
			rec := h.do(t, r)
			if rec.Code != c.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.want, rec.Body)
			}
			validateAgainstSpec(t, router, r, rec)
		})
	}
	h := newHarness(t)
	if rec := h.do(t, req{method: http.MethodGet, path: "/api/v1/admin/fleet"}); rec.Code != http.StatusUnauthorized {
		t.Errorf("fleet without the admin token: %d", rec.Code)
	}
	if calls := h.fake.called(); len(calls) != 0 {
		t.Errorf("unauthenticated request reached the service: %v", calls)
	}
}

// TestMountAnswersItself: a mounted handler gets every method and path
// under its prefix, its own answers (even errors) go out unchanged, and the
// API's routes and JSON errors are not disturbed.
func TestMountAnswersItself(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("<p>" + r.Method + " " + r.URL.Path + "</p>"))
	})
	obs := &fakeObserver{}
	e := NewServer(Config{AdminToken: testAdminToken}, &fakeServices{}, &fakeServices{}, nil, obs, nil, nil,
		WithMount("/console/", page))
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/console"}, {http.MethodGet, "/console/"}, {http.MethodPost, "/console/rollouts/x"},
		{http.MethodDelete, "/console/nope"},
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != http.StatusTeapot || rec.Body.String() != "<p>"+c.method+" "+c.path+"</p>" {
			t.Errorf("%s %s: %d %q", c.method, c.path, rec.Code, rec.Body)
		}
		if rec.Header().Get(httpedge.HeaderRequestID) == "" {
			t.Errorf("%s %s: no request id", c.method, c.path)
		}
		if got := obs.last().route; !strings.HasPrefix(got, "/console") {
			t.Errorf("%s %s observed as route %q", c.method, c.path, got)
		}
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/nope", nil))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"code":"NOT_FOUND"`) {
		t.Errorf("API 404 after mounting: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/consoleX", nil))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"code":"NOT_FOUND"`) {
		t.Errorf("/consoleX: %d %s, want the API's 404", rec.Code, rec.Body)
	}
}

func TestDescribeErrorMatchesTheAPI(t *testing.T) {
	for _, c := range []struct {
		err          error
		status       int
		code         string
		messageHas   string
		wantInternal bool
	}{
		{&domain.ValidationError{Field: "sha256", Reason: "must be 64 lowercase hex characters"}, 400, httpedge.CodeValidationFailed, "sha256: must be 64", false},
		{domain.ErrFirmwareExists, 409, httpedge.CodeFirmwareExists, "already published", false},
		{domain.ErrNotFound, 404, httpedge.CodeNotFound, "not found", false},
		{context.DeadlineExceeded, 500, httpedge.CodeInternal, "internal error", true},
	} {
		got := httpedge.DescribeError(c.err)
		if got.Status != c.status || got.Code != c.code || !strings.Contains(got.Message, c.messageHas) || got.Internal != c.wantInternal {
			t.Errorf("%v: %+v", c.err, got)
		}
	}
}

// TestFleetResponsesOfTheRealApplicationMatchOpenAPI serves the fleet views
// from the real application on the memory adapters (a failed task, a device
// that never reported a version, an auto-paused rollout) and validates each
// answer against the document.
func TestFleetResponsesOfTheRealApplicationMatchOpenAPI(t *testing.T) {
	doc := loadSpec(t)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	svc := testenv.NewMemoryService(t, testenv.MemoryOptions{})
	devices, admin, fleet := svc.Devices, svc.Admin, svc.Fleet
	ctx := context.Background()
	fw, err := admin.PublishFirmware(ctx, testActor, domain.FirmwareSpec{Model: "cam-x1", Version: "1.1.0+b7",
		URL: "https://cdn.example.com/1.1.0.bin", SizeBytes: 1024, SHA256: sha256Hex})
	if err != nil {
		t.Fatal(err)
	}
	threshold, one := 10, 1
	r, err := admin.StartRollout(ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(),
		Spec: domain.RolloutSpec{Percentage: 100, FailureThresholdPercent: &threshold, MinSample: &one}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"dev-a", "dev-b"} {
		if _, err := admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: id, Model: "cam-x1"}); err != nil {
			t.Fatal(err)
		}
	}
	ident, err := devices.IdentifyDevice(ctx, asDeviceID("dev-a"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := devices.Check(ctx, ports.CheckRequest{Device: ident, Model: "cam-x1", CurrentVersion: "1.0.0"})
	if err != nil || res.Task == nil {
		t.Fatalf("check: %v", err)
	}
	if _, err := devices.ReportEvent(ctx, asDeviceID("dev-a"), res.Task.Task.ID(), ports.EventRequest{
		EventID: "e1", Status: "failed", ErrorCode: "E_FLASH", ErrorMessage: "write failed"}); err != nil {
		t.Fatal(err)
	}
	e := NewServer(Config{AdminToken: testAdminToken}, devices, admin, nil, nil, nil, nil, WithFleet(fleet))
	for _, c := range []struct {
		path string
		want []string
	}{
		{"/api/v1/admin/rollouts", []string{`"status":"paused"`, `"paused_reason":"auto"`, `"version":"1.1.0+b7"`, `"failed":1`}},
		{"/api/v1/admin/rollouts/" + r.ID().String() + "/failures", []string{`"error_code":"E_FLASH"`, `"device_id":"dev-a"`}},
		{"/api/v1/admin/fleet", []string{`"newest_version":"1.1.0+b7"`, `{"version":"1.0.0","devices":1}`, `{"version":null,"devices":1}`}},
	} {
		rq := req{method: http.MethodGet, path: c.path, token: testAdminToken}
		hr := httptest.NewRequest(rq.method, rq.path, nil)
		hr.Header.Set("Authorization", "Bearer "+testAdminToken)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, hr)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", c.path, rec.Code, rec.Body)
		}
		for _, w := range c.want {
			if !strings.Contains(rec.Body.String(), w) {
				t.Errorf("%s lacks %s: %s", c.path, w, rec.Body)
			}
		}
		validateAgainstSpec(t, router, rq, rec)
	}
}

// TestPathUUIDParsedOnceAtTheEdge: a path id reaches the use case typed and
// canonical (an upper-case UUID in lower case), and one that is not a UUID
// reaches it as the zero UUID, which every store answers as not found.
func TestPathUUIDParsedOnceAtTheEdge(t *testing.T) {
	h := newHarness(t)
	for _, tt := range []struct{ path, want string }{
		{strings.ToUpper(rolloutID), rolloutID},
		{"not-a-uuid", ""},
		{rolloutID + "0", ""},
	} {
		h.do(t, req{method: http.MethodGet, path: "/api/v1/admin/rollouts/" + tt.path + "/failures", token: testAdminToken})
		if args := h.fake.lastArgs; len(args) != 2 || args[0] != tt.want {
			t.Errorf("path %q reached RecentFailures as %q, want %q", tt.path, args, tt.want)
		}
		h.do(t, req{method: http.MethodGet, path: "/api/v1/admin/rollouts/" + tt.path, token: testAdminToken})
		if args := h.fake.lastArgs; len(args) != 1 || args[0] != tt.want {
			t.Errorf("path %q reached GetRollout as %q, want %q", tt.path, args, tt.want)
		}
	}
}
