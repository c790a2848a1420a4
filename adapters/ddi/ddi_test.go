package ddi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/ddi"
	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	ddiapp "github.com/ai-device/ota/application/ddi"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

const (
	adminToken   = "admin-token-0123456789"
	gatewayToken = "gateway-token-0123456789"
	model        = "cam-x1"
)

// harness is the whole service on memory adapters behind httptest, with
// the DDI routes mounted on the HTTP edge as the binary mounts them.
type harness struct {
	t   *testing.T
	srv *httptest.Server
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessAt(t, local.NewClock())
}

// newHarnessAt is newHarness telling the time by clock.
func newHarnessAt(t *testing.T, clock ports.Clock) *harness {
	t.Helper()
	poll := application.PollInterval(90 * time.Second)
	base := testenv.NewMemoryService(t, testenv.MemoryOptions{Clock: clock, LockWait: 500 * time.Millisecond, PollInterval: time.Duration(poll)})
	store, deps, devices, admin := base.Store, base.Deps, base.Devices, base.Admin
	svc, err := ddiapp.New(devices, deps.Devices, deps.Rollouts, memory.NewAttributes(store), memory.NewTaskActions(store), deps.Tasks, deps.Metrics,
		deps.Clock, poll, "sw_version")
	if err != nil {
		t.Fatal(err)
	}
	// The links are made from the configured public URL, so the
	// listener's address must be known before the adapter is built.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ddi.New(ddi.Config{GatewayToken: gatewayToken, PublicURL: "http://" + l.Addr().String() + "/"}, svc, nil)
	e := rest.NewServer(rest.Config{AdminToken: adminToken, Mounts: []httpedge.Mount{a.Mount}},
		devices, admin, nil, nil, nil, nil)
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: e}}
	srv.Start()
	t.Cleanup(srv.Close)
	return &harness{t: t, srv: srv}
}

type response struct {
	status int
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("answer is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

func (h *harness) do(method, path, auth string, body any) response {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = strings.NewReader(s)
		} else {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, body: b}
}

func (h *harness) admin(method, path string, body any, want int) map[string]any {
	h.t.Helper()
	r := h.do(method, "/api/v1/admin"+path, "Bearer "+adminToken, body)
	if r.status != want {
		h.t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
	}
	return r.json(h.t)
}

// register adds a device and returns its TargetToken header value.
func (h *harness) register(id, version string) string {
	body := map[string]any{"device_id": id, "model": model}
	if version != "" {
		body["current_version"] = version
	}
	return "TargetToken " + h.admin(http.MethodPost, "/devices", body, http.StatusCreated)["token"].(string)
}

// release publishes version (with sha1 and md5 unless bare) and rolls it
// out to every device; it returns the rollout id.
func (h *harness) release(version string, mandatory, bare bool) string {
	fw := map[string]any{
		"model": model, "version": version, "url": "http://files.example/images/cam-" + version + ".swu",
		"size_bytes": 123456, "sha256": strings.Repeat("a", 64), "mandatory": mandatory,
	}
	if !bare {
		fw["sha1"], fw["md5"] = strings.Repeat("b", 40), strings.Repeat("c", 32)
	}
	id := h.admin(http.MethodPost, "/firmwares", fw, http.StatusCreated)["id"]
	return h.admin(http.MethodPost, "/rollouts", map[string]any{"firmware_id": id, "percentage": 100, "max_attempts": 2},
		http.StatusCreated)["id"].(string)
}

func (h *harness) tasks(device string) []map[string]any {
	items := h.admin(http.MethodGet, "/tasks?device_id="+device, nil, http.StatusOK)["items"].([]any)
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i] = it.(map[string]any)
	}
	return out
}

func root(device string) string { return "/DEFAULT/controller/v1/" + device }

