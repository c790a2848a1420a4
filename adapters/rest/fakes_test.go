package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/adapters/httpedge"
)

const (
	testAdminToken = "admin-secret-0123456789"
	tokenDev1      = "dev_token_for_device_one"
	tokenDev2      = "dev_token_for_device_two"
	dev1           = "dev-1"
	dev2           = "dev-2"
	taskID         = "7d0c7f4e-3b9a-4d2e-9a57-6f1f7c2b9e01"
	firmwareID     = "1b6f4c2e-8a3d-4f5e-9b7a-2c1d0e9f8a76"
	rolloutID      = "c3a1e5d7-2b4f-4a6c-8e9d-0f1a2b3c4d5e"
	sha256Hex      = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
)

// A fixed instant in a non-UTC zone, so the tests see the views convert to UTC.
var testTime = time.Date(2025, 3, 4, 13, 14, 15, 0, time.FixedZone("CET", 3600))

func testFirmware(status domain.FirmwareStatus) domain.Firmware {
	fw, err := domain.RehydrateFirmware(firmwareID, domain.FirmwareSpec{
		Model: "cam-x1", Version: "1.4.0", URL: "https://cdn.example.com/cam-x1/1.4.0.bin", SizeBytes: 1 << 20,
		SHA256: sha256Hex, SHA1: "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3", ReleaseNotes: "fixes",
		Mandatory: true, MinSourceVersion: "1.0.0",
	}, status, testTime, testTime)
	if err != nil {
		panic(err)
	}
	return fw
}

func testTask(status domain.TaskStatus) domain.Task {
	return domain.RehydrateTask(domain.TaskRecord{
		ID: taskID, ActionID: 42, DeviceID: dev1, FirmwareID: firmwareID, RolloutID: rolloutID,
		Status: status, Progress: 30, Attempt: 1, CreatedAt: testTime, UpdatedAt: testTime.Add(time.Minute),
	})
}

func testTaskView() ports.TaskView {
	return ports.TaskView{Task: testTask(domain.TaskDownloading), Firmware: testFirmware(domain.FirmwareReleased)}
}

func testRollout() domain.Rollout {
	threshold := 10
	return domain.RehydrateRollout(domain.RolloutRecord{
		ID: rolloutID, FirmwareID: firmwareID, Percentage: 25, MaxAttempts: 3,
		FailureThresholdPercent: &threshold, MinSample: 20, Status: domain.RolloutPaused,
		PausedReason: domain.PausedManual, CreatedAt: testTime, UpdatedAt: testTime,
	})
}

func testDevice(id string) domain.Device {
	return domain.RehydrateDevice(id, "cam-x1", domain.MustParseVersion("1.2.0"),
		domain.HashToken("x"), testTime, testTime)
}

// fakeServices implements ports.DeviceService and ports.AdminService with
// canned answers; a test overrides the function fields it cares about and
// reads the recorded calls.
type fakeServices struct {
	mu    sync.Mutex
	calls []string

	lastCheck  ports.CheckRequest
	lastEvent  ports.EventRequest
	lastReg    ports.RegisterDevice
	lastSpec   domain.FirmwareSpec
	lastStart  ports.StartRollout
	lastChange ports.RolloutChange
	lastQuery  ports.TaskQuery
	// lastDevices is the last device listing's query.
	lastDevices ports.DeviceQuery
	lastArgs    []string

	checkFn  func(ports.CheckRequest) (ports.CheckResult, error)
	eventFn  func(ports.EventRequest) (ports.TaskView, error)
	authFn   func(token string) (string, error)
	adminErr error // returned by every admin call when set
}

func (f *fakeServices) record(name string, args ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
	f.lastArgs = args
}

func (f *fakeServices) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeServices) AuthenticateDevice(_ context.Context, token string) (ports.AuthenticatedDevice, error) {
	id := ""
	var err error
	switch {
	case f.authFn != nil:
		id, err = f.authFn(token)
	case token == tokenDev1:
		id = dev1
	case token == tokenDev2:
		id = dev2
	default:
		err = domain.ErrUnauthorized
	}
	if err != nil {
		return ports.AuthenticatedDevice{}, err
	}
	return fakeDevice(id), nil
}

