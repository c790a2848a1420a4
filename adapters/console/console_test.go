package console_test

import (
	"context"
	"crypto/tls"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/console"
	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

const adminToken = "console-test-admin-token-0123456789"

// clock is the system clock moved forward by whatever the test advanced
// it, shared by the application and the console.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// env is otad's HTTP server over the memory adapters with the console
// mounted, as bootstrap wires it, and a browser-like client (cookies kept,
// redirects not followed so that tests see them).
type env struct {
	t       *testing.T
	clock   *clock
	srv     *httptest.Server
	console *console.Console
	admin   *application.Admin
	devices *application.Devices
	// artifacts is the upload use case the console is given.
	artifacts *application.Artifacts
	client    *http.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clk := &clock{}
	svc := testenv.NewMemoryService(t, testenv.MemoryOptions{Clock: clk, Artifacts: true})
	devices, admin, fleet := svc.Devices, svc.Admin, svc.Fleet
	con, err := console.New(console.Config{AdminToken: adminToken, RefreshEvery: time.Second}, admin, fleet, clk, nil,
		console.WithArtifacts(svc.Artifacts))
	if err != nil {
		t.Fatal(err)
	}
	e := rest.NewServer(rest.Config{AdminToken: adminToken}, devices, admin, nil, nil, nil, nil,
		rest.WithFleet(fleet), rest.WithMount(console.Prefix, con))
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &env{t: t, clock: clk, srv: srv, console: con, admin: admin, devices: devices, artifacts: svc.Artifacts, client: newClient(t)}
}

func newClient(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type resp struct {
	code   int
	body   string
	header http.Header
}

func (e *env) do(c *http.Client, method, path string, form url.Values) resp {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{code: res.StatusCode, body: string(b), header: res.Header}
}

func (e *env) get(path string) resp { e.t.Helper(); return e.do(e.client, http.MethodGet, path, nil) }

func (e *env) post(path string, form url.Values) resp {
	e.t.Helper()
	return e.do(e.client, http.MethodPost, path, form)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the forms on the page at path.
func (e *env) csrf(path string) string {
	e.t.Helper()
	r := e.get(path)
	m := csrfField.FindStringSubmatch(r.body)
	if m == nil {
		e.t.Fatalf("no CSRF token on %s (%d): %s", path, r.code, r.body)
	}
	return html.UnescapeString(m[1])
}

func (e *env) signIn(token string) resp {
	e.t.Helper()
	return e.post("/console/sign-in", url.Values{"csrf": {e.csrf("/console/sign-in")}, "token": {token}, "next": {"/console/rollouts"}})
}

func (e *env) mustSignIn() {
	e.t.Helper()
	if r := e.signIn(adminToken); r.code != http.StatusSeeOther || r.header.Get("Location") != "/console/rollouts" {
		e.t.Fatalf("sign in: %d %s", r.code, r.header.Get("Location"))
	}
}

func (e *env) publish(model, version string) domain.Firmware {
	e.t.Helper()
	fw, err := e.admin.PublishFirmware(context.Background(), testActor, domain.FirmwareSpec{
		Model: model, Version: version, URL: "https://files.example/" + version, SizeBytes: 4096,
		SHA256: strings.Repeat("ab", 32),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return fw
}

func (e *env) startRollout(fw domain.Firmware, pct int, threshold *int) domain.Rollout {
	e.t.Helper()
	one := 1
	spec := domain.RolloutSpec{Percentage: pct, FailureThresholdPercent: threshold}
	if threshold != nil {
		spec.MinSample = &one
	}
	r, err := e.admin.StartRollout(context.Background(), testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: spec})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// check polls as the device id, authenticated as the edge would hand it over.
func (e *env) check(ctx context.Context, id, model, version string) (ports.CheckResult, error) {
	ident, err := e.devices.IdentifyDevice(ctx, asDeviceID(id))
	if err != nil {
		return ports.CheckResult{}, err
	}
	return e.devices.Check(ctx, ports.CheckRequest{Device: ident, Model: model, CurrentVersion: version})
}

// deviceWithTask registers a device of model on version and checks it in.
func (e *env) deviceWithTask(id, model, version string) *ports.TaskView {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: id, Model: model, CurrentVersion: version}); err != nil {
		e.t.Fatal(err)
	}
	res, err := e.check(ctx, id, model, version)
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Task
}

func (e *env) fail(deviceID, taskID, code string) {
	e.t.Helper()
	if _, err := e.devices.ReportEvent(context.Background(), asDeviceID(deviceID), asUUID(taskID), ports.EventRequest{
		EventID: "fail-" + taskID, Status: "failed", ErrorCode: code, ErrorMessage: "it broke"}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) rollout(id string) domain.Rollout {
	e.t.Helper()
	v, err := e.admin.GetRollout(context.Background(), asUUID(id))
	if err != nil {
		e.t.Fatal(err)
	}
	return v.Rollout
}

func wantStatus(t *testing.T, what string, r resp, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: status %d, want %d\n%s", what, r.code, code, r.body)
	}
}

func wantBody(t *testing.T, what string, r resp, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(r.body, p) {
			t.Errorf("%s: the page lacks %q\n%s", what, p, r.body)
		}
	}
}

// fieldBlock is the markup of one form field, from its div to the next.
func fieldBlock(body, name string) string {
	re := regexp.MustCompile(`(?s)<div class="field[^"]*">\s*<label for="` + regexp.QuoteMeta(name) + `".*?</div>`)
	return re.FindString(body)
}

func TestSignedOutIsSentToSignIn(t *testing.T) {
	e := newEnv(t)
	fw := e.publish("cam", "1.0.0")
	r := e.startRollout(fw, 10, nil)
	for _, path := range []string{"/console/", "/console/rollouts", "/console/rollouts/rows", "/console/rollouts/" + r.ID().String(),
		"/console/rollouts/" + r.ID().String() + "/confirm?action=pause", "/console/firmwares?model=cam", "/console/devices?id=x"} {
		res := e.get(path)
		wantStatus(t, path, res, http.StatusSeeOther)
		if loc := res.header.Get("Location"); loc != "/console/sign-in?next="+url.QueryEscape(path) {
			t.Errorf("%s redirects to %q", path, loc)
		}
	}
	// A form posted without a session changes nothing, whatever it carries.
	res := e.post("/console/rollouts/"+r.ID().String(), url.Values{"action": {"pause"}, "csrf": {"x"}})
	wantStatus(t, "signed-out pause", res, http.StatusSeeOther)
	if got := e.rollout(r.ID().String()).Status(); got != domain.RolloutActive {
		t.Errorf("signed-out pause changed the rollout to %s", got)
	}
	res = e.post("/console/firmwares/"+fw.ID().String()+"/revoke", url.Values{})
	wantStatus(t, "signed-out revoke", res, http.StatusSeeOther)
	// The sign-in page and the assets need no session.
	wantStatus(t, "sign-in page", e.get("/console/sign-in"), http.StatusOK)
	wantStatus(t, "stylesheet", e.get("/console/static/console.css"), http.StatusOK)
	wantStatus(t, "script", e.get("/console/static/console.js"), http.StatusOK)
}

func TestSignIn(t *testing.T) {
	e := newEnv(t)
	res := e.signIn("not-the-token")
	wantStatus(t, "wrong token", res, http.StatusUnauthorized)
	wantBody(t, "wrong token", res, "That is not the admin token.")
	wantStatus(t, "still signed out", e.get("/console/"), http.StatusSeeOther)

	// The sign-in form's own CSRF token: missing, or not the cookie's.
	res = e.post("/console/sign-in", url.Values{"token": {adminToken}})
	wantStatus(t, "sign-in without its token", res, http.StatusForbidden)
	e.csrf("/console/sign-in") // sets the cookie
	res = e.post("/console/sign-in", url.Values{"token": {adminToken}, "csrf": {"forged"}})
	wantStatus(t, "sign-in with a forged token", res, http.StatusForbidden)
	wantStatus(t, "still signed out", e.get("/console/"), http.StatusSeeOther)

	res = e.signIn(adminToken)
	wantStatus(t, "right token", res, http.StatusSeeOther)
	if loc := res.header.Get("Location"); loc != "/console/rollouts" {
		t.Errorf("signed in, sent to %q, want where the operator was going", loc)
	}
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: res.header}).Cookies() {
		if c.Name == "ota_console" {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatal("no session cookie")
	}
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Secure || cookie.Path != "/console/" {
		t.Errorf("cookie HttpOnly=%v SameSite=%v Secure=%v Path=%q; want HttpOnly, Strict, not Secure over plain HTTP, /console/",
			cookie.HttpOnly, cookie.SameSite, cookie.Secure, cookie.Path)
	}
	if strings.Contains(cookie.Value, adminToken) {
		t.Error("the cookie holds the admin token")
	}
	page := e.get("/console/")
	wantStatus(t, "fleet page", page, http.StatusOK)
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || page.header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("security headers: CSP %q, frame %q", csp, page.header.Get("X-Frame-Options"))
	}

	// An open redirect through next is refused.
	for _, next := range []string{"https://evil.example/", "//evil.example/console/", "/console/..\\x"} {
		fresh := &env{t: t, srv: e.srv, client: newClient(t)}
		res := fresh.post("/console/sign-in", url.Values{"csrf": {fresh.csrf("/console/sign-in")}, "token": {adminToken}, "next": {next}})
		if loc := res.header.Get("Location"); loc != "/console/" {
			t.Errorf("next %q: sent to %q", next, loc)
		}
	}

	// A forged cookie (right shape, wrong signature) is no session.
	forged := newClient(t)
	u, _ := url.Parse(e.srv.URL + "/console/")
	forged.Jar.SetCookies(u, []*http.Cookie{{Name: "ota_console", Value: strings.Replace(cookie.Value, ".", ".A", 1), Path: "/console/"}})
	wantStatus(t, "forged cookie", e.do(forged, http.MethodGet, "/console/", nil), http.StatusSeeOther)
}