// poll returns the poll answer's links (href by name) after checking the
// answer's invariant parts.
func (h *harness) poll(device, auth string) map[string]string {
	h.t.Helper()
	r := h.do(http.MethodGet, root(device), auth, nil)
	if r.status != http.StatusOK {
		h.t.Fatalf("poll: %d %s", r.status, r.body)
	}
	m := r.json(h.t)
	sleep := m["config"].(map[string]any)["polling"].(map[string]any)["sleep"]
	if sleep != "00:01:30" {
		h.t.Fatalf("config.polling.sleep = %v, want 00:01:30 in every poll answer", sleep)
	}
	links := map[string]string{}
	for name, l := range m["_links"].(map[string]any) {
		links[name] = l.(map[string]any)["href"].(string)
	}
	return links
}

// feedback is a deploymentBase feedback exactly as SWUpdate 2022.12 sends it.
func feedback(action int64, execution, finished string, cnt, of int, details ...string) string {
	d := `" "`
	if len(details) > 0 {
		q := make([]string, len(details))
		for i, s := range details {
			q[i] = strconv.Quote(s)
		}
		d = strings.Join(q, ",")
	}
	return fmt.Sprintf(`{"id": %d, "time": "20260102T030405", "status": {"result": {"progress": {"cnt": %d, "of": %d}, "finished": %q}, "execution": %q, "details": [ %s ]}}`,
		action, cnt, of, finished, execution, d)
}

func actionOf(t *testing.T, href, kind string) int64 {
	t.Helper()
	i := strings.LastIndex(href, "/"+kind+"/")
	if i < 0 {
		t.Fatalf("%q is no %s link", href, kind)
	}
	n, err := strconv.ParseInt(href[i+len(kind)+2:], 10, 64)
	if err != nil {
		t.Fatalf("%q: action id is not an integer", href)
	}
	return n
}

