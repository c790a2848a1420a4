package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"

	"github.com/ai-device/ota/adapters/httpedge"
)

// Native fuzz targets for the HTTP edge. Every input goes through the real
// Echo server from NewServer over the real application on the in-memory
// adapters, so a body, content type or path id travels the production path
// from routing to storage. Each iteration builds a fresh world (one
// registered device with a pending task, and rollouts in every state), so a
// failing input reproduces on its own. Seed corpora live in
// testdata/fuzz/<FuzzName>/ and run as ordinary tests under `go test`.
//
// The checks are the contract's (docs/ERRORS.md): no panic, never a 5xx, only
// the statuses documented for the endpoint, the JSON error shape
// {"error":{"code","message","request_id"}} with a code of the error table
// for every status ≥ 400, and X-Request-ID on every response.

const (
	fuzzDeviceID = "dev-fuzz"
	fuzzModel    = "cam-x1"
)

// fuzzWorld is the application over the memory adapters, served by Echo.
type fuzzWorld struct {
	e     *echo.Echo
	token string // the device's token
	// ids to substitute for the placeholders of fuzzIDs
	taskID, firmwareID, revokedFirmwareID               string
	rolloutID, pausedRevokedRolloutID, cancelledRollout string
}

func newFuzzWorld(t *testing.T) *fuzzWorld {
	t.Helper()
	base := testenv.NewMemoryService(t, testenv.MemoryOptions{})
	devices, admin := base.Devices, base.Admin
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	cred, err := admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: fuzzDeviceID, Model: fuzzModel, CurrentVersion: "1.0.0"})
	must(err)
	publish := func(version string) domain.Firmware {
		t.Helper()
		fw, err := admin.PublishFirmware(ctx, testActor, domain.FirmwareSpec{Model: fuzzModel, Version: version,
			URL: "https://cdn.example.com/" + version + ".bin", SizeBytes: 1024, SHA256: sha256Hex})
		must(err)
		return fw
	}
	start := func(fw domain.Firmware) domain.Rollout {
		t.Helper()
		r, err := admin.StartRollout(ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: domain.RolloutSpec{Percentage: 100}})
		must(err)
		return r
	}
	str := func(s string) *string { return &s }

	target := publish("1.1.0")
	active := start(target)
	// A paused rollout whose firmware was then revoked: resuming it is FIRMWARE_REVOKED.
	old := publish("0.9.0")
	pausedRevoked := start(old)
	_, err = admin.UpdateRollout(ctx, testActor, pausedRevoked.ID(), ports.RolloutChange{Status: str("paused")})
	must(err)
	_, err = admin.RevokeFirmware(ctx, testActor, old.ID())
	must(err)
	// A cancelled rollout: any change is INVALID_TRANSITION.
	cancelled := start(publish("0.8.0"))
	_, err = admin.UpdateRollout(ctx, testActor, cancelled.ID(), ports.RolloutChange{Status: str("cancelled")})
	must(err)

	dev, err := devices.IdentifyDevice(ctx, asDeviceID(fuzzDeviceID))
	must(err)
	res, err := devices.Check(ctx, ports.CheckRequest{Device: dev, Model: fuzzModel, CurrentVersion: "1.0.0"})
	must(err)
	if res.Task == nil {
		t.Fatal("setup: the check created no task")
	}
	return &fuzzWorld{
		e:     NewServer(Config{AdminToken: testAdminToken}, devices, admin, nil, nil, nil, nil),
		token: cred.Token, taskID: res.Task.Task.ID().String(), firmwareID: target.ID().String(), revokedFirmwareID: old.ID().String(),
		rolloutID: active.ID().String(), pausedRevokedRolloutID: pausedRevoked.ID().String(), cancelledRollout: cancelled.ID().String(),
	}
}

// fill replaces the placeholders a seed may use for ids only known at run
// time: {dev}, {task}, {firmware}, {revoked_firmware}, {rollout},
// {revoked_rollout}, {cancelled_rollout}, and {TASK} and {ROLLOUT} for the
// upper-case forms of those UUIDs.
func (w *fuzzWorld) fill(s string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	return strings.NewReplacer(
		"{TASK}", strings.ToUpper(w.taskID), "{ROLLOUT}", strings.ToUpper(w.rolloutID),
		"{dev}", fuzzDeviceID, "{task}", w.taskID, "{firmware}", w.firmwareID,
		"{revoked_firmware}", w.revokedFirmwareID, "{rollout}", w.rolloutID,
		"{revoked_rollout}", w.pausedRevokedRolloutID, "{cancelled_rollout}", w.cancelledRollout,
	).Replace(s)
}