func TestSessionCookieIsSecureOverTLS(t *testing.T) {
	e := newEnv(t)
	get := httptest.NewRequest(http.MethodGet, "https://ota.example/console/sign-in", nil)
	get.TLS = &tls.ConnectionState{}
	rec := httptest.NewRecorder()
	e.console.ServeHTTP(rec, get)
	m := csrfField.FindStringSubmatch(rec.Body.String())
	if m == nil {
		t.Fatalf("no sign-in token: %s", rec.Body)
	}
	form := url.Values{"csrf": {m[1]}, "token": {adminToken}}
	post := httptest.NewRequest(http.MethodPost, "https://ota.example/console/sign-in", strings.NewReader(form.Encode()))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.TLS = &tls.ConnectionState{}
	for _, c := range rec.Result().Cookies() {
		if !c.Secure {
			t.Errorf("cookie %s is not Secure over TLS", c.Name)
		}
		post.AddCookie(c)
	}
	rec = httptest.NewRecorder()
	e.console.ServeHTTP(rec, post)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("sign in over TLS: %d %s", rec.Code, rec.Body)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 || !cookies[0].Secure || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie over TLS: %+v", cookies)
	}
}

func TestSessionCookieIsSecureBehindATLSProxy(t *testing.T) {
	e := newEnv(t)
	req := httptest.NewRequest(http.MethodGet, "http://ota.internal/console/sign-in", nil)
	req.Header.Set("X-Forwarded-Proto", "https")
	rec := httptest.NewRecorder()
	e.console.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if !c.Secure {
			t.Errorf("cookie %s is not Secure behind a TLS-terminating proxy", c.Name)
		}
	}
	if len(rec.Result().Cookies()) == 0 {
		t.Error("no cookie set")
	}
}