func TestDeploymentLifecycle(t *testing.T) {
	h := newHarness(t)
	tok := h.register("dev-1", "1.0.0")

	links := h.poll("dev-1", tok)
	if _, ok := links["deploymentBase"]; ok {
		t.Fatal("deploymentBase offered with nothing rolled out")
	}
	if links["configData"] != h.srv.URL+root("dev-1")+"/configData" {
		t.Fatalf("configData link %q, want an absolute href while attributes are unknown", links["configData"])
	}

	h.release("1.1.0", false, false)
	links = h.poll("dev-1", tok)
	action := actionOf(t, links["deploymentBase"], "deploymentBase")
	if want := h.srv.URL + root("dev-1") + "/deploymentBase/" + strconv.FormatInt(action, 10); links["deploymentBase"] != want {
		t.Fatalf("deploymentBase href %q, want %q", links["deploymentBase"], want)
	}
	if again := h.poll("dev-1", tok); again["deploymentBase"] != links["deploymentBase"] {
		t.Fatal("a second poll must hand out the same action")
	}

	r := h.do(http.MethodGet, root("dev-1")+"/deploymentBase/"+strconv.FormatInt(action, 10), tok, nil)
	if r.status != http.StatusOK {
		t.Fatalf("deploymentBase: %d %s", r.status, r.body)
	}
	m := r.json(t)
	if m["id"] != strconv.FormatInt(action, 10) {
		t.Fatalf("id %v, want %d", m["id"], action)
	}
	dep := m["deployment"].(map[string]any)
	if _, ok := dep["maintenanceWindow"]; ok {
		t.Fatalf("a rollout without a maintenance window: maintenanceWindow %v, want the field left out", dep["maintenanceWindow"])
	}
	if dep["download"] != "attempt" || dep["update"] != "attempt" {
		t.Fatalf("optional firmware: download=%v update=%v, want attempt", dep["download"], dep["update"])
	}
	chunk := dep["chunks"].([]any)[0].(map[string]any)
	if chunk["part"] != "os" || chunk["version"] != "1.1.0" || chunk["name"] != model {
		t.Fatalf("chunk %v", chunk)
	}
	art := chunk["artifacts"].([]any)[0].(map[string]any)
	if art["filename"] != "cam-1.1.0.swu" {
		t.Fatalf("filename %v", art["filename"])
	}
	if n, ok := art["size"].(json.Number); !ok || n.String() != "123456" {
		t.Fatalf("size %#v, want the JSON integer 123456", art["size"])
	}
	hashes := art["hashes"].(map[string]any)
	if hashes["sha1"] != strings.Repeat("b", 40) || hashes["md5"] != strings.Repeat("c", 32) || hashes["sha256"] != strings.Repeat("a", 64) {
		t.Fatalf("hashes %v", hashes)
	}
	if href := art["_links"].(map[string]any)["download-http"].(map[string]any)["href"]; href != "http://files.example/images/cam-1.1.0.swu" {
		t.Fatalf("download-http %v", href)
	}

	fbURL := root("dev-1") + "/deploymentBase/" + strconv.FormatInt(action, 10) + "/feedback"
	send := func(body string) {
		t.Helper()
		r := h.do(http.MethodPost, fbURL, tok, body)
		if r.status != http.StatusOK || len(r.body) != 0 {
			t.Fatalf("feedback %s: %d %q, want exactly 200 with no body", body, r.status, r.body)
		}
	}
	first := feedback(action, "proceeding", "none", 0, 1, "Installing Update Chunk Artifacts.")
	send(first)
	ts := h.tasks("dev-1")
	if len(ts) != 1 || ts[0]["status"] != "downloading" || ts[0]["action_id"] != json.Number(strconv.FormatInt(action, 10)) {
		t.Fatalf("after proceeding: %v", ts)
	}
	before := ts[0]["updated_at"]
	send(first) // resent: a replay
	if ts := h.tasks("dev-1"); ts[0]["updated_at"] != before || ts[0]["status"] != "downloading" {
		t.Fatalf("a resent feedback changed the task: %v", ts[0])
	}
	send(feedback(action, "proceeding", "none", 1, 1, "Installed Chunk."))
	if ts := h.tasks("dev-1"); ts[0]["progress"] != json.Number("100") {
		t.Fatalf("progress cnt/of: %v", ts[0]["progress"])
	}
	send(feedback(action, "proceeding", "none", 0, 1, "a late log line")) // progress going back: acknowledged, ignored
	if ts := h.tasks("dev-1"); ts[0]["progress"] != json.Number("100") || ts[0]["status"] != "downloading" {
		t.Fatalf("a late progress report moved the task back: %v", ts[0])
	}
	if again := h.poll("dev-1", tok); again["deploymentBase"] != links["deploymentBase"] {
		t.Fatal("the deployment must stay offered until closed feedback (the client confirms after its reboot)")
	}
	send(feedback(action, "closed", "success", 0, 0, "Update Installed."))
	send(feedback(action, "closed", "success", 0, 0, "Update Installed."))
	ts = h.tasks("dev-1")
	if len(ts) != 1 || ts[0]["status"] != "succeeded" {
		t.Fatalf("after closed success: %v", ts)
	}
	if v := h.admin(http.MethodGet, "/devices/dev-1", nil, http.StatusOK)["current_version"]; v != "1.1.0" {
		t.Fatalf("current_version %v, want the installed 1.1.0", v)
	}
	if links := h.poll("dev-1", tok); links["deploymentBase"] != "" || len(h.tasks("dev-1")) != 1 {
		t.Fatalf("after success the same image must not be offered again: %v", links)
	}

	r = h.do(http.MethodGet, root("dev-1")+"/installedBase/"+strconv.FormatInt(action, 10), tok, nil)
	if r.status != http.StatusOK || r.json(t)["id"] != strconv.FormatInt(action, 10) {
		t.Fatalf("installedBase: %d %s", r.status, r.body)
	}
}