// fuzzPath builds a request target from fixed segments and fuzzed ids. With
// raw false each id is percent-encoded as a client library would, and the
// path names exactly the ids given. With raw true the ids are pasted in as
// written, as a hand-made request may; a target net/http would refuse (a
// space, a control byte, a bad escape) falls back to the encoded form.
// named reports the ids the path names once decoded, and ok whether that is
// known (a raw id holding '/', '?' or '#' changes the route itself).
func fuzzPath(raw bool, parts ...string) (target string, named []string, ok bool) {
	build := func(raw bool) (string, []string, bool) {
		var b strings.Builder
		var ids []string
		ok := true
		for i, p := range parts {
			if i%2 == 0 {
				b.WriteString(p) // fixed segment
				continue
			}
			if !raw {
				b.WriteString(url.PathEscape(p))
				ids = append(ids, p)
				continue
			}
			b.WriteString(p)
			dec, err := url.PathUnescape(p)
			if err != nil || strings.ContainsAny(p, "/?#") {
				ok = false
			}
			ids = append(ids, dec)
		}
		return b.String(), ids, ok
	}
	if raw {
		t, ids, ok := build(true)
		if _, err := url.ParseRequestURI(t); err == nil && !strings.ContainsAny(t, " ") {
			return t, ids, ok
		}
	}
	return build(false)
}

// fuzzRequest is one request of a fuzz target.
type fuzzRequest struct {
	method, target string
	token          string
	body           []byte
	contentType    string
	setContentType bool
	requestID      string
}

func (w *fuzzWorld) serve(r fuzzRequest) *httptest.ResponseRecorder {
	u, err := url.ParseRequestURI(r.target)
	if err != nil {
		panic("fuzz harness built a bad target " + strconv.Quote(r.target) + ": " + err.Error())
	}
	req := httptest.NewRequest(r.method, "/", bytes.NewReader(r.body))
	// As net/http's server would set them from the request line.
	req.URL, req.RequestURI = u, r.target
	if r.setContentType {
		req.Header.Set(echo.HeaderContentType, r.contentType)
	}
	if r.token != "" {
		req.Header.Set(echo.HeaderAuthorization, "Bearer "+r.token)
	}
	if r.requestID != "" {
		req.Header.Set(httpedge.HeaderRequestID, r.requestID)
	}
	rec := httptest.NewRecorder()
	w.e.ServeHTTP(rec, req)
	return rec
}

// productStatus is docs/ERRORS.md's table: each code and its status.
var productStatus = map[string]int{
	httpedge.CodeMalformedJSON: 400, httpedge.CodeValidationFailed: 400, httpedge.CodeUnauthorized: 401, httpedge.CodeForbidden: 403,
	httpedge.CodeNotFound: 404, httpedge.CodeMethodNotAllowed: 405, httpedge.CodeDeviceExists: 409, httpedge.CodeFirmwareExists: 409,
	httpedge.CodeFirmwareRevoked: 409, httpedge.CodeModelMismatch: 409, httpedge.CodeInvalidTransition: 409, httpedge.CodeTaskFinished: 409,
	httpedge.CodeIdempotencyConflict: 409, httpedge.CodePayloadTooLarge: 413, httpedge.CodeUnsupportedMediaType: 415,
	httpedge.CodeRateLimited: 429, httpedge.CodeServiceBusy: 503, httpedge.CodeInternal: 500,
}

// endpointContract lists the success status and the error codes an
// endpoint may answer with.
type endpointContract struct {
	name    string
	success int
	codes   []string
}

// bodyCodes are the errors of any call that reads a JSON body.
var bodyCodes = []string{httpedge.CodeMalformedJSON, httpedge.CodeValidationFailed, httpedge.CodePayloadTooLarge, httpedge.CodeUnsupportedMediaType}

func contract(name string, success int, codes ...string) endpointContract {
	return endpointContract{name: name, success: success, codes: append(append([]string{}, bodyCodes...), codes...)}
}