func TestSessionEndsOnSignOutAndExpiry(t *testing.T) {
	e := newEnv(t)
	e.mustSignIn()
	u, _ := url.Parse(e.srv.URL + "/console/")
	stolen := e.client.Jar.Cookies(u)

	res := e.post("/console/sign-out", url.Values{"csrf": {e.csrf("/console/")}})
	wantStatus(t, "sign out", res, http.StatusSeeOther)
	wantStatus(t, "after sign-out", e.get("/console/"), http.StatusSeeOther)
	// The signed-out cookie, replayed, is refused too.
	replay := newClient(t)
	replay.Jar.SetCookies(u, stolen)
	wantStatus(t, "replayed cookie", e.do(replay, http.MethodGet, "/console/", nil), http.StatusSeeOther)

	e.mustSignIn()
	wantStatus(t, "signed in again", e.get("/console/"), http.StatusOK)
	e.clock.advance(console.DefaultSessionTTL + time.Second)
	wantStatus(t, "expired", e.get("/console/"), http.StatusSeeOther)
}

func TestFormsNeedTheSessionsCSRFToken(t *testing.T) {
	e := newEnv(t)
	fw := e.publish("cam", "1.0.0")
	r := e.startRollout(fw, 10, nil)
	e.mustSignIn()

	other := &env{t: t, srv: e.srv, client: newClient(t)}
	other.mustSignIn()
	foreign := other.csrf("/console/")

	for _, token := range []string{"", "bad", foreign} {
		form := url.Values{"action": {"pause"}}
		if token != "" {
			form.Set("csrf", token)
		}
		res := e.post("/console/rollouts/"+r.ID().String(), form)
		wantStatus(t, "pause with csrf "+token, res, http.StatusForbidden)
		wantBody(t, "csrf refusal", res, "did not come from this console")
		res = e.post("/console/firmwares", url.Values{"csrf": {token}, "model": {"cam"}, "version": {"2.0.0"},
			"url": {"https://x.example/a"}, "size_bytes": {"1"}, "sha256": {strings.Repeat("ab", 32)}})
		wantStatus(t, "publish with csrf "+token, res, http.StatusForbidden)
		res = e.post("/console/firmwares/"+fw.ID().String()+"/revoke", url.Values{"csrf": {token}})
		wantStatus(t, "revoke with csrf "+token, res, http.StatusForbidden)
		res = e.post("/console/sign-out", url.Values{"csrf": {token}})
		wantStatus(t, "sign-out with csrf "+token, res, http.StatusForbidden)
	}
	if e.rollout(r.ID().String()).Status() != domain.RolloutActive {
		t.Error("a refused form paused the rollout")
	}
	list, _ := e.admin.ListFirmwares(context.Background(), "cam")
	if len(list) != 1 || list[0].Revoked() {
		t.Errorf("refused forms published or revoked firmware: %d firmwares", len(list))
	}
	wantStatus(t, "still signed in", e.get("/console/"), http.StatusOK)
}