func TestFailureIsRetriedUpToMaxAttempts(t *testing.T) {
	h := newHarness(t)
	tok := h.register("dev-f", "1.0.0")
	h.release("2.0.0", true, false)
	var actions []int64
	for attempt := 1; attempt <= 2; attempt++ {
		links := h.poll("dev-f", tok)
		action := actionOf(t, links["deploymentBase"], "deploymentBase")
		actions = append(actions, action)
		r := h.do(http.MethodGet, root("dev-f")+"/deploymentBase/"+strconv.FormatInt(action, 10), tok, nil)
		if dep := r.json(t)["deployment"].(map[string]any); dep["update"] != "forced" || dep["download"] != "forced" {
			t.Fatalf("mandatory firmware must be forced: %v", dep)
		}
		r = h.do(http.MethodPost, root("dev-f")+"/deploymentBase/"+strconv.FormatInt(action, 10)+"/feedback", tok,
			feedback(action, "closed", "failure", 0, 1, "ERROR : Image invalid or corrupted. Not installing ..."))
		if r.status != http.StatusOK {
			t.Fatalf("failure feedback: %d %s", r.status, r.body)
		}
		ts := h.tasks("dev-f")
		last := ts[len(ts)-1]
		if last["status"] != "failed" || last["error_code"] != "DDI_FAILURE" ||
			!strings.Contains(last["error_message"].(string), "Image invalid or corrupted") || last["attempt"] != json.Number(strconv.Itoa(attempt)) {
			t.Fatalf("attempt %d: %v", attempt, last)
		}
		r = h.do(http.MethodGet, root("dev-f")+"/installedBase/"+strconv.FormatInt(action, 10), tok, nil)
		if r.status != http.StatusNotFound {
			t.Fatalf("installedBase of a failed action: %d, want 404", r.status)
		}
	}
	if actions[0] == actions[1] {
		t.Fatal("a retry must be a new action")
	}
	if links := h.poll("dev-f", tok); links["deploymentBase"] != "" {
		t.Fatal("max_attempts reached: the image must not be offered again")
	}
}

func TestCancelActionTakesPriorityAndIsConfirmed(t *testing.T) {
	h := newHarness(t)
	tok := h.register("dev-c", "1.0.0")
	h.release("1.1.0", false, false)
	old := actionOf(t, h.poll("dev-c", tok)["deploymentBase"], "deploymentBase")

	// A newer release supersedes the pending task: the poll must announce
	// the cancel, not the new deployment, until the device confirms it.
	h.release("1.2.0", false, false)
	links := h.poll("dev-c", tok)
	if links["deploymentBase"] != "" {
		t.Fatalf("cancelAction must take priority over deploymentBase: %v", links)
	}
	stop := actionOf(t, links["cancelAction"], "cancelAction")
	if stop != old {
		t.Fatalf("cancelAction for %d, want the superseded %d", stop, old)
	}
	r := h.do(http.MethodGet, root("dev-c")+"/cancelAction/"+strconv.FormatInt(stop, 10), tok, nil)
	m := r.json(t)
	if r.status != http.StatusOK || m["id"] != strconv.FormatInt(stop, 10) || m["cancelAction"].(map[string]any)["stopId"] != strconv.FormatInt(stop, 10) {
		t.Fatalf("cancelAction: %d %s", r.status, r.body)
	}
	// SWUpdate's acknowledgement, verbatim.
	ack := fmt.Sprintf(`{"id": %d, "time": "20260102T030405", "status": {"result": {"finished": "success"}, "execution": "closed", "details" : [ "cancellation acknowledged." ]}}`, stop)
	for range 2 { // resent: still 200
		r = h.do(http.MethodPost, root("dev-c")+"/cancelAction/"+strconv.FormatInt(stop, 10)+"/feedback", tok, ack)
		if r.status != http.StatusOK || len(r.body) != 0 {
			t.Fatalf("cancel feedback: %d %q, want exactly 200", r.status, r.body)
		}
	}
	links = h.poll("dev-c", tok)
	if links["cancelAction"] != "" || links["deploymentBase"] == "" {
		t.Fatalf("after the confirmation the new deployment is offered: %v", links)
	}

	// A cancelled rollout cancels the pending task; the device confirms.
	h2 := newHarness(t)
	tok2 := h2.register("dev-r", "1.0.0")
	rollout := h2.release("1.1.0", false, false)
	action := actionOf(t, h2.poll("dev-r", tok2)["deploymentBase"], "deploymentBase")
	h2.admin(http.MethodPatch, "/rollouts/"+rollout, map[string]any{"status": "cancelled"}, http.StatusOK)
	links = h2.poll("dev-r", tok2)
	if actionOf(t, links["cancelAction"], "cancelAction") != action || links["deploymentBase"] != "" {
		t.Fatalf("cancelled rollout: %v", links)
	}
	if ts := h2.tasks("dev-r"); ts[0]["status"] != "cancelled" || ts[0]["error_code"] != "ROLLOUT_CANCELLED" {
		t.Fatalf("task %v", ts[0])
	}
	// A deployment feedback on the cancelled action is refused (the device stops).
	r = h2.do(http.MethodPost, root("dev-r")+"/deploymentBase/"+strconv.FormatInt(action, 10)+"/feedback", tok2,
		feedback(action, "proceeding", "none", 0, 1))
	if r.status != http.StatusConflict {
		t.Fatalf("feedback on a cancelled action: %d %s", r.status, r.body)
	}
	r = h2.do(http.MethodPost, root("dev-r")+"/cancelAction/"+strconv.FormatInt(action, 10)+"/feedback", tok2,
		`{"status": {"execution": "closed", "result": {"finished": "success"}}}`)
	if r.status != http.StatusOK {
		t.Fatalf("cancel feedback: %d %s", r.status, r.body)
	}
	if links := h2.poll("dev-r", tok2); len(links) != 1 || links["configData"] == "" {
		t.Fatalf("nothing left to do but configData: %v", links)
	}
	// An action that was never cancelled has no cancelAction.
	if r := h2.do(http.MethodGet, root("dev-r")+"/cancelAction/999999", tok2, nil); r.status != http.StatusNotFound {
		t.Fatalf("unknown cancel: %d", r.status)
	}
}