var (
	// Device calls: any path id, so any route outcome; a rate limit is documented for both.
	checkContract = contract("check", 200, httpedge.CodeUnauthorized, httpedge.CodeForbidden, httpedge.CodeNotFound, httpedge.CodeMethodNotAllowed,
		httpedge.CodeModelMismatch, httpedge.CodeRateLimited)
	eventContract = contract("event", 200, httpedge.CodeUnauthorized, httpedge.CodeForbidden, httpedge.CodeNotFound, httpedge.CodeMethodNotAllowed,
		httpedge.CodeInvalidTransition, httpedge.CodeTaskFinished, httpedge.CodeIdempotencyConflict, httpedge.CodeRateLimited)
	// Admin calls, always with the admin token.
	registerContract = contract("register device", 201, httpedge.CodeDeviceExists)
	publishContract  = contract("publish firmware", 201, httpedge.CodeFirmwareExists)
	startContract    = contract("start rollout", 201, httpedge.CodeNotFound, httpedge.CodeFirmwareRevoked)
	patchContract    = contract("update rollout", 200, httpedge.CodeNotFound, httpedge.CodeMethodNotAllowed,
		httpedge.CodeInvalidTransition, httpedge.CodeFirmwareRevoked)
)

// checkResponse asserts the contract every answer keeps and returns the
// decoded JSON object of a success (nil for an error).
func checkResponse(t *testing.T, ec endpointContract, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	id := rec.Header().Get(httpedge.HeaderRequestID)
	if id == "" || !httpedge.SaneRequestID(id) {
		t.Fatalf("%s: X-Request-ID = %q, want a sane id on every response", ec.name, id)
	}
	if rec.Code >= 500 {
		t.Fatalf("%s: status %d, want no 5xx: %s", ec.name, rec.Code, rec.Body)
	}
	if ct := rec.Header().Get(echo.HeaderContentType); !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		t.Fatalf("%s: status %d with Content-Type %q, want JSON: %s", ec.name, rec.Code, ct, rec.Body)
	}
	if rec.Code < 400 {
		if rec.Code != ec.success {
			t.Fatalf("%s: status %d, want %d or a documented error: %s", ec.name, rec.Code, ec.success, rec.Body)
		}
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || m == nil {
			t.Fatalf("%s: success body is not a JSON object (%v): %s", ec.name, err, rec.Body)
		}
		return m
	}
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil || len(raw) != 1 || len(raw["error"]) != 3 {
		t.Fatalf("%s: status %d with body %s, want {\"error\":{code,message,request_id}} (%v)", ec.name, rec.Code, rec.Body, err)
	}
	var eb httpedge.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil {
		t.Fatalf("%s: error body fields are not strings: %v: %s", ec.name, err, rec.Body)
	}
	d := eb.Error
	if st, known := productStatus[d.Code]; !known || st != rec.Code {
		t.Fatalf("%s: status %d with code %q, which docs/ERRORS.md gives status %d", ec.name, rec.Code, d.Code, st)
	}
	allowed := false
	for _, c := range ec.codes {
		allowed = allowed || c == d.Code
	}
	if !allowed {
		t.Fatalf("%s: code %s (status %d, %q) is not documented for this call", ec.name, d.Code, rec.Code, d.Message)
	}
	if d.Message == "" || d.RequestID != id {
		t.Fatalf("%s: message %q request_id %q (X-Request-ID %q)", ec.name, d.Message, d.RequestID, id)
	}
	if rec.Code == 429 || rec.Code == 503 {
		if n, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || n < 1 {
			t.Fatalf("%s: %d with Retry-After %q, want whole seconds ≥ 1", ec.name, rec.Code, rec.Header().Get("Retry-After"))
		}
	}
	return nil
}

// checkNoInventedText fails when a success answer holds U+FFFD that the
// request did not send (raw or as a \ufffd escape): the service must refuse
// a string it cannot keep as given (docs/ERRORS.md: valid UTF-8 or
// VALIDATION_FAILED), never store a replacement character in its place.
func checkNoInventedText(t *testing.T, name string, reqBody []byte, rec *httptest.ResponseRecorder) {
	t.Helper()
	const replacement = "\uFFFD"
	if rec.Code >= 300 || !bytes.Contains(rec.Body.Bytes(), []byte(replacement)) {
		return
	}
	if bytes.Contains(reqBody, []byte(replacement)) || bytes.Contains(bytes.ToLower(reqBody), []byte(`\ufffd`)) {
		return
	}
	t.Fatalf("%s: status %d stored U+FFFD the request never sent (request %q, answer %s)", name, rec.Code, reqBody, rec.Body)
}