func TestPublishFirmwareShowsErrorsBesideFields(t *testing.T) {
	e := newEnv(t)
	e.mustSignIn()
	token := e.csrf("/console/firmwares")
	good := url.Values{"csrf": {token}, "model": {"cam-x1"}, "version": {"1.4.0"}, "url": {"https://cdn.example/cam.bin"},
		"size_bytes": {"1048576"}, "sha256": {strings.Repeat("9f", 32)}, "release_notes": {"Fixes <b>things</b>"},
		"mandatory": {"1"}}
	with := func(k, v string) url.Values {
		f := url.Values{}
		for key, vals := range good {
			f[key] = vals
		}
		f.Set(k, v)
		return f
	}
	for _, c := range []struct {
		field, value, message string
		code                  int
	}{
		{"sha256", "ABC", "sha256: must be 64 lowercase hex characters", http.StatusBadRequest},
		{"version", "1.4", "version: must be a semantic version such as 1.2.3", http.StatusBadRequest},
		{"url", "ftp://cdn.example/x", "url: ", http.StatusBadRequest},
		{"size_bytes", "0", "size_bytes: must be greater than 0", http.StatusBadRequest},
		{"size_bytes", "lots", "size_bytes: must be a whole number of bytes", http.StatusBadRequest},
		{"model", "", "model: is required", http.StatusBadRequest},
		{"min_source_version", "2.0.0", "min_source_version: must be lower than version", http.StatusBadRequest},
	} {
		res := e.post("/console/firmwares", with(c.field, c.value))
		wantStatus(t, c.field+"="+c.value, res, c.code)
		block := fieldBlock(res.body, c.field)
		if !strings.Contains(block, `class="error"`) || !strings.Contains(html.UnescapeString(block), c.message) {
			t.Errorf("%s=%q: the field shows no %q beside it:\n%s", c.field, c.value, c.message, block)
		}
		// The rest of the form keeps what was typed, the release fields too.
		if c.field != "url" && !strings.Contains(res.body, `value="https://cdn.example/cam.bin"`) {
			t.Errorf("%s=%q: the url typed was lost", c.field, c.value)
		}
		if !strings.Contains(res.body, `>Fixes &lt;b&gt;things&lt;/b&gt;</textarea>`) ||
			!strings.Contains(res.body, `name="mandatory" value="1" checked`) {
			t.Errorf("%s=%q: the release notes or the mandatory box typed were lost", c.field, c.value)
		}
		if fieldBlock(res.body, "signature") == "" {
			t.Errorf("%s=%q: the form lacks the signature field", c.field, c.value)
		}
	}
	// The words are the API's: the same request there says the same.
	api := httpedge.DescribeError(&domain.ValidationError{Field: "sha256", Reason: "must be 64 lowercase hex characters"})
	if api.Message != "sha256: must be 64 lowercase hex characters" {
		t.Errorf("the API says %q", api.Message)
	}
	list, _ := e.admin.ListFirmwares(context.Background(), "")
	if len(list) != 0 {
		t.Fatalf("invalid forms published %d firmwares", len(list))
	}

	res := e.post("/console/firmwares", good)
	wantStatus(t, "publish", res, http.StatusSeeOther)
	if loc := res.header.Get("Location"); loc != "/console/firmwares?model=cam-x1&done=published" {
		t.Errorf("published, sent to %q", loc)
	}
	page := e.get("/console/firmwares?model=cam-x1&done=published")
	wantBody(t, "firmware list", page, "Firmware published.", "<b>1.4.0</b>", "1.0 MiB")
	if list, _ := e.admin.ListFirmwares(context.Background(), "cam-x1"); len(list) != 1 ||
		list[0].Spec().ReleaseNotes != "Fixes <b>things</b>" || !list[0].Spec().Mandatory {
		t.Errorf("published without its release notes or mandatory flag: %+v", list)
	}

	res = e.post("/console/firmwares", good)
	wantStatus(t, "publish twice", res, http.StatusConflict)
	if block := fieldBlock(res.body, "version"); !strings.Contains(block, "firmware with this model and version is already published") {
		t.Errorf("duplicate: no conflict beside the version:\n%s", block)
	}
}