func TestConfigData(t *testing.T) {
	h := newHarness(t)
	tok := h.register("dev-v", "") // version unknown until configData
	h.release("1.1.0", false, false)
	links := h.poll("dev-v", tok)
	if links["deploymentBase"] != "" || links["configData"] == "" {
		t.Fatalf("a device of unknown version is asked for configData, offered nothing: %v", links)
	}
	// SWUpdate's configData, verbatim (no mode: merge).
	body := `{"id": "", "time": "20260102T030405", "status": {"result": {"finished": "success"}, "execution": "closed", "details" : [ "" ]}, "data" : { "sw_version": "1.0.0", "hw_rev": "1.0" }}`
	r := h.do(http.MethodPut, root("dev-v")+"/configData", tok, body)
	if r.status != http.StatusOK {
		t.Fatalf("configData: %d %s", r.status, r.body)
	}
	if v := h.admin(http.MethodGet, "/devices/dev-v", nil, http.StatusOK)["current_version"]; v != "1.0.0" {
		t.Fatalf("current_version %v, want the reported 1.0.0", v)
	}
	links = h.poll("dev-v", tok)
	if links["configData"] != "" || links["deploymentBase"] == "" {
		t.Fatalf("after configData: %v", links)
	}

	for name, tc := range map[string]struct {
		body string
		want int
	}{
		"remove":          {`{"mode": "remove", "data": {"hw_rev": ""}}`, http.StatusOK},
		"replace":         {`{"mode": "replace", "data": {"sw_version": "1.0.0"}}`, http.StatusOK},
		"bad mode":        {`{"mode": "append", "data": {"k": "v"}}`, http.StatusBadRequest},
		"bad version":     {`{"data": {"sw_version": "one"}}`, http.StatusBadRequest},
		"no data":         {`{"mode": "merge"}`, http.StatusBadRequest},
		"non-string":      {`{"data": {"k": 1}}`, http.StatusBadRequest},
		"malformed":       {`{"data":`, http.StatusBadRequest},
		"too long value":  {`{"data": {"k": "` + strings.Repeat("v", 513) + `"}}`, http.StatusBadRequest},
		"too many values": {manyAttributes(65), http.StatusBadRequest},
	} {
		r := h.do(http.MethodPut, root("dev-v")+"/configData", tok, tc.body)
		if r.status != tc.want {
			t.Errorf("%s: %d %s, want %d", name, r.status, r.body, tc.want)
		}
		if tc.want == http.StatusBadRequest {
			var e httpedge.ErrorBody
			if json.Unmarshal(r.body, &e) != nil || e.Error.Code != httpedge.CodeValidationFailed {
				t.Errorf("%s: error body %s", name, r.body)
			}
		}
	}
	if v := h.admin(http.MethodGet, "/devices/dev-v", nil, http.StatusOK)["current_version"]; v != "1.0.0" {
		t.Fatalf("a refused configData changed the version: %v", v)
	}
}