func (f *fakeServices) IdentifyDevice(_ context.Context, deviceID domain.DeviceID) (ports.AuthenticatedDevice, error) {
	f.record("IdentifyDevice", deviceID.String())
	return fakeDevice(deviceID.String()), nil
}

// fakeDevice is an authenticated device of model cam-x1 with no tasks.
func fakeDevice(id string) ports.AuthenticatedDevice {
	return ports.AuthenticatedDevice{
		Device: domain.RehydrateDevice(id, "cam-x1", domain.Version{}, domain.HashToken("fake-"+id), time.Time{}, time.Time{}),
		Tasks:  &ports.DeviceTasks{Failed: map[string]int{}},
	}
}

func (f *fakeServices) Check(_ context.Context, req ports.CheckRequest) (ports.CheckResult, error) {
	f.record("Check", req.Device.ID().String())
	f.mu.Lock()
	f.lastCheck = req
	f.mu.Unlock()
	if f.checkFn != nil {
		return f.checkFn(req)
	}
	tv := testTaskView()
	return ports.CheckResult{Task: &tv, Outcome: ports.CheckReused, PollAfter: time.Hour}, nil
}

func (f *fakeServices) GetTask(_ context.Context, deviceID domain.DeviceID, taskID domain.UUID) (ports.TaskView, error) {
	f.record("GetTask", deviceID.String(), taskID.String())
	return testTaskView(), nil
}

func (f *fakeServices) ReportEvent(_ context.Context, deviceID domain.DeviceID, taskID domain.UUID, ev ports.EventRequest) (ports.TaskView, error) {
	f.record("ReportEvent", deviceID.String(), taskID.String())
	f.mu.Lock()
	f.lastEvent = ev
	f.mu.Unlock()
	if f.eventFn != nil {
		return f.eventFn(ev)
	}
	return testTaskView(), nil
}

func (f *fakeServices) RegisterDevice(_ context.Context, _ domain.Actor, req ports.RegisterDevice) (ports.DeviceCredentials, error) {
	f.record("RegisterDevice", req.DeviceID)
	f.mu.Lock()
	f.lastReg = req
	f.mu.Unlock()
	if f.adminErr != nil {
		return ports.DeviceCredentials{}, f.adminErr
	}
	id, err := domain.ParseDeviceID(req.DeviceID) // as the use case parses it
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	d, err := domain.NewDevice(id, req.Model, req.CurrentVersion, domain.HashToken("t"), testTime)
	if err != nil {
		return ports.DeviceCredentials{}, err
	}
	return ports.DeviceCredentials{Device: d, Token: "dev_new_token"}, nil
}

func (f *fakeServices) RotateDeviceToken(_ context.Context, _ domain.Actor, deviceID domain.DeviceID) (ports.DeviceCredentials, error) {
	f.record("RotateDeviceToken", deviceID.String())
	if f.adminErr != nil {
		return ports.DeviceCredentials{}, f.adminErr
	}
	return ports.DeviceCredentials{Device: testDevice(deviceID.String()), Token: "dev_rotated_token"}, nil
}

func (f *fakeServices) GetDevice(_ context.Context, deviceID domain.DeviceID) (ports.DeviceView, error) {
	f.record("GetDevice", deviceID.String())
	if f.adminErr != nil {
		return ports.DeviceView{}, f.adminErr
	}
	tv := testTaskView()
	return ports.DeviceView{Device: testDevice(deviceID.String()), ActiveTask: &tv}, nil
}

func (f *fakeServices) PublishFirmware(_ context.Context, _ domain.Actor, spec domain.FirmwareSpec) (domain.Firmware, error) {
	f.record("PublishFirmware")
	f.mu.Lock()
	f.lastSpec = spec
	f.mu.Unlock()
	if f.adminErr != nil {
		return domain.Firmware{}, f.adminErr
	}
	return domain.NewFirmware(asUUID(firmwareID), spec, testTime)
}