func TestRevokeFirmwareConfirmsFirst(t *testing.T) {
	e := newEnv(t)
	fw := e.publish("cam", "1.0.0")
	e.mustSignIn()
	page := e.get("/console/firmwares")
	wantBody(t, "list", page, "/console/firmwares/"+fw.ID().String()+"/revoke")

	confirm := e.get("/console/firmwares/" + fw.ID().String() + "/revoke")
	wantStatus(t, "confirm page", confirm, http.StatusOK)
	wantBody(t, "confirm page", confirm, "Revoke cam 1.0.0?", `action="/console/firmwares/`+fw.ID().String()+`/revoke"`, "Revoke firmware")
	if list, _ := e.admin.ListFirmwares(context.Background(), "cam"); list[0].Revoked() {
		t.Fatal("the confirmation page revoked the firmware")
	}
	m := csrfField.FindAllStringSubmatch(confirm.body, -1)
	res := e.post("/console/firmwares/"+fw.ID().String()+"/revoke", url.Values{"csrf": {html.UnescapeString(m[len(m)-1][1])}})
	wantStatus(t, "revoke", res, http.StatusSeeOther)
	if list, _ := e.admin.ListFirmwares(context.Background(), "cam"); !list[0].Revoked() {
		t.Fatal("not revoked")
	}
	wantBody(t, "after revoke", e.get(res.header.Get("Location")), "Firmware revoked", "st-revoked")
	wantStatus(t, "unknown firmware", e.get("/console/firmwares/5d8f0c2e-1111-4a4a-9b9b-000000000000/revoke"), http.StatusNotFound)
}