func manyAttributes(n int) string {
	kv := make([]string, n)
	for i := range kv {
		kv[i] = fmt.Sprintf(`"k%d": "v"`, i)
	}
	return `{"data": {` + strings.Join(kv, ",") + `}}`
}

func TestAuthTenantAndErrors(t *testing.T) {
	h := newHarness(t)
	tok := h.register("dev-a", "1.0.0")
	other := h.register("dev-b", "1.0.0")
	h.release("1.1.0", false, true) // published without sha1

	for name, tc := range map[string]struct {
		path, auth string
		want       int
	}{
		"target token":               {root("dev-a"), tok, http.StatusOK},
		"tenant is case-insensitive": {"/default/controller/v1/dev-a", tok, http.StatusOK},
		"gateway token":              {root("dev-a"), "GatewayToken " + gatewayToken, http.StatusOK},
		"wrong tenant":               {"/OTHER/controller/v1/dev-a", tok, http.StatusNotFound},
		"unknown device (gateway)":   {root("nobody"), "GatewayToken " + gatewayToken, http.StatusNotFound},
		// A controller id that breaks the device id rule is parsed once,
		// at the edge, into no device: unknown to a gateway, another
		// device's path to a target token.
		"malformed id (gateway)": {root("bad%20id"), "GatewayToken " + gatewayToken, http.StatusNotFound},
		"overlong id (gateway)":  {root(strings.Repeat("d", 65)), "GatewayToken " + gatewayToken, http.StatusNotFound},
		"malformed id (target)":  {root("bad%20id"), tok, http.StatusForbidden},
		"wrong gateway token":    {root("dev-a"), "GatewayToken " + gatewayToken + "x", http.StatusUnauthorized},
		"another device's token": {root("dev-a"), other, http.StatusForbidden},
		"unknown token":          {root("dev-a"), "TargetToken nope", http.StatusUnauthorized},
		"bearer is not DDI":      {root("dev-a"), "Bearer " + strings.TrimPrefix(tok, "TargetToken "), http.StatusUnauthorized},
		"no credentials":         {root("dev-a"), "", http.StatusUnauthorized},
		"admin token":            {root("dev-a"), "TargetToken " + adminToken, http.StatusUnauthorized},
		"non-numeric action":     {root("dev-a") + "/deploymentBase/abc", tok, http.StatusNotFound},
		"unknown action":         {root("dev-a") + "/deploymentBase/424242", tok, http.StatusNotFound},
	} {
		if r := h.do(http.MethodGet, tc.path, tc.auth, nil); r.status != tc.want {
			t.Errorf("%s: %d %s, want %d", name, r.status, r.body, tc.want)
		}
	}

	// A firmware without sha1 is not offered over DDI; a task of it made
	// otherwise (a REST check) cannot be delivered: a documented error.
	if link, ok := h.poll("dev-a", tok)["deploymentBase"]; ok {
		t.Fatalf("firmware without sha1 offered over DDI: %s", link)
	}
	viaREST := h.do(http.MethodPost, "/api/v1/devices/dev-a/ota/check", "Bearer "+strings.TrimPrefix(tok, "TargetToken "),
		map[string]any{"model": model, "current_version": "1.0.0"})
	if viaREST.status != http.StatusOK {
		t.Fatalf("REST check: %d %s", viaREST.status, viaREST.body)
	}
	action, err := h.tasks("dev-a")[0]["action_id"].(json.Number).Int64()
	if err != nil {
		t.Fatal(err)
	}
	r := h.do(http.MethodGet, root("dev-a")+"/deploymentBase/"+strconv.FormatInt(action, 10), tok, nil)
	var e httpedge.ErrorBody
	if r.status != http.StatusConflict || json.Unmarshal(r.body, &e) != nil || e.Error.Code != httpedge.CodeFirmwareNotDeliverable ||
		!strings.Contains(e.Error.Message, "sha1") {
		t.Fatalf("firmware without sha1: %d %s", r.status, r.body)
	}
	// dev-b's token cannot read dev-a's action through dev-b's path either.
	if r := h.do(http.MethodGet, root("dev-b")+"/deploymentBase/"+strconv.FormatInt(action, 10), other, nil); r.status != http.StatusNotFound {
		t.Fatalf("another device's action: %d", r.status)
	}

	fb := root("dev-a") + "/deploymentBase/" + strconv.FormatInt(action, 10) + "/feedback"
	// In this order: "downloaded" must come before "proceeding again" (a
	// map's random order made the final status a coin toss).
	for _, tc := range []struct {
		name string
		body string
		want int
	}{
		{"unknown execution", `{"status": {"execution": "exploded", "result": {"finished": "none"}}}`, http.StatusBadRequest},
		{"unknown finished", `{"status": {"execution": "closed", "result": {"finished": "maybe"}}}`, http.StatusBadRequest},
		{"no status", `{"id": 1}`, http.StatusBadRequest},
		{"not json", `status=closed`, http.StatusBadRequest},
		{"scheduled", `{"status": {"execution": "scheduled", "result": {"finished": "none"}}}`, http.StatusOK},
		{"downloaded", `{"status": {"execution": "downloaded", "result": {"finished": "none"}}}`, http.StatusOK},
		{"proceeding again", `{"status": {"execution": "proceeding", "result": {"finished": "none"}}}`, http.StatusOK},
		{"wrong content type", "", http.StatusUnsupportedMediaType},
	} {
		name := tc.name
		var r response
		if name == "wrong content type" {
			req, _ := http.NewRequest(http.MethodPost, h.srv.URL+fb, strings.NewReader(`{}`))
			req.Header.Set("Authorization", tok)
			req.Header.Set("Content-Type", "text/plain")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			r.status = res.StatusCode
		} else {
			r = h.do(http.MethodPost, fb, tok, tc.body)
		}
		if r.status != tc.want {
			t.Errorf("%s: %d %s, want %d", name, r.status, r.body, tc.want)
		}
	}
	// "downloaded" then "proceeding": the task is installing.
	if ts := h.tasks("dev-a"); ts[0]["status"] != "installing" {
		t.Fatalf("proceeding after downloaded: %v, want installing", ts[0]["status"])
	}
}