func fuzzString(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func fuzzInt(m map[string]any, key string) (int, bool) {
	f, ok := m[key].(float64)
	return int(f), ok && f == float64(int(f))
}

var deviceTaskStatuses = map[string]bool{
	"pending": true, "downloading": true, "downloaded": true, "installing": true,
	"succeeded": true, "failed": true, "cancelled": true,
}

// checkDeviceTask asserts the device view of a task.
func checkDeviceTask(t *testing.T, where string, m map[string]any) {
	t.Helper()
	p, ok := fuzzInt(m, "progress")
	if fuzzString(m, "id") == "" || !deviceTaskStatuses[fuzzString(m, "status")] || !ok || p < 0 || p > 100 {
		t.Fatalf("%s: task %v, want an id, a task status and progress 0..100", where, m)
	}
	if fw, _ := m["firmware"].(map[string]any); fw == nil || fuzzString(fw, "id") == "" {
		t.Fatalf("%s: task without firmware: %v", where, m)
	}
}

// FuzzCheckRequest: POST /devices/{device_id}/ota/check with the device's
// token and an arbitrary body, content type, path id and X-Request-ID.
func FuzzCheckRequest(f *testing.F) {
	ok := []byte(`{"model":"cam-x1","current_version":"1.0.0"}`)
	const ct = "application/json"
	f.Add(ok, ct, "{dev}", false, "")
	f.Add([]byte(`{"model":"cam-x1","current_version":"1.1.0"}`), ct, "{dev}", false, "req-1")
	f.Add([]byte(`{"model":"cam-x2","current_version":"1.0.0"}`), ct, "{dev}", false, "")
	f.Add([]byte(`{"model":"cam-x1","current_version":"1.0"}`), ct, "{dev}", false, "")
	f.Add([]byte(`{"model":"cam-x1","current_version":1}`), ct, "{dev}", false, "")
	f.Add([]byte(`{"model":"cam-x1","current_version":"1.0.0","attributes":{"hw":"rev2","timezone":"Asia/Tokyo"}}`), ct, "{dev}", false, "")
	f.Add([]byte(`{"model":"cam-x1","current_version":"1.0.0","attributes":{"":"x","k":1}}`), ct, "{dev}", false, "")
	f.Add([]byte(`{"model":"cam-x1","current_version":"1.0.0"} trailing`), ct, "{dev}", false, "")
	f.Add([]byte(`{"model":"cam-x1","model":"cam-x2","current_version":"1.0.0"}`), ct, "{dev}", false, "")
	f.Add([]byte(strings.Repeat("[", 20000)), ct, "{dev}", false, "")
	f.Add([]byte(`{"model":"cam-x1","current_version":"1.0.0\u0000"}`), ct, "{dev}", false, "")
	f.Add([]byte("{\"model\":\"cam-\xff\",\"current_version\":\"1.0.0\"}"), ct, "{dev}", false, "")
	f.Add([]byte(`null`), ct, "{dev}", false, "")
	f.Add([]byte(``), ct, "{dev}", false, "")
	f.Add(ok, "text/plain", "{dev}", false, "")
	f.Add(ok, "application/json; charset=latin1", "{dev}", false, "")
	f.Add(ok, "APPLICATION/JSON; charset=\"UTF-8\"", "{dev}", false, "")
	f.Add(ok, ct, "dev-other", false, "")
	f.Add(ok, ct, "DEV-FUZZ", false, "")
	f.Add(ok, ct, "%64ev-fuzz", true, "")
	f.Add(ok, ct, "dev-fuzz/../dev-fuzz", true, "")
	f.Add(ok, ct, "dev%2Ffuzz", true, "")
	f.Add(ok, ct, "", false, "\x00bad id")
	f.Add(append(append([]byte(`{"model":"cam-x1","current_version":"1.0.0","pad":"`), bytes.Repeat([]byte("a"), 64<<10)...), `"}`...), ct, "{dev}", false, "")
	f.Fuzz(func(t *testing.T, body []byte, contentType, pathID string, raw bool, requestID string) {
		w := newFuzzWorld(t)
		pathID = w.fill(pathID)
		target, named, known := fuzzPath(raw, APIPrefix+"/devices/", pathID, "/ota/check")
		rec := w.serve(fuzzRequest{method: http.MethodPost, target: target, token: w.token, body: body,
			contentType: contentType, setContentType: true, requestID: requestID})
		m := checkResponse(t, checkContract, rec)
		checkNoInventedText(t, checkContract.name, body, rec)
		if httpedge.SaneRequestID(requestID) && rec.Header().Get(httpedge.HeaderRequestID) != requestID {
			t.Fatalf("X-Request-ID = %q, want the caller's %q", rec.Header().Get(httpedge.HeaderRequestID), requestID)
		}
		if known && rec.Code != 404 && rec.Code != 405 {
			// Authentication comes first: the device reaches its own path only.
			if mine := named[0] == fuzzDeviceID; mine == (rec.Code == 403) {
				t.Fatalf("target %q names device %q: status %d (%s)", target, named[0], rec.Code, rec.Body)
			}
		}
		if m == nil {
			return
		}
		avail, isBool := m["update_available"].(bool)
		poll, hasPoll := fuzzInt(m, "poll_after_seconds")
		task, hasTask := m["task"]
		if !isBool || !hasPoll || poll < 1 || !hasTask {
			t.Fatalf("check answer %s, want {update_available, task, poll_after_seconds}", rec.Body)
		}
		if avail != (task != nil) {
			t.Fatalf("update_available=%v with task %v: true exactly when a task is returned", avail, task)
		}
		if tm, _ := task.(map[string]any); tm != nil {
			checkDeviceTask(t, "check", tm)
		}
	})
}

// FuzzEventRequest: POST /devices/{device_id}/ota/tasks/{task_id}/events
// with the device's token and an arbitrary body, content type and path ids;
// a request answered 200 is sent again and must be answered the same (a
// replayed event changes nothing).
func FuzzEventRequest(f *testing.F) {
	const ct = "application/json"
	add := func(body, contentType, dev, task string, raw bool) {
		f.Add([]byte(body), contentType, dev, task, raw)
	}
	add(`{"event_id":"e1","status":"downloading","progress":50}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"succeeded"}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"failed","error_code":"E_IO","error_message":"disk full"}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"pending"}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"cancelled"}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"downloading","progress":101}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"downloading","progress":-1}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"downloading","progress":50.5}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"downloading","progress":1e2}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"downloading","progress":99999999999999999999}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"downloading","progress":"50"}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":1,"status":"downloading"}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"","status":"downloading"}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"failed","error_message":"\u0000"}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"failed","error_message":"\ud800"}`, ct, "{dev}", "{task}", false)
	add("{\"event_id\":\"e\xff\",\"status\":\"failed\"}", ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"downloading","event_id":"e2"}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"downloading"}{}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":{"nested":[[[[{}]]]]}}`, ct, "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"downloading"}`, "application/xml", "{dev}", "{task}", false)
	add(`{"event_id":"e1","status":"downloading"}`, ct, "{dev}", "00000000-0000-0000-0000-000000000000", false)
	add(`{"event_id":"e1","status":"downloading"}`, ct, "{dev}", "not-a-uuid", false)
	add(`{"event_id":"e1","status":"downloading"}`, ct, "dev-other", "{task}", false)
	add(`{"event_id":"e1","status":"downloading"}`, ct, "%64ev-fuzz", "{task}", true)
	add(`{"event_id":"e1","status":"downloading"}`, ct, "{dev}", "{task}/../x", true)
	add(`[]`, ct, "{dev}", "{task}", false)
	add(``, ct, "{dev}", "{task}", false)
	f.Fuzz(func(t *testing.T, body []byte, contentType, pathDevice, pathTask string, raw bool) {
		w := newFuzzWorld(t)
		pathDevice, pathTask = w.fill(pathDevice), w.fill(pathTask)
		target, named, known := fuzzPath(raw, APIPrefix+"/devices/", pathDevice, "/ota/tasks/", pathTask, "/events")
		r := fuzzRequest{method: http.MethodPost, target: target, token: w.token, body: body,
			contentType: contentType, setContentType: true}
		rec := w.serve(r)
		m := checkResponse(t, eventContract, rec)
		checkNoInventedText(t, eventContract.name, body, rec)
		if known && rec.Code != 404 && rec.Code != 405 {
			if mine := named[0] == fuzzDeviceID; mine == (rec.Code == 403) {
				t.Fatalf("target %q names device %q: status %d (%s)", target, named[0], rec.Code, rec.Body)
			}
		}
		if known && !strings.EqualFold(named[1], w.taskID) && (rec.Code == 200 || rec.Code == 409) {
			t.Fatalf("target %q names task %q, not the device's: status %d (%s)", target, named[1], rec.Code, rec.Body)
		}
		if m == nil {
			return
		}
		checkDeviceTask(t, "event", m)
		if m["id"] != w.taskID {
			t.Fatalf("event answered with task %v, want %s", m["id"], w.taskID)
		}
		again := w.serve(r)
		checkResponse(t, eventContract, again)
		if again.Code != 200 || !bytes.Equal(again.Body.Bytes(), rec.Body.Bytes()) {
			t.Fatalf("replayed event: status %d body %s; first answer %s", again.Code, again.Body, rec.Body)
		}
	})
}

// Admin calls of FuzzAdminRequests, chosen by the first argument.
var fuzzAdminCalls = []struct {
	method, prefix, suffix string
	ec                     endpointContract
	withID                 bool
}{
	{http.MethodPost, APIPrefix + "/admin/devices", "", registerContract, false},
	{http.MethodPost, APIPrefix + "/admin/firmwares", "", publishContract, false},
	{http.MethodPost, APIPrefix + "/admin/rollouts", "", startContract, false},
	{http.MethodPatch, APIPrefix + "/admin/rollouts/", "", patchContract, true},
}

// FuzzAdminRequests: device registration, firmware publication, rollout
// creation and rollout change with the admin token and an arbitrary body
// and content type (and rollout id for the change).
func FuzzAdminRequests(f *testing.F) {
	const ct = "application/json"
	add := func(call uint8, body, contentType, id string) { f.Add(call, []byte(body), contentType, id) }
	// register device
	add(0, `{"device_id":"dev-new","model":"cam-x1","current_version":"1.0.0"}`, ct, "")
	add(0, `{"device_id":"dev-new","model":"cam-x1"}`, ct, "")
	add(0, `{"device_id":"{dev}","model":"cam-x1"}`, ct, "")
	add(0, `{"device_id":"dev/new","model":"cam-x1"}`, ct, "")
	add(0, `{"device_id":"`+strings.Repeat("d", 65)+`","model":"cam-x1"}`, ct, "")
	add(0, `{"device_id":"dev-new","model":"cam-x1","current_version":"01.0.0"}`, ct, "")
	add(0, `{"device_id":["dev-new"],"model":"cam-x1"}`, ct, "")
	add(0, `{"device_id":"dev-new","model":"cam-x1"`, ct, "")
	// publish firmware
	add(1, `{"model":"cam-x1","version":"2.0.0","url":"https://cdn.example.com/2.bin","size_bytes":1,"sha256":"`+sha256Hex+`"}`, ct, "")
	add(1, `{"model":"cam-x1","version":"1.1.0+other","url":"https://cdn.example.com/2.bin","size_bytes":1,"sha256":"`+sha256Hex+`"}`, ct, "")
	add(1, `{"model":"cam-x1","version":"2.0.0","url":"ftp://cdn.example.com/2.bin","size_bytes":1,"sha256":"`+sha256Hex+`"}`, ct, "")
	add(1, `{"model":"cam-x1","version":"2.0.0","url":"https://cdn.example.com/2.bin","size_bytes":0,"sha256":"`+sha256Hex+`"}`, ct, "")
	add(1, `{"model":"cam-x1","version":"2.0.0","url":"https://cdn.example.com/2.bin","size_bytes":9223372036854775808,"sha256":"`+sha256Hex+`"}`, ct, "")
	add(1, `{"model":"cam-x1","version":"2.0.0","url":"https://cdn.example.com/2.bin","size_bytes":1,"sha256":"`+strings.ToUpper(sha256Hex)+`"}`, ct, "")
	add(1, `{"model":"cam-x1","version":"2.0.0","url":"https://cdn.example.com/2.bin","size_bytes":1,"sha256":"`+sha256Hex+`","min_source_version":"x","mandatory":"yes"}`, ct, "")
	add(1, `{"model":"cam-x1","version":"2.0.0","url":"https://cdn.example.com/2.bin","size_bytes":1,"sha256":"`+sha256Hex+`","release_notes":"\u0000"}`, ct, "")
	// start rollout
	add(2, `{"firmware_id":"{firmware}","percentage":10}`, ct, "")
	add(2, `{"firmware_id":"{revoked_firmware}","percentage":10}`, ct, "")
	add(2, `{"firmware_id":"00000000-0000-0000-0000-000000000000","percentage":10}`, ct, "")
	add(2, `{"firmware_id":"{firmware}","percentage":101,"max_attempts":0,"failure_threshold_percent":-1,"min_sample":-5}`, ct, "")
	add(2, `{"firmware_id":"{firmware}","percentage":100,"max_attempts":1000000,"failure_threshold_percent":100,"min_sample":0}`, ct, "")
	add(2, `{"firmware_id":"{firmware}","percentage":1e1}`, ct, "")
	add(2, `{"firmware_id":"{firmware}"}`, "text/json", "")
	add(2, `{"firmware_id":"{firmware}","selector":{"tags_all":["eu"],"attributes":{"hw":"rev2"},"versions":">=1.0.0 <2.0.0"},`+
		`"stages":[{"percentage":1,"min_finished":5,"success_percent":90,"soak_seconds":60},{"percentage":100}],`+
		`"starts_at":"2026-01-02T03:04:05Z","window":{"daily":"22:00-02:00","time_zone":"Europe/Berlin"},"task_timeout_seconds":600}`, ct, "")
	add(2, `{"firmware_id":"{firmware}","stages":[{"percentage":50},{"percentage":10}]}`, ct, "")
	add(2, `{"firmware_id":"{firmware}","percentage":10,"window":{"daily":"25:00-02:00","time_zone":"../etc/passwd"}}`, ct, "")
	add(2, `{"firmware_id":"{firmware}","percentage":10,"allow_downgrade":true}`, ct, "")
	add(2, `{"firmware_id":"{firmware}","percentage":10,"selector":{"versions":">=1.0"},"task_timeout_seconds":9223372036854775807}`, ct, "")
	// update rollout
	add(3, `{"percentage":50}`, ct, "{rollout}")
	add(3, `{"status":"paused"}`, ct, "{rollout}")
	add(3, `{"status":"cancelled"}`, ct, "{rollout}")
	add(3, `{"status":"active"}`, ct, "{revoked_rollout}")
	add(3, `{"status":"active"}`, ct, "{cancelled_rollout}")
	add(3, `{"percentage":50}`, ct, "{cancelled_rollout}")
	add(3, `{"status":"done"}`, ct, "{rollout}")
	add(3, `{}`, ct, "{rollout}")
	add(3, `{"percentage":null,"status":null}`, ct, "{rollout}")
	add(3, `{"percentage":50}`, ct, "not-a-uuid")
	add(3, `{"percentage":50}`, ct, "")
	f.Fuzz(func(t *testing.T, call uint8, body []byte, contentType, id string) {
		w := newFuzzWorld(t)
		c := fuzzAdminCalls[int(call)%len(fuzzAdminCalls)]
		body = []byte(w.fill(string(body)))
		parts := []string{c.prefix}
		if c.withID {
			parts = append(parts, w.fill(id), c.suffix)
		}
		target, _, _ := fuzzPath(false, parts...)
		rec := w.serve(fuzzRequest{method: c.method, target: target, token: testAdminToken, body: body,
			contentType: contentType, setContentType: true})
		m := checkResponse(t, c.ec, rec)
		checkNoInventedText(t, c.ec.name, body, rec)
		if m == nil {
			return
		}
		switch c.ec.success {
		case 201:
			if fuzzString(m, "created_at") == "" {
				t.Fatalf("%s: created without created_at: %s", c.ec.name, rec.Body)
			}
		}
		switch c.ec.name {
		case "register device":
			if fuzzString(m, "device_id") == "" || fuzzString(m, "model") == "" || fuzzString(m, "token") == "" {
				t.Fatalf("registration answer %s, want device_id, model and token", rec.Body)
			}
		case "publish firmware":
			if fuzzString(m, "id") == "" || fuzzString(m, "status") != "released" {
				t.Fatalf("publication answer %s, want a released firmware with an id", rec.Body)
			}
		case "start rollout", "update rollout":
			p, ok := fuzzInt(m, "percentage")
			st := fuzzString(m, "status")
			if fuzzString(m, "id") == "" || !ok || p < 0 || p > 100 || (st != "active" && st != "paused" && st != "cancelled") {
				t.Fatalf("%s answer %s, want a rollout with percentage 0..100 and a status", c.ec.name, rec.Body)
			}
		}
	})
}
