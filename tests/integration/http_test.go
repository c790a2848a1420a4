package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/bootstrap"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

const adminToken = "integration-admin-token-0123456789"

// stack is the whole service in-process on real Postgres and Redis.
type stack struct {
	t   *testing.T
	db  *sqlx.DB
	srv *httptest.Server
}

func newStack(t *testing.T) *stack {
	t.Helper()
	db, _ := testenv.PostgresDB(t)
	metrics := bootstrap.NewMetrics()
	repos, err := postgres.NewRepositories(db)
	if err != nil {
		t.Fatal(err)
	}
	deps := application.Deps{
		Devices: repos.Devices, Firmwares: repos.Firmwares,
		Rollouts: repos.Rollouts, Tasks: repos.Tasks, Attributes: repos.Attributes, Directory: repos.Directory,
		Locker: redisLocker(t, "ota:test:"+uuid.NewString(), metrics), Clock: local.NewClock(), IDs: local.NewUUIDs(),
		Metrics: metrics, Limiter: ports.Unlimited{},
	}
	devices, admin := testenv.UseCases(t, deps, time.Hour)
	accounts, err := application.NewAccounts(postgres.NewAccountRepository(db), deps.Clock, deps.IDs, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	audit, err := application.NewAudit(postgres.NewAuditLog(db))
	if err != nil {
		t.Fatal(err)
	}
	e := rest.NewServer(rest.Config{AdminToken: adminToken}, devices, admin,
		[]ports.HealthCheck{postgres.NewHealthCheck(db)}, metrics, metrics.Handler(), slog.New(slog.DiscardHandler), rest.WithAccounts(accounts),
		rest.WithAudit(audit))
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &stack{t: t, db: db, srv: srv}
}

type call struct {
	method, path, token, contentType string
	body                             []byte
}

func (s *stack) do(c call) (int, map[string]any, http.Header) {
	s.t.Helper()
	req, err := http.NewRequest(c.method, s.srv.URL+c.path, bytes.NewReader(c.body))
	if err != nil {
		s.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	} else if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &out); err != nil {
			s.t.Fatalf("%s %s: body %q is not JSON: %v", c.method, c.path, raw, err)
		}
	}
	return resp.StatusCode, out, resp.Header
}

func (s *stack) ok(c call, want int) map[string]any {
	s.t.Helper()
	code, body, _ := s.do(c)
	if code != want {
		s.t.Fatalf("%s %s: %d %v, want %d", c.method, c.path, code, body, want)
	}
	return body
}