// The request bodies of hawkBit's DDI documentation, verbatim in shape
// (newer hawkBit adds "timestamp" and "status.code", which are ignored).
func TestHawkBitDocumentedBodies(t *testing.T) {
	h := newHarness(t)
	tok := h.register("dev-doc", "1.0.0")
	h.release("1.1.0", false, false)
	action := actionOf(t, h.poll("dev-doc", tok)["deploymentBase"], "deploymentBase")
	fb := root("dev-doc") + "/deploymentBase/" + strconv.FormatInt(action, 10) + "/feedback"
	r := h.do(http.MethodPost, fb, tok, `{
  "timestamp" : 1682419876312,
  "status" : {
    "execution" : "proceeding",
    "result" : { "finished" : "none", "progress" : { "cnt" : 2, "of" : 5 } },
    "code" : 200,
    "details" : [ "Feedback message" ]
  }
}`)
	if r.status != http.StatusOK {
		t.Fatalf("documented feedback: %d %s", r.status, r.body)
	}
	if ts := h.tasks("dev-doc"); ts[0]["status"] != "downloading" || ts[0]["progress"] != json.Number("40") {
		t.Fatalf("cnt 2 of 5: %v", ts[0])
	}
	r = h.do(http.MethodPut, root("dev-doc")+"/configData", tok, `{
  "mode" : "merge",
  "data" : { "VIN" : "JH4TB2H26CC000000", "hwRevision" : "2" }
}`)
	if r.status != http.StatusOK {
		t.Fatalf("documented configData: %d %s", r.status, r.body)
	}
	if links := h.poll("dev-doc", tok); links["configData"] != "" || links["deploymentBase"] == "" {
		t.Fatalf("after configData: %v", links)
	}
	r = h.do(http.MethodPost, fb, tok, `{"timestamp": 1682419876313, "status": {"execution": "closed", "result": {"finished": "success"}, "code": 200, "details": ["done"]}}`)
	if r.status != http.StatusOK {
		t.Fatalf("documented closed feedback: %d %s", r.status, r.body)
	}
	if ts := h.tasks("dev-doc"); ts[0]["status"] != "succeeded" {
		t.Fatalf("after closed success: %v", ts[0])
	}
}