func (f *fakeServices) ListFirmwares(_ context.Context, model string) ([]domain.Firmware, error) {
	f.record("ListFirmwares", model)
	if f.adminErr != nil {
		return nil, f.adminErr
	}
	return []domain.Firmware{testFirmware(domain.FirmwareReleased)}, nil
}

func (f *fakeServices) RevokeFirmware(_ context.Context, _ domain.Actor, id domain.UUID) (domain.Firmware, error) {
	f.record("RevokeFirmware", id.String())
	if f.adminErr != nil {
		return domain.Firmware{}, f.adminErr
	}
	return testFirmware(domain.FirmwareRevoked), nil
}

func (f *fakeServices) StartRollout(_ context.Context, _ domain.Actor, req ports.StartRollout) (domain.Rollout, error) {
	f.record("StartRollout", req.FirmwareID)
	f.mu.Lock()
	f.lastStart = req
	f.mu.Unlock()
	if f.adminErr != nil {
		return domain.Rollout{}, f.adminErr
	}
	return domain.NewRollout(asUUID(rolloutID), testFirmware(domain.FirmwareReleased), req.Spec, testTime)
}

func (f *fakeServices) UpdateRollout(_ context.Context, _ domain.Actor, id domain.UUID, change ports.RolloutChange) (domain.Rollout, error) {
	f.record("UpdateRollout", id.String())
	f.mu.Lock()
	f.lastChange = change
	f.mu.Unlock()
	if f.adminErr != nil {
		return domain.Rollout{}, f.adminErr
	}
	return testRollout(), nil
}

func (f *fakeServices) GetRollout(_ context.Context, id domain.UUID) (ports.RolloutView, error) {
	f.record("GetRollout", id.String())
	if f.adminErr != nil {
		return ports.RolloutView{}, f.adminErr
	}
	return ports.RolloutView{Rollout: testRollout(), Stats: domain.TaskStats{
		Pending: 1, Downloading: 2, Downloaded: 3, Installing: 4, Succeeded: 5, Failed: 6, Cancelled: 7,
	}}, nil
}

func (f *fakeServices) TaskEvents(_ context.Context, taskID domain.UUID) ([]ports.TaskEvent, error) {
	f.record("TaskEvents")
	if f.adminErr != nil {
		return nil, f.adminErr
	}
	p := 40
	ev, err := domain.NewEvent("e1", "downloading", &p, "", "")
	if err != nil {
		return nil, err
	}
	return []ports.TaskEvent{{Event: ev, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}, nil
}

func (f *fakeServices) ListTasks(_ context.Context, q ports.TaskQuery) (ports.TaskPage, error) {
	f.record("ListTasks")
	f.mu.Lock()
	f.lastQuery = q
	f.mu.Unlock()
	if f.adminErr != nil {
		return ports.TaskPage{}, f.adminErr
	}
	next := ""
	if q.After == "" {
		next = "Y3Vyc29y"
	}
	return ports.TaskPage{Items: []ports.TaskView{testTaskView()}, Next: next}, nil
}

type fakeCheck struct {
	name string
	fn   func(ctx context.Context) error
}

func (c fakeCheck) Name() string                    { return c.name }
func (c fakeCheck) Check(ctx context.Context) error { return c.fn(ctx) }

type observation struct {
	method, route string
	code          int
}

type fakeObserver struct {
	mu  sync.Mutex
	obs []observation
}

func (o *fakeObserver) RequestStarted() {}

func (o *fakeObserver) ObserveRequest(method, route string, code int, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.obs = append(o.obs, observation{method, route, code})
}

func (o *fakeObserver) last() observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.obs[len(o.obs)-1]
}

// syncBuffer is a log sink safe for the concurrent readiness probes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// harness is a server over fakes, with its observations and logs.
type harness struct {
	e      *echo.Echo
	fake   *fakeServices
	obs    *fakeObserver
	logs   *syncBuffer
	checks []ports.HealthCheck
	// artifacts answers the artifact routes (artifacts_test.go).
	artifacts *fakeArtifacts
	// audit is the audit log the listing reads (audit_test.go).
	audit *testAuditLog
	// webhooks answers the webhook routes (webhooks_test.go).
	webhooks *fakeWebhooks
}