func js(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// digest fingerprints every row of every table, to show a refused request
// wrote nothing.
func (s *stack) digest() string {
	s.t.Helper()
	var parts []string
	for _, table := range []string{"devices", "firmwares", "rollouts", "tasks", "task_events", "audit_log", "outbox_events"} {
		var d string
		if err := s.db.QueryRow(`SELECT coalesce(md5(string_agg(x::text, '|' ORDER BY x::text)), 'empty') FROM ` + table + ` x`).Scan(&d); err != nil {
			s.t.Fatal(err)
		}
		parts = append(parts, table+"="+d)
	}
	return strings.Join(parts, " ")
}

type fixture struct {
	devA, devB, tokA, tokB, fwID, rolloutID, taskA string
}

func (s *stack) seed() fixture {
	s.t.Helper()
	var f fixture
	f.devA, f.devB = "dev-a-"+uuid.NewString()[:8], "dev-b-"+uuid.NewString()[:8]
	a := s.ok(call{method: "POST", path: "/api/v1/admin/devices", token: adminToken, body: js(map[string]any{"device_id": f.devA, "model": "cam-x1", "current_version": "1.0.0"})}, 201)
	b := s.ok(call{method: "POST", path: "/api/v1/admin/devices", token: adminToken, body: js(map[string]any{"device_id": f.devB, "model": "cam-x1"})}, 201)
	f.tokA, f.tokB = a["token"].(string), b["token"].(string)
	fw := s.ok(call{method: "POST", path: "/api/v1/admin/firmwares", token: adminToken, body: js(map[string]any{
		"model": "cam-x1", "version": "1.1.0+build.1", "url": "https://files.example/fw.bin", "size_bytes": 10, "sha256": strings.Repeat("a", 64)})}, 201)
	f.fwID = fw["id"].(string)
	r := s.ok(call{method: "POST", path: "/api/v1/admin/rollouts", token: adminToken, body: js(map[string]any{"firmware_id": f.fwID, "percentage": 100})}, 201)
	f.rolloutID = r["id"].(string)
	chk := s.ok(call{method: "POST", path: "/api/v1/devices/" + f.devA + "/ota/check", token: f.tokA, body: js(map[string]any{"model": "cam-x1", "current_version": "1.0.0"})}, 200)
	f.taskA = chk["task"].(map[string]any)["id"].(string)
	return f
}

// Every endpoint refuses bad input with the documented code, and nothing
// in the database changes.
func TestBadInputGetsTheDocumentedCodeAndWritesNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	f := s.seed()
	before := s.digest()
	devices, firmwares, rollouts := "/api/v1/admin/devices", "/api/v1/admin/firmwares", "/api/v1/admin/rollouts"
	check := "/api/v1/devices/" + f.devA + "/ota/check"
	events := "/api/v1/devices/" + f.devA + "/ota/tasks/" + f.taskA + "/events"
	fwBody := func(override map[string]any) []byte {
		m := map[string]any{"model": "cam-x1", "version": "2.0.0", "url": "https://f.example/a.bin", "size_bytes": 1, "sha256": strings.Repeat("b", 64)}
		for k, v := range override {
			m[k] = v
		}
		return js(m)
	}
	big := append([]byte(`{"device_id":"x","model":"m","pad":"`), bytes.Repeat([]byte("a"), 70*1024)...)
	big = append(big, []byte(`"}`)...)
	cases := []struct {
		name string
		c    call
		code int
		err  string
	}{
		{"device: malformed JSON", call{method: "POST", path: devices, token: adminToken, body: []byte(`{"device_id":`)}, 400, "MALFORMED_JSON"},
		{"device: wrong type", call{method: "POST", path: devices, token: adminToken, body: []byte(`{"device_id":5,"model":"m"}`)}, 400, "VALIDATION_FAILED"},
		{"device: bad id", call{method: "POST", path: devices, token: adminToken, body: js(map[string]any{"device_id": "a b", "model": "m"})}, 400, "VALIDATION_FAILED"},
		{"device: id too long", call{method: "POST", path: devices, token: adminToken, body: js(map[string]any{"device_id": strings.Repeat("a", 65), "model": "m"})}, 400, "VALIDATION_FAILED"},
		{"device: bad semver", call{method: "POST", path: devices, token: adminToken, body: js(map[string]any{"device_id": "ok-1", "model": "m", "current_version": "1.0"})}, 400, "VALIDATION_FAILED"},
		{"device: missing model", call{method: "POST", path: devices, token: adminToken, body: js(map[string]any{"device_id": "ok-2"})}, 400, "VALIDATION_FAILED"},
		{"device: oversize body", call{method: "POST", path: devices, token: adminToken, body: big}, 413, "PAYLOAD_TOO_LARGE"},
		{"device: wrong content type", call{method: "POST", path: devices, token: adminToken, contentType: "text/plain", body: js(map[string]any{"device_id": "ok-3", "model": "m"})}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"device: no token", call{method: "POST", path: devices, body: js(map[string]any{"device_id": "ok-4", "model": "m"})}, 401, "UNAUTHORIZED"},
		{"device: device token on admin", call{method: "POST", path: devices, token: f.tokA, body: js(map[string]any{"device_id": "ok-5", "model": "m"})}, 401, "UNAUTHORIZED"},
		{"device: exists", call{method: "POST", path: devices, token: adminToken, body: js(map[string]any{"device_id": f.devA, "model": "m"})}, 409, "DEVICE_EXISTS"},
		{"firmware: uppercase sha256", call{method: "POST", path: firmwares, token: adminToken, body: fwBody(map[string]any{"sha256": strings.Repeat("B", 64)})}, 400, "VALIDATION_FAILED"},
		{"firmware: size 0", call{method: "POST", path: firmwares, token: adminToken, body: fwBody(map[string]any{"size_bytes": 0})}, 400, "VALIDATION_FAILED"},
		{"firmware: size string", call{method: "POST", path: firmwares, token: adminToken, body: fwBody(map[string]any{"size_bytes": "10"})}, 400, "VALIDATION_FAILED"},
		{"firmware: ftp url", call{method: "POST", path: firmwares, token: adminToken, body: fwBody(map[string]any{"url": "ftp://f.example/a.bin"})}, 400, "VALIDATION_FAILED"},
		{"firmware: bad version", call{method: "POST", path: firmwares, token: adminToken, body: fwBody(map[string]any{"version": "2.0"})}, 400, "VALIDATION_FAILED"},
		{"firmware: NUL in notes", call{method: "POST", path: firmwares, token: adminToken, body: fwBody(map[string]any{"release_notes": "a\x00b"})}, 400, "VALIDATION_FAILED"},
		{"firmware: invalid UTF-8", call{method: "POST", path: firmwares, token: adminToken, body: []byte("{\"model\":\"cam-x1\",\"version\":\"2.0.0\",\"url\":\"https://f.example/a\",\"size_bytes\":1,\"sha256\":\"" + strings.Repeat("b", 64) + "\",\"release_notes\":\"\xff\xfe\"}")}, 400, "VALIDATION_FAILED"},
		{"firmware: same version other build", call{method: "POST", path: firmwares, token: adminToken, body: fwBody(map[string]any{"version": "1.1.0+build.2"})}, 409, "FIRMWARE_EXISTS"},
		{"rollout: percentage 101", call{method: "POST", path: rollouts, token: adminToken, body: js(map[string]any{"firmware_id": f.fwID, "percentage": 101})}, 400, "VALIDATION_FAILED"},
		{"rollout: max_attempts 0", call{method: "POST", path: rollouts, token: adminToken, body: js(map[string]any{"firmware_id": f.fwID, "percentage": 5, "max_attempts": 0})}, 400, "VALIDATION_FAILED"},
		{"rollout: unknown firmware", call{method: "POST", path: rollouts, token: adminToken, body: js(map[string]any{"firmware_id": uuid.NewString(), "percentage": 5})}, 404, "NOT_FOUND"},
		{"rollout: patch bad status", call{method: "PATCH", path: rollouts + "/" + f.rolloutID, token: adminToken, body: js(map[string]any{"status": "done"})}, 400, "VALIDATION_FAILED"},
		{"rollout: patch nothing", call{method: "PATCH", path: rollouts + "/" + f.rolloutID, token: adminToken, body: js(map[string]any{})}, 400, "VALIDATION_FAILED"},
		{"rollout: patch unknown", call{method: "PATCH", path: rollouts + "/" + uuid.NewString(), token: adminToken, body: js(map[string]any{"percentage": 5})}, 404, "NOT_FOUND"},
		{"rollout: get not a uuid", call{method: "GET", path: rollouts + "/not-a-uuid", token: adminToken}, 404, "NOT_FOUND"},
		{"tasks: limit 0", call{method: "GET", path: "/api/v1/admin/tasks?limit=0", token: adminToken}, 400, "VALIDATION_FAILED"},
		{"tasks: limit 501", call{method: "GET", path: "/api/v1/admin/tasks?limit=501", token: adminToken}, 400, "VALIDATION_FAILED"},
		{"tasks: bad cursor", call{method: "GET", path: "/api/v1/admin/tasks?after=garbage", token: adminToken}, 400, "VALIDATION_FAILED"},
		{"tasks: bad status", call{method: "GET", path: "/api/v1/admin/tasks?status=weird", token: adminToken}, 400, "VALIDATION_FAILED"},
		{"token: unknown device", call{method: "POST", path: devices + "/nobody/token", token: adminToken}, 404, "NOT_FOUND"},
		{"check: another device's token", call{method: "POST", path: check, token: f.tokB, body: js(map[string]any{"model": "cam-x1", "current_version": "1.0.0"})}, 403, "FORBIDDEN"},
		{"check: no token", call{method: "POST", path: check, body: js(map[string]any{"model": "cam-x1", "current_version": "1.0.0"})}, 401, "UNAUTHORIZED"},
		{"check: admin token", call{method: "POST", path: check, token: adminToken, body: js(map[string]any{"model": "cam-x1", "current_version": "1.0.0"})}, 401, "UNAUTHORIZED"},
		{"check: unknown device path", call{method: "POST", path: "/api/v1/devices/nobody/ota/check", token: f.tokA, body: js(map[string]any{"model": "cam-x1", "current_version": "1.0.0"})}, 403, "FORBIDDEN"},
		{"check: model mismatch", call{method: "POST", path: check, token: f.tokA, body: js(map[string]any{"model": "cam-x2", "current_version": "1.0.0"})}, 409, "MODEL_MISMATCH"},
		{"check: bad semver", call{method: "POST", path: check, token: f.tokA, body: js(map[string]any{"model": "cam-x1", "current_version": "v1.0.0"})}, 400, "VALIDATION_FAILED"},
		{"check: malformed", call{method: "POST", path: check, token: f.tokA, body: []byte(`[1,2]`)}, 400, "MALFORMED_JSON"},
		{"event: pending status", call{method: "POST", path: events, token: f.tokA, body: js(map[string]any{"event_id": "e1", "status": "pending"})}, 400, "VALIDATION_FAILED"},
		{"event: progress 101", call{method: "POST", path: events, token: f.tokA, body: js(map[string]any{"event_id": "e1", "status": "downloading", "progress": 101})}, 400, "VALIDATION_FAILED"},
		{"event: no event id", call{method: "POST", path: events, token: f.tokA, body: js(map[string]any{"status": "downloading"})}, 400, "VALIDATION_FAILED"},
		{"event: foreign token", call{method: "POST", path: events, token: f.tokB, body: js(map[string]any{"event_id": "e1", "status": "downloading"})}, 403, "FORBIDDEN"},
		{"event: someone else's task", call{method: "POST", path: "/api/v1/devices/" + f.devB + "/ota/tasks/" + f.taskA + "/events", token: f.tokB, body: js(map[string]any{"event_id": "e1", "status": "downloading"})}, 404, "NOT_FOUND"},
		{"event: unknown task", call{method: "POST", path: "/api/v1/devices/" + f.devA + "/ota/tasks/" + uuid.NewString() + "/events", token: f.tokA, body: js(map[string]any{"event_id": "e1", "status": "downloading"})}, 404, "NOT_FOUND"},
		{"task: someone else's", call{method: "GET", path: "/api/v1/devices/" + f.devB + "/ota/tasks/" + f.taskA, token: f.tokB}, 404, "NOT_FOUND"},
		{"unknown route", call{method: "GET", path: "/api/v1/nothing", token: adminToken}, 404, "NOT_FOUND"},
		{"wrong method", call{method: "DELETE", path: devices, token: adminToken}, 405, "METHOD_NOT_ALLOWED"},
	}
	for _, c := range cases {
		code, body, hdr := s.do(c.c)
		errObj, _ := body["error"].(map[string]any)
		if code != c.code || errObj == nil || errObj["code"] != c.err {
			t.Errorf("%s: got %d %v, want %d %s", c.name, code, body, c.code, c.err)
			continue
		}
		if errObj["request_id"] != hdr.Get("X-Request-ID") || hdr.Get("X-Request-ID") == "" {
			t.Errorf("%s: request_id %v, header %q", c.name, errObj["request_id"], hdr.Get("X-Request-ID"))
		}
		if msg, _ := errObj["message"].(string); msg == "" || strings.Contains(strings.ToLower(msg), "sql") || strings.Contains(msg, "pq:") {
			t.Errorf("%s: message %q", c.name, msg)
		}
	}
	if after := s.digest(); after != before {
		t.Fatalf("refused requests changed the database:\nbefore %s\nafter  %s", before, after)
	}
	// The service still works for the same callers.
	s.ok(call{method: "POST", path: events, token: f.tokA, body: js(map[string]any{"event_id": "e1", "status": "downloading", "progress": 5})}, 200)
}