func TestRolloutsStartListAndSteer(t *testing.T) {
	e := newEnv(t)
	fw := e.publish("cam", "2.0.0")
	e.mustSignIn()
	token := e.csrf("/console/rollouts")

	// A malformed firmware id names no firmware: NOT_FOUND, as the API
	// answers it (the use case reads the id for both).
	res := e.post("/console/rollouts", url.Values{"csrf": {token}, "firmware_id": {"not-a-firmware"}, "percentage": {"10"}})
	wantStatus(t, "malformed firmware id", res, http.StatusNotFound)
	wantBody(t, "malformed firmware id", res, "Resource not found.")
	res = e.post("/console/rollouts", url.Values{"csrf": {token}, "firmware_id": {fw.ID().String()}, "percentage": {"150"}})
	wantStatus(t, "percentage 150", res, http.StatusBadRequest)
	if block := fieldBlock(res.body, "percentage"); !strings.Contains(block, "percentage: must be between 0 and 100") {
		t.Errorf("no range error beside the percentage:\n%s", block)
	}
	res = e.post("/console/rollouts", url.Values{"csrf": {token}, "firmware_id": {fw.ID().String()}, "percentage": {"100"}, "failure_threshold_percent": {"0"}})
	wantStatus(t, "threshold 0", res, http.StatusBadRequest)
	wantBody(t, "threshold 0", res, "failure_threshold_percent: must be between 1 and 100")

	res = e.post("/console/rollouts", url.Values{"csrf": {token}, "firmware_id": {fw.ID().String()}, "percentage": {"100"}})
	wantStatus(t, "start", res, http.StatusSeeOther)
	loc := res.header.Get("Location")
	id := strings.TrimSuffix(strings.TrimPrefix(loc, "/console/rollouts/"), "?done=started")
	if e.rollout(id).Percentage() != 100 {
		t.Fatalf("rollout %s not started at 100%%", id)
	}

	rows := e.get("/console/rollouts/rows")
	wantStatus(t, "rows", rows, http.StatusOK)
	wantBody(t, "rows before a check", rows, `id="rollout-`+id+`"`, `data-status="total">0<`)
	e.deviceWithTask("dev-1", "cam", "1.0.0")
	rows = e.get("/console/rollouts/rows")
	wantBody(t, "rows within the refresh period (shared)", rows, `data-status="total">0<`)
	e.clock.advance(time.Second) // the refresh period
	rows = e.get("/console/rollouts/rows")
	wantBody(t, "rows after a check", rows, `data-status="pending">1<`, `data-status="total">1<`, `class="s-pending"`)
	wantBody(t, "list page", e.get("/console/rollouts"), `data-refresh="/console/rollouts/rows" data-every="1"`, "2.0.0", "100%")

	counts := e.get("/console/rollouts/" + id + "/counts")
	wantStatus(t, "counts fragment", counts, http.StatusOK)
	wantBody(t, "counts fragment", counts, `<svg class="bar"`, `data-status="pending">1<`)
	if strings.Contains(counts.body, "<html") {
		t.Error("the counts fragment is a whole page")
	}
	detail := e.get(loc)
	wantStatus(t, "detail", detail, http.StatusOK)
	wantBody(t, "detail refresh", detail, `data-refresh="/console/rollouts/`+id+`/counts"`)
	wantBody(t, "detail", detail, "Rollout started.", "cam 2.0.0", `id="action-pause"`, `id="action-cancel"`, "No failed tasks.")

	steer := func(action string, extra url.Values, want domain.RolloutStatus, wantPct int) {
		t.Helper()
		q := url.Values{"action": {action}}
		for k, v := range extra {
			q[k] = v
		}
		confirm := e.get("/console/rollouts/" + id + "/confirm?" + q.Encode())
		wantStatus(t, "confirm "+action, confirm, http.StatusOK)
		before := e.rollout(id)
		form := url.Values{"csrf": {e.csrf("/console/rollouts/" + id)}, "action": {action}}
		for k, v := range extra {
			form[k] = v
		}
		if got := e.rollout(id); got.Status() != before.Status() || got.Percentage() != before.Percentage() {
			t.Fatalf("the %s confirmation page changed the rollout", action)
		}
		res := e.post("/console/rollouts/"+id, form)
		wantStatus(t, action, res, http.StatusSeeOther)
		got := e.rollout(id)
		if got.Status() != want || got.Percentage() != wantPct {
			t.Errorf("after %s: %s at %d%%, want %s at %d%%", action, got.Status(), got.Percentage(), want, wantPct)
		}
	}
	steer("pause", nil, domain.RolloutPaused, 100)
	wantBody(t, "paused", e.get("/console/rollouts/"+id+"?done=pause"), "Rollout paused.", "paused (manual)", `id="action-resume"`)
	steer("resume", nil, domain.RolloutActive, 100)
	steer("percent", url.Values{"percentage": {"40"}}, domain.RolloutActive, 40)
	confirm := e.get("/console/rollouts/" + id + "/confirm?action=percent&percentage=75")
	wantBody(t, "widen confirmation", confirm, "from 40% to 75%")
	steer("cancel", nil, domain.RolloutCancelled, 40)

	// The domain refuses changing a cancelled rollout; the page says so.
	res = e.post("/console/rollouts/"+id, url.Values{"csrf": {e.csrf("/console/rollouts")}, "action": {"resume"}})
	wantStatus(t, "resume cancelled", res, http.StatusConflict)
	wantBody(t, "resume cancelled", res, `class="error"`, "A cancelled rollout cannot be changed.")
	wantStatus(t, "bad action", e.post("/console/rollouts/"+id, url.Values{"csrf": {e.csrf("/console/rollouts")}, "action": {"explode"}}), http.StatusBadRequest)
	wantStatus(t, "unknown rollout", e.get("/console/rollouts/5d8f0c2e-1111-4a4a-9b9b-000000000000"), http.StatusNotFound)
}