type harnessOption func(*Config, *harness)

func withChecks(checks ...ports.HealthCheck) harnessOption {
	return func(_ *Config, h *harness) { h.checks = checks }
}

func withConfig(fn func(*Config)) harnessOption {
	return func(c *Config, _ *harness) { fn(c) }
}

func newHarness(t *testing.T, opts ...harnessOption) *harness {
	t.Helper()
	h := &harness{fake: &fakeServices{}, obs: &fakeObserver{}, logs: &syncBuffer{}}
	cfg := Config{AdminToken: testAdminToken}
	for _, o := range opts {
		o(&cfg, h)
	}
	logger := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, "# HELP up test\nup 1\n")
	})
	h.artifacts = &fakeArtifacts{}
	h.audit = &testAuditLog{}
	h.webhooks = newFakeWebhooks(h.fake)
	h.e = NewServer(cfg, h.fake, h.fake, h.checks, h.obs, metrics, logger, WithFleet(h.fake), WithArtifacts(h.artifacts),
		WithAccounts(fakeAccounts{h.fake}), WithAudit(newTestAudit(t, h.audit)), WithWebhooks(h.webhooks))
	return h
}

// req describes one request to send.
type req struct {
	method, path string
	token        string // "" sends no Authorization header
	body         string
	contentType  string // defaults to application/json when body is set
	header       map[string]string
}

func (h *harness) do(t *testing.T, r req) *httptest.ResponseRecorder {
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
		if ct != "-" {
			hr.Header.Set("Content-Type", ct)
		}
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.e.ServeHTTP(rec, hr)
	return rec
}

// wantError checks an error response: status, code, the body shape, and
// that request_id is the X-Request-ID header.
func wantError(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) httpedge.ErrorDetail {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status = %d, want %d; body %s", rec.Code, status, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var raw map[string]map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, rec.Body)
	}
	if len(raw) != 1 || raw["error"] == nil || len(raw["error"]) != 3 {
		t.Fatalf("error body shape = %s, want {\"error\":{code,message,request_id}}", rec.Body)
	}
	var eb httpedge.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil {
		t.Fatal(err)
	}
	if eb.Error.Code != code {
		t.Errorf("code = %q, want %q (message %q)", eb.Error.Code, code, eb.Error.Message)
	}
	if eb.Error.Message == "" {
		t.Error("empty message")
	}
	if id := rec.Header().Get(httpedge.HeaderRequestID); id == "" || eb.Error.RequestID != id {
		t.Errorf("request_id = %q, X-Request-ID = %q", eb.Error.RequestID, id)
	}
	return eb.Error
}

func decodeMap(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, rec.Body)
	}
	return m
}

func (f *fakeServices) SetDeviceTags(_ context.Context, _ domain.Actor, deviceID domain.DeviceID, tags []string) ([]string, error) {
	f.record("SetDeviceTags", append([]string{deviceID.String()}, tags...)...)
	if f.adminErr != nil {
		return nil, f.adminErr
	}
	return tags, nil
}

func (f *fakeServices) ChangeDeviceTags(_ context.Context, _ domain.Actor, c ports.TagChange) (map[string][]string, error) {
	f.record("ChangeDeviceTags", c.DeviceIDs...)
	if f.adminErr != nil {
		return nil, f.adminErr
	}
	out := map[string][]string{}
	for _, id := range c.DeviceIDs {
		out[id] = append(append([]string{}, c.Set...), c.Add...)
	}
	return out, nil
}

func (f *fakeServices) ListDevices(_ context.Context, q ports.DeviceQuery) (ports.DevicePage, error) {
	f.record("ListDevices", append(append([]string{q.Model}, q.Tags...), q.Attributes...)...)
	f.mu.Lock()
	f.lastDevices = q
	f.mu.Unlock()
	if f.adminErr != nil {
		return ports.DevicePage{}, f.adminErr
	}
	return ports.DevicePage{Items: []ports.DeviceListing{{Device: testDevice(dev1), Tags: q.Tags}}}, nil
}