// TestDDILinksIgnoreTheHostHeader: the _links hrefs start with the
// configured public URL whatever Host the request names — a forged Host
// must not send the agent (and its token) elsewhere.
func TestDDILinksIgnoreTheHostHeader(t *testing.T) {
	h := newHarness(t)
	tok := h.register("dev-1", "1.0.0")
	h.release("1.1.0", false, false)
	req, err := http.NewRequest(http.MethodGet, h.srv.URL+root("dev-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "attacker.example"
	req.Header.Set("Authorization", tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m struct {
		Links map[string]struct{ Href string } `json:"_links"`
	}
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("poll: %d %v", res.StatusCode, err)
	}
	if len(m.Links) == 0 {
		t.Fatal("poll answered no links")
	}
	for name, l := range m.Links {
		if !strings.HasPrefix(l.Href, h.srv.URL+root("dev-1")+"/") {
			t.Errorf("%s href %q does not start with the public URL %s", name, l.Href, h.srv.URL)
		}
	}
}

// A rollout that paused itself takes back a device's deployment it has not
// begun (check rule 5, ROLLOUT_PAUSED): the device is sent a cancelAction.
func TestSelfPausedRolloutCancelsPendingAction(t *testing.T) {
	h := newHarness(t)
	tokA, tokB := h.register("dev-a", "1.0.0"), h.register("dev-b", "1.0.0")
	fw := h.admin(http.MethodPost, "/firmwares", map[string]any{
		"model": model, "version": "2.0.0", "url": "http://files.example/images/cam-2.0.0.swu",
		"size_bytes": 123456, "sha256": strings.Repeat("a", 64), "sha1": strings.Repeat("b", 40),
	}, http.StatusCreated)["id"]
	h.admin(http.MethodPost, "/rollouts", map[string]any{"firmware_id": fw, "percentage": 100,
		"failure_threshold_percent": 50, "min_sample": 1}, http.StatusCreated)
	a := actionOf(t, h.poll("dev-a", tokA)["deploymentBase"], "deploymentBase")
	b := actionOf(t, h.poll("dev-b", tokB)["deploymentBase"], "deploymentBase")
	r := h.do(http.MethodPost, root("dev-a")+"/deploymentBase/"+strconv.FormatInt(a, 10)+"/feedback", tokA,
		feedback(a, "closed", "failure", 0, 1, "ERROR : Image invalid or corrupted. Not installing ..."))
	if r.status != http.StatusOK {
		t.Fatalf("failure feedback: %d %s", r.status, r.body)
	}
	links := h.poll("dev-b", tokB)
	if links["deploymentBase"] != "" || actionOf(t, links["cancelAction"], "cancelAction") != b {
		t.Fatalf("after the rollout paused itself: %v, want the cancel of action %d", links, b)
	}
	if ts := h.tasks("dev-b"); ts[0]["status"] != "cancelled" || ts[0]["error_code"] != "ROLLOUT_PAUSED" {
		t.Fatalf("task %v", ts[0])
	}
}

// TestPathParametersAreDecodedOnce: the edge routes on the escaped path,
// so the controller id is percent-decoded once, here as in the REST API
// ("dev%2D1" is dev-1), and never twice ("dev%252D1" is not).
func TestPathParametersAreDecodedOnce(t *testing.T) {
	h := newHarness(t)
	auth := h.register("dev-1", "1.0.0")
	h.poll("dev%2D1", auth)
	if r := h.do(http.MethodGet, root("dev%252D1"), auth, nil); r.status == http.StatusOK {
		t.Fatalf("dev%%252D1 (decoded twice would be dev-1) answered 200: %s", r.body)
	}
}