func TestAutoPausedRolloutStandsOutAndShowsFailures(t *testing.T) {
	e := newEnv(t)
	fw := e.publish("cam", "3.0.0")
	threshold := 50
	r := e.startRollout(fw, 100, &threshold)
	other := e.startRollout(e.publish("cam", "2.5.0"), 0, nil)
	task := e.deviceWithTask("dev-1", "cam", "1.0.0")
	e.fail("dev-1", task.Task.ID().String(), "E_FLASH_WRITE")
	if got := e.rollout(r.ID().String()); got.PausedReason() != domain.PausedAuto {
		t.Fatalf("rollout is %s (%s), want auto-paused", got.Status(), got.PausedReason())
	}
	e.mustSignIn()
	rows := e.get("/console/rollouts/rows").body
	row := regexp.MustCompile(`(?s)<tr id="rollout-` + r.ID().String() + `" class="([^"]*)">.*?</tr>`).FindStringSubmatch(rows)
	if row == nil || row[1] != "auto-paused" || !strings.Contains(row[0], `badge alarm`) || !strings.Contains(row[0], "paused (auto)") {
		t.Errorf("auto-paused row does not stand out: %v", row)
	}
	if strings.Contains(regexp.MustCompile(`(?s)<tr id="rollout-`+other.ID().String()+`"[^>]*>`).FindString(rows), "auto-paused") {
		t.Error("an active rollout is marked auto-paused")
	}
	detail := e.get("/console/rollouts/" + r.ID().String())
	wantBody(t, "detail", detail, "This rollout paused itself", "E_FLASH_WRITE", "it broke", "dev-1", "100.0%", "of 1 finished", "50%")
}