// Rotating a token stops the old one at once.
func TestTokenRotation(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	f := s.seed()
	path := "/api/v1/devices/" + f.devA + "/ota/tasks/" + f.taskA
	s.ok(call{method: "GET", path: path, token: f.tokA}, 200)
	rot := s.ok(call{method: "POST", path: "/api/v1/admin/devices/" + f.devA + "/token", token: adminToken}, 200)
	newTok, _ := rot["token"].(string)
	if newTok == "" || newTok == f.tokA || rot["device_id"] != f.devA {
		t.Fatalf("rotation answer %v", rot)
	}
	if code, _, _ := s.do(call{method: "GET", path: path, token: f.tokA}); code != 401 {
		t.Fatalf("old token still works: %d", code)
	}
	s.ok(call{method: "GET", path: path, token: newTok}, 200)
	var stored []byte
	if err := s.db.QueryRow(`SELECT token_hash FROM devices WHERE device_id = $1`, f.devA).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stored, []byte(newTok)) || len(stored) != 32 {
		t.Fatalf("token must be stored as a 32-byte hash, got %d bytes", len(stored))
	}
}

// /metrics counts checks by outcome, lock waits, task transitions and
// requests by route.
func TestMetricsCountWhatHappened(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	f := s.seed() // one created check
	check := call{method: "POST", path: "/api/v1/devices/" + f.devA + "/ota/check", token: f.tokA, body: js(map[string]any{"model": "cam-x1", "current_version": "1.0.0"})}
	s.ok(check, 200) // reused
	s.ok(call{method: "POST", path: "/api/v1/devices/" + f.devA + "/ota/tasks/" + f.taskA + "/events", token: f.tokA, body: js(map[string]any{"event_id": "x", "status": "failed"})}, 200)
	resp, err := http.Get(s.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	text := string(raw)
	for _, want := range []string{
		`ota_checks_total{outcome="created"} 1`,
		`ota_checks_total{outcome="reused"} 1`,
		`ota_task_transitions_total{status="pending"} 1`,
		`ota_task_transitions_total{status="failed"} 1`,
		`ota_lock_wait_seconds_count 1`,
		`ota_http_request_duration_seconds_count{code="200",method="POST",route="/api/v1/devices/:device_id/ota/check"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, f.tokA) || strings.Contains(text, adminToken) {
		t.Error("a token leaked into /metrics")
	}
}