func TestDeviceLookup(t *testing.T) {
	e := newEnv(t)
	fw := e.publish("cam", "2.0.0")
	e.startRollout(fw, 100, nil)
	first := e.deviceWithTask("dev-7", "cam", "1.0.0")
	e.fail("dev-7", first.Task.ID().String(), "E_DISK")
	e.clock.advance(time.Minute)
	second, err := e.check(context.Background(), "dev-7", "cam", "1.0.0")
	if err != nil || second.Task == nil {
		t.Fatalf("retry: %v", err)
	}
	e.mustSignIn()
	page := e.get("/console/devices?id=dev-7")
	wantStatus(t, "device", page, http.StatusOK)
	wantBody(t, "device", page, "dev-7", "cam", "1.0.0", "just now", "E_DISK", "pending", "attempt 2")
	_, history, _ := strings.Cut(page.body, "Task history")
	if i, j := strings.Index(history, "st-pending"), strings.Index(history, "E_DISK"); i < 0 || j < 0 || i > j {
		t.Errorf("history is not newest first:\n%s", history)
	}
	res := e.get("/console/devices?id=ghost")
	wantStatus(t, "unknown device", res, http.StatusNotFound)
	wantBody(t, "unknown device", res, `No device has the id &#34;ghost&#34;.`)
	// An id that breaks the device id rule is parsed at the form and
	// names no device: the same answer, without asking the service.
	res = e.get("/console/devices?id=bad%2Fid")
	wantStatus(t, "malformed device id", res, http.StatusNotFound)
	wantBody(t, "malformed device id", res, `No device has the id &#34;bad/id&#34;.`)
	wantStatus(t, "empty lookup", e.get("/console/devices"), http.StatusOK)
}

func TestFleetPage(t *testing.T) {
	e := newEnv(t)
	e.publish("cam", "1.0.0")
	fw := e.publish("cam", "2.0.0")
	e.startRollout(fw, 0, nil)
	ctx := context.Background()
	for i, v := range []string{"2.0.0", "2.0.0", "2.0.0", "1.0.0"} {
		id := "dev-" + string(rune('a'+i))
		if _, err := e.admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: id, Model: "cam"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.check(ctx, id, "cam", v); err != nil {
			t.Fatal(err)
		}
	}
	e.mustSignIn()
	page := e.get("/console/")
	wantStatus(t, "fleet", page, http.StatusOK)
	wantBody(t, "fleet", page, `id="model-cam"`, `<dd class="share">75%</dd>`, "On newest (2.0.0)", `<svg class="chart"`,
		`<g class="row newest">`, "2.0.0: 3 devices", "1.0.0: 1 devices")
	// Bars are drawn to scale: 3 devices get the full width, 1 a third.
	if !strings.Contains(page.body, `width="360.00"`) || !strings.Contains(page.body, `width="120.00"`) {
		t.Errorf("bars not to scale:\n%s", page.body)
	}
}

func TestConsoleErrorsAreHTML(t *testing.T) {
	e := newEnv(t)
	e.mustSignIn()
	res := e.get("/console/nowhere")
	wantStatus(t, "unknown page", res, http.StatusNotFound)
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("404 is %s", ct)
	}
	wantBody(t, "unknown page", res, "There is no such page", res.header.Get("X-Request-ID"))
	res = e.do(e.client, http.MethodPut, "/console/rollouts", nil)
	wantStatus(t, "PUT", res, http.StatusMethodNotAllowed)
	if res.header.Get("Allow") != "GET, HEAD, POST" || !strings.HasPrefix(res.header.Get("Content-Type"), "text/html") {
		t.Errorf("405: Allow %q, %s", res.header.Get("Allow"), res.header.Get("Content-Type"))
	}
	res = e.get("/console")
	wantStatus(t, "no slash", res, http.StatusMovedPermanently)
	// The API beside it still answers JSON.
	res = e.get("/api/v1/admin/fleet")
	wantStatus(t, "API without a bearer", res, http.StatusUnauthorized)
	wantBody(t, "API error", res, `"code":"UNAUTHORIZED"`)
	big := url.Values{"csrf": {e.csrf("/console/firmwares")}, "release_notes": {strings.Repeat("x", 70<<10)}}
	wantStatus(t, "oversized form", e.post("/console/firmwares", big), http.StatusRequestEntityTooLarge)
}
