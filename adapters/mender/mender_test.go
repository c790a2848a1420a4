package mender_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/mender"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	menderapp "github.com/ai-device/ota/application/mender"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

const (
	adminToken = "admin-token-0123456789"
	model      = "cam-x1"
)

// clock is a ports.Clock the test moves forward.
type clock struct{ offset atomic.Int64 }

var _ ports.Clock = (*clock)(nil)

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func pemOf(t *testing.T, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// keyPair signs as mender-client does.
type keyPair struct {
	name string
	pub  string
	sign func(msg []byte) []byte
}

var (
	keysOnce sync.Once
	rsaKey   *rsa.PrivateKey
)

func newKey(t *testing.T, kind string) keyPair {
	t.Helper()
	switch kind {
	case "rsa":
		keysOnce.Do(func() {
			var err error
			if rsaKey, err = rsa.GenerateKey(rand.Reader, 3072); err != nil {
				panic(err)
			}
		})
		return keyPair{name: kind, pub: pemOf(t, &rsaKey.PublicKey), sign: func(msg []byte) []byte {
			d := sha256.Sum256(msg)
			s, err := rsa.SignPKCS1v15(rand.Reader, rsaKey, crypto.SHA256, d[:])
			if err != nil {
				t.Fatal(err)
			}
			return s
		}}
	case "rsa-other":
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		return keyPair{name: kind, pub: pemOf(t, &k.PublicKey), sign: func(msg []byte) []byte {
			d := sha256.Sum256(msg)
			s, _ := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
			return s
		}}
	case "ecdsa":
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return keyPair{name: kind, pub: pemOf(t, &k.PublicKey), sign: func(msg []byte) []byte {
			d := sha256.Sum256(msg)
			s, err := ecdsa.SignASN1(rand.Reader, k, d[:])
			if err != nil {
				t.Fatal(err)
			}
			return s
		}}
	case "ed25519":
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return keyPair{name: kind, pub: pemOf(t, pub), sign: func(msg []byte) []byte { return ed25519.Sign(priv, msg) }}
	}
	t.Fatalf("unknown key kind %q", kind)
	return keyPair{}
}

// harness is the whole service on memory adapters behind httptest, with
// the Mender routes mounted on the HTTP edge as the binary mounts them.
type harness struct {
	t     *testing.T
	srv   *httptest.Server
	clock *clock
	store *memory.Store
	queue *queueObserver
}

// queueObserver counts the requests dropped on a full pending queue.
type queueObserver struct{ dropped atomic.Int64 }

func (o *queueObserver) AuthQueueFull(domain.DeviceID, int) { o.dropped.Add(1) }

func newHarness(t *testing.T, acceptPending bool, opts ...func(*menderapp.Config)) *harness {
	t.Helper()
	clk := &clock{}
	queue := &queueObserver{}
	cfg := menderapp.Config{IDKey: "device_id", AcceptPending: acceptPending, TokenTTL: 10 * time.Minute,
		Secret: []byte(strings.Repeat("s", 32))}
	for _, o := range opts {
		o(&cfg)
	}
	base := testenv.NewMemoryService(t, testenv.MemoryOptions{Clock: clk, LockWait: 500 * time.Millisecond, PollInterval: time.Minute})
	store, deps, devices, plain := base.Store, base.Deps, base.Devices, base.Admin
	admin, err := application.NewKeyedAdmin(plain, memory.NewAdmissions(store), clk)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := menderapp.New(menderapp.Ports{
		Devices: devices, Repo: deps.Devices, Rollouts: deps.Rollouts, Tasks: deps.Tasks,
		Attributes: memory.NewAttributes(store), Admissions: memory.NewAdmissions(store),
		Requests: memory.NewAuthRequests(store), Catalog: memory.NewArtifactCatalog(store), Logs: memory.NewTaskLogs(store),
		Clock: clk, IDs: deps.IDs, Metrics: deps.Metrics, QueueObserver: queue,
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := mender.New(svc, svc, mender.Links{})
	e := rest.NewServer(rest.Config{AdminToken: adminToken,
		Mounts: []httpedge.Mount{a.Mount}, AdminMounts: []httpedge.Mount{a.MountAdmin}},
		devices, admin, nil, nil, nil, nil)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &harness{t: t, srv: srv, clock: clk, store: store, queue: queue}
}

type response struct {
	status int
	body   []byte
	header http.Header
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

// do sends a request; chunked bodies go without Content-Length, as
// mender-client's requests do.
func (h *harness) do(method, path string, header map[string]string, body string, chunked bool) response {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
		if chunked {
			rd = io.MultiReader(rd) // hides the length: sent chunked
		}
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if chunked && body != "" {
		req.ContentLength = -1
		req.TransferEncoding = []string{"chunked"}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, body: b, header: res.Header}
}

func (h *harness) admin(method, path string, body any, want int) response {
	h.t.Helper()
	s := ""
	if body != nil {
		b, _ := json.Marshal(body)
		s = string(b)
	}
	r := h.do(method, "/api/v1/admin"+path, map[string]string{"Authorization": "Bearer " + adminToken}, s, false)
	if r.status != want {
		h.t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
	}
	return r
}

func (h *harness) register(id string, k keyPair) {
	h.admin(http.MethodPost, "/devices", map[string]any{"device_id": id, "model": model, "public_key": k.pub}, http.StatusCreated)
}

// release publishes version under artifact name and rolls it out to every
// device; it returns the rollout id.
func (h *harness) release(version, artifact string) string {
	fw := map[string]any{
		"model": model, "version": version, "url": "http://files.example/" + artifact + ".mender",
		"size_bytes": 123456, "sha256": strings.Repeat("a", 64),
	}
	if artifact != "" {
		fw["artifact_name"] = artifact
	}
	id := h.admin(http.MethodPost, "/firmwares", fw, http.StatusCreated).json(h.t)["id"]
	return h.admin(http.MethodPost, "/rollouts", map[string]any{"firmware_id": id, "percentage": 100}, http.StatusCreated).json(h.t)["id"].(string)
}

// authBody is the body mender-client 3.4 sends (encoding/json's Encoder,
// so it ends in a newline; the signature covers it).
func authBody(t *testing.T, idData map[string]string, pub string) []byte {
	t.Helper()
	id, _ := json.Marshal(idData)
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(map[string]string{"id_data": string(id), "pubkey": pub, "tenant_token": ""}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// auth sends a signed auth request for device id with key k (signed by
// signer) and returns the answer.
func (h *harness) auth(id string, k, signer keyPair, chunked bool) response {
	h.t.Helper()
	body := authBody(h.t, map[string]string{"device_id": id}, k.pub)
	return h.do(http.MethodPost, mender.AuthPath, map[string]string{
		"Authorization":   "Bearer",
		"X-MEN-Signature": base64.StdEncoding.EncodeToString(signer.sign(body)),
	}, string(body), chunked)
}

func (h *harness) token(id string, k keyPair) string {
	h.t.Helper()
	r := h.auth(id, k, k, true)
	if r.status != http.StatusOK || len(r.body) == 0 {
		h.t.Fatalf("auth of %s: %d %s", id, r.status, r.body)
	}
	return string(r.body)
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func TestAuthVerifiesTheSignatureOfEachKeyType(t *testing.T) {
	h := newHarness(t, false)
	other := newKey(t, "rsa-other")
	for _, kind := range []string{"rsa", "ecdsa", "ed25519"} {
		t.Run(kind, func(t *testing.T) {
			h.t = t
			k := newKey(t, kind)
			id := "dev-" + kind
			h.register(id, k)
			first := h.auth(id, k, k, true)
			if first.status != http.StatusOK || !strings.HasPrefix(first.header.Get("Content-Type"), "application/jwt") {
				t.Fatalf("good signature: %d %s", first.status, first.body)
			}
			second := h.auth(id, k, k, false)
			if second.status != http.StatusOK || bytes.Equal(first.body, second.body) {
				t.Fatalf("every valid request must get a fresh token: %d, same=%v", second.status, bytes.Equal(first.body, second.body))
			}
			// A signature by another key, over the registered public key.
			if r := h.auth(id, k, other, true); r.status != http.StatusUnauthorized {
				t.Fatalf("wrong key: %d %s", r.status, r.body)
			}
			// A signature over other bytes.
			body := authBody(t, map[string]string{"device_id": id}, k.pub)
			sig := base64.StdEncoding.EncodeToString(k.sign(append([]byte{' '}, body...)))
			if r := h.do(http.MethodPost, mender.AuthPath, map[string]string{"X-MEN-Signature": sig}, string(body), true); r.status != http.StatusUnauthorized {
				t.Fatalf("bad signature: %d %s", r.status, r.body)
			}
			// No signature at all.
			if r := h.do(http.MethodPost, mender.AuthPath, nil, string(body), false); r.status != http.StatusUnauthorized {
				t.Fatalf("no signature: %d %s", r.status, r.body)
			}
			// The other key, properly signed, is not this device's key.
			if r := h.auth(id, other, other, true); r.status != http.StatusUnauthorized {
				t.Fatalf("unregistered key: %d %s", r.status, r.body)
			}
			// The token opens the device routes.
			if r := h.do(http.MethodPut, mender.InventoryPath, bearer(string(first.body)), `[{"name":"device_type","value":"cam-x1"}]`, true); r.status != http.StatusOK {
				t.Fatalf("inventory with the token: %d %s", r.status, r.body)
			}
		})
	}
}

func TestAuthRefusesMalformedRequests(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ed25519")
	h.register("dev-1", k)
	for name, body := range map[string]string{
		"not json":     `{"id_data":`,
		"no device id": `{"id_data":"{\"mac\":\"00:11\"}","pubkey":` + jsonString(k.pub) + `}`,
		"bad pubkey":   `{"id_data":"{\"device_id\":\"dev-1\"}","pubkey":"nope"}`,
		"id_data obj":  `{"id_data":"[1]","pubkey":` + jsonString(k.pub) + `}`,
	} {
		sig := base64.StdEncoding.EncodeToString(k.sign([]byte(body)))
		if r := h.do(http.MethodPost, mender.AuthPath, map[string]string{"X-MEN-Signature": sig}, body, true); r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, r.status, r.body)
		}
	}
	// Registration validates the key.
	h.admin(http.MethodPost, "/devices", map[string]any{"device_id": "dev-2", "model": model, "public_key": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"}, http.StatusBadRequest)
	h.admin(http.MethodGet, "/devices/dev-2", nil, http.StatusNotFound)
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestTokensExpireAndAreVerifiedBySignature(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ecdsa")
	h.register("dev-1", k)
	tok := h.token("dev-1", k)
	next := func(tok string) int {
		return h.do(http.MethodGet, mender.NextV1Path+"?artifact_name=factory&device_type="+model, bearer(tok), "", false).status
	}
	if s := next(tok); s != http.StatusNoContent {
		t.Fatalf("fresh token: %d", s)
	}
	parts := strings.Split(tok, ".")
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"dev-1","gen":1,"exp":99999999999}`)) + "." + parts[2]
	for name, bad := range map[string]string{"forged": forged, "garbage": "x.y.z", "empty": ""} {
		if s := next(bad); s != http.StatusUnauthorized {
			t.Errorf("%s token: %d, want 401", name, s)
		}
	}
	h.clock.advance(11 * time.Minute)
	if s := next(tok); s != http.StatusUnauthorized {
		t.Fatalf("expired token: %d, want 401", s)
	}
	if s := next(h.token("dev-1", k)); s != http.StatusNoContent {
		t.Fatalf("token after re-authentication: %d", s)
	}
}

// deployment reads a next-deployment answer.
type deployment struct {
	ID       string `json:"id"`
	Artifact struct {
		ID           string `json:"id"`
		ArtifactName string `json:"artifact_name"`
		Source       struct {
			URI    string `json:"uri"`
			Expire string `json:"expire"`
		} `json:"source"`
		DeviceTypesCompatible []string `json:"device_types_compatible"`
	} `json:"artifact"`
}

func (h *harness) nextAll(tok, artifact string) []response {
	h.t.Helper()
	v2 := `{"device_provides":{"artifact_name":"` + artifact + `","device_type":"` + model + `","rootfs-image.version":"x"},"update_control_map":true}`
	v1 := `{"artifact_name":"` + artifact + `","device_type":"` + model + `"}`
	return []response{
		h.do(http.MethodPost, mender.NextV2Path, bearer(tok), v2, true),
		h.do(http.MethodPost, mender.NextV1Path, bearer(tok), v1, true),
		h.do(http.MethodGet, mender.NextV1Path+"?artifact_name="+artifact+"&device_type="+model, bearer(tok), "", false),
	}
}

func (h *harness) status(tok, id, status string) int {
	h.t.Helper()
	return h.do(http.MethodPut, "/api/devices/v1/deployments/device/deployments/"+id+"/status", bearer(tok), `{"status":"`+status+`"}`, true).status
}

func (h *harness) task(id string) map[string]any {
	h.t.Helper()
	items := h.admin(http.MethodGet, "/tasks?limit=500", nil, http.StatusOK).json(h.t)["items"].([]any)
	for _, it := range items {
		if m := it.(map[string]any); m["id"] == id {
			return m
		}
	}
	h.t.Fatalf("task %s not listed", id)
	return nil
}

func TestPreauthorizedDeviceCompletesAnUpdate(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "rsa")
	h.register("dev-1", k)
	h.release("1.0.0", "release-1")
	h.release("2.0.0", "release-2")
	tok := h.token("dev-1", k)

	inv := `[{"name":"device_type","value":"cam-x1"},{"name":"artifact_name","value":"release-1"},` +
		`{"name":"mender_client_version","value":"3.4.0"},{"name":"ipv4_eth0","value":["10.0.0.2/24","10.0.0.3/24"]},{"name":"n","value":3}]`
	if r := h.do(http.MethodPut, mender.InventoryPath, bearer(tok), inv, true); r.status != http.StatusOK {
		t.Fatalf("inventory PUT: %d %s", r.status, r.body)
	}
	if r := h.do(http.MethodPatch, mender.InventoryPath, bearer(tok), `[{"name":"hostname","value":"cam"}]`, true); r.status != http.StatusOK {
		t.Fatalf("inventory PATCH: %d %s", r.status, r.body)
	}
	attrs, err := memory.NewAttributes(h.store).Get(context.Background(), asDeviceID("dev-1"))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := attrs.Get("ipv4_eth0"); v != "10.0.0.2/24,10.0.0.3/24" {
		t.Errorf("list attribute stored as %q", v)
	}
	if v, _ := attrs.Get("artifact_name"); v != "release-1" {
		t.Errorf("artifact_name stored as %q", v)
	}
	if v, _ := attrs.Get("hostname"); v != "cam" {
		t.Errorf("PATCH did not merge: hostname %q", v)
	}

	var ids []string
	for i, r := range h.nextAll(tok, "release-1") {
		if r.status != http.StatusOK {
			t.Fatalf("next #%d: %d %s", i, r.status, r.body)
		}
		var d deployment
		if err := json.Unmarshal(r.body, &d); err != nil {
			t.Fatal(err)
		}
		if d.Artifact.ArtifactName != "release-2" || d.Artifact.Source.URI != "http://files.example/release-2.mender" ||
			len(d.Artifact.DeviceTypesCompatible) != 1 || d.Artifact.DeviceTypesCompatible[0] != model || d.Artifact.ID == "" {
			t.Fatalf("next #%d: %s", i, r.body)
		}
		if _, err := time.Parse(time.RFC3339, d.Artifact.Source.Expire); err != nil {
			t.Fatalf("expire %q: %v", d.Artifact.Source.Expire, err)
		}
		ids = append(ids, d.ID)
	}
	if ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("every route must hand out the same task: %v", ids)
	}
	id := ids[0]
	for _, s := range []string{"downloading", "downloading", "downloading", "installing", "rebooting", "installing", "success", "success"} {
		if got := h.status(tok, id, s); got != http.StatusNoContent {
			t.Fatalf("status %s: %d", s, got)
		}
	}
	if task := h.task(id); task["status"] != "succeeded" {
		t.Fatalf("task after success: %v", task)
	}
	if got := h.status(tok, id, "failure"); got != http.StatusConflict {
		t.Fatalf("failure after success: %d, want 409", got)
	}
	for i, r := range h.nextAll(tok, "release-2") {
		if r.status != http.StatusNoContent {
			t.Fatalf("next #%d after the update: %d %s", i, r.status, r.body)
		}
	}
}

func TestAlreadyInstalledCompletesTheTask(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ed25519")
	h.register("dev-1", k)
	h.release("2.0.0", "release-2")
	tok := h.token("dev-1", k)
	r := h.nextAll(tok, "something-else")[0]
	var d deployment
	if err := json.Unmarshal(r.body, &d); err != nil || r.status != http.StatusOK {
		t.Fatalf("unknown artifact name must be offered the newest: %d %s", r.status, r.body)
	}
	if got := h.status(tok, d.ID, "already-installed"); got != http.StatusNoContent {
		t.Fatalf("already-installed: %d", got)
	}
	if task := h.task(d.ID); task["status"] != "succeeded" {
		t.Fatalf("task: %v", task)
	}
}

func TestFailureKeepsTheLog(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ed25519")
	h.register("dev-1", k)
	h.release("2.0.0", "release-2")
	tok := h.token("dev-1", k)
	var d deployment
	_ = json.Unmarshal(h.nextAll(tok, "release-1")[0].body, &d)
	for _, s := range []string{"downloading", "installing", "failure"} {
		if got := h.status(tok, d.ID, s); got != http.StatusNoContent {
			t.Fatalf("status %s: %d", s, got)
		}
	}
	log := `{"messages":[{"level":"info","message":"Running ArtifactInstall","timestamp":"2026-12-01T00:00:00Z"},` +
		`{"level":"error","message":"` + strings.Repeat("x", 5000) + `","timestamp":"2026-12-01T00:00:01Z"}]}`
	if r := h.do(http.MethodPut, "/api/devices/v1/deployments/device/deployments/"+d.ID+"/log", bearer(tok), log, true); r.status != http.StatusNoContent {
		t.Fatalf("log: %d %s", r.status, r.body)
	}
	task := h.task(d.ID)
	if task["status"] != "failed" || task["error_code"] != menderapp.CodeFailure {
		t.Fatalf("task: %v", task)
	}
	got := h.admin(http.MethodGet, "/tasks/"+d.ID+"/log", nil, http.StatusOK)
	var l struct {
		Messages []struct{ Level, Message, Timestamp string } `json:"messages"`
	}
	if err := json.Unmarshal(got.body, &l); err != nil || len(l.Messages) != 2 {
		t.Fatalf("log: %v %s", err, got.body)
	}
	if l.Messages[0].Message != "Running ArtifactInstall" || len(l.Messages[1].Message) != 1024 || l.Messages[1].Level != "error" {
		t.Fatalf("log kept as %+v", l.Messages[0])
	}
	// Another device can neither report on nor upload a log for this task.
	k2 := newKey(t, "ed25519")
	h.register("dev-2", k2)
	tok2 := h.token("dev-2", k2)
	if got := h.status(tok2, d.ID, "downloading"); got != http.StatusNotFound {
		t.Fatalf("another device's status: %d, want 404", got)
	}
	h.admin(http.MethodGet, "/tasks/00000000-0000-4000-8000-000000000000/log", nil, http.StatusNotFound)
	// A deployment id that is not a UUID is parsed once, at the edge, into
	// no task: NOT_FOUND, after the body is judged.
	if got := h.status(tok, "not-a-deployment", "downloading"); got != http.StatusNotFound {
		t.Fatalf("malformed deployment id: %d, want 404", got)
	}
	if got := h.status(tok, "not-a-deployment", "flying"); got != http.StatusBadRequest {
		t.Fatalf("bad status on a malformed deployment id: %d, want 400", got)
	}
	if r := h.do(http.MethodPut, "/api/devices/v1/deployments/device/deployments/not-a-deployment/log", bearer(tok), log, true); r.status != http.StatusNotFound {
		t.Fatalf("log of a malformed deployment id: %d, want 404", r.status)
	}
	h.admin(http.MethodGet, "/tasks/not-a-task/log", nil, http.StatusNotFound)
}

func TestCancelledRolloutAborts(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ecdsa")
	h.register("dev-1", k)
	rollout := h.release("2.0.0", "release-2")
	tok := h.token("dev-1", k)
	var d deployment
	_ = json.Unmarshal(h.nextAll(tok, "release-1")[0].body, &d)
	if got := h.status(tok, d.ID, "downloading"); got != http.StatusNoContent {
		t.Fatalf("downloading: %d", got)
	}
	h.admin(http.MethodPatch, "/rollouts/"+rollout, map[string]any{"status": "cancelled"}, http.StatusOK)
	// The repeat of a status already applied is refused too: the device
	// must stop, not replay.
	if got := h.status(tok, d.ID, "downloading"); got != http.StatusConflict {
		t.Fatalf("status after cancel: %d, want 409", got)
	}
	task := h.task(d.ID)
	if task["status"] != "cancelled" || task["error_code"] != "ROLLOUT_CANCELLED" {
		t.Fatalf("task: %v", task)
	}
	if got := h.status(tok, d.ID, "failure"); got != http.StatusConflict {
		t.Fatalf("failure after cancel: %d, want 409", got)
	}
	if r := h.nextAll(tok, "release-1")[0]; r.status != http.StatusNoContent {
		t.Fatalf("next after cancel: %d %s", r.status, r.body)
	}
}

func TestFirmwareWithoutArtifactNameIsNotOffered(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ed25519")
	h.register("dev-1", k)
	h.release("2.0.0", "")
	tok := h.token("dev-1", k)
	// Not offered at all: the device is told there is nothing for it
	// (and would get the best firmware that has a name).
	if r := h.nextAll(tok, "release-1")[0]; r.status != http.StatusNoContent {
		t.Fatalf("next: %d %s, want 204", r.status, r.body)
	}
	// Artifact names are unique per model.
	h.release("3.0.0", "release-3")
	h.admin(http.MethodPost, "/firmwares", map[string]any{"model": model, "version": "3.0.1", "url": "http://f.example/x",
		"size_bytes": 1, "sha256": strings.Repeat("a", 64), "artifact_name": "release-3"}, http.StatusConflict)
}

func TestPendingDevicesWaitForAnOperator(t *testing.T) {
	h := newHarness(t, true)
	k := newKey(t, "ed25519")
	for i := 0; i < 3; i++ {
		if r := h.auth("dev-new", k, k, true); r.status != http.StatusUnauthorized {
			t.Fatalf("unknown device: %d %s", r.status, r.body)
		}
	}
	// A request signed by another key than the one it presents is not recorded.
	if r := h.auth("dev-forged", k, newKey(t, "ecdsa"), true); r.status != http.StatusUnauthorized {
		t.Fatalf("forged: %d", r.status)
	}
	var list struct {
		Items []mender.PendingView `json:"items"`
	}
	_ = json.Unmarshal(h.admin(http.MethodGet, "/devices/pending", nil, http.StatusOK).body, &list)
	if len(list.Items) != 1 || list.Items[0].DeviceID != "dev-new" || list.Items[0].Status != "pending" {
		t.Fatalf("pending: %+v", list.Items)
	}
	id := list.Items[0].ID
	// A request id that is not a UUID is parsed at the edge into none.
	h.admin(http.MethodPost, "/devices/pending/not-a-request/accept", map[string]any{"model": "cam-x1"}, http.StatusNotFound)
	h.admin(http.MethodPost, "/devices/pending/not-a-request/reject", nil, http.StatusNotFound)
	h.admin(http.MethodPost, "/devices/pending/"+id+"/accept", nil, http.StatusBadRequest) // no model known
	acc := h.admin(http.MethodPost, "/devices/pending/"+id+"/accept", map[string]any{"model": model}, http.StatusOK).json(t)
	if acc["device_id"] != "dev-new" || acc["model"] != model {
		t.Fatalf("accepted: %v", acc)
	}
	if r := h.auth("dev-new", k, k, true); r.status != http.StatusOK {
		t.Fatalf("accepted device: %d %s", r.status, r.body)
	}
	h.admin(http.MethodPost, "/devices/pending/"+id+"/accept", map[string]any{"model": model}, http.StatusNotFound)

	// Rejected: stays out, and off the pending list.
	k2 := newKey(t, "ecdsa")
	h.auth("dev-bad", k2, k2, false)
	_ = json.Unmarshal(h.admin(http.MethodGet, "/devices/pending", nil, http.StatusOK).body, &list)
	if len(list.Items) != 1 || list.Items[0].DeviceID != "dev-bad" {
		t.Fatalf("pending: %+v", list.Items)
	}
	h.admin(http.MethodPost, "/devices/pending/"+list.Items[0].ID+"/reject", nil, http.StatusOK)
	if r := h.auth("dev-bad", k2, k2, true); r.status != http.StatusUnauthorized {
		t.Fatalf("rejected device: %d", r.status)
	}
	_ = json.Unmarshal(h.admin(http.MethodGet, "/devices/pending", nil, http.StatusOK).body, &list)
	if len(list.Items) != 0 {
		t.Fatalf("rejected device still pending: %+v", list.Items)
	}
}

func TestPendingOffByDefault(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ed25519")
	h.auth("dev-new", k, k, true)
	var list struct {
		Items []mender.PendingView `json:"items"`
	}
	_ = json.Unmarshal(h.admin(http.MethodGet, "/devices/pending", nil, http.StatusOK).body, &list)
	if len(list.Items) != 0 {
		t.Fatalf("recorded with accepting pending devices off: %+v", list.Items)
	}
}

func TestChunkedBodiesKeepTheLimit(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ed25519")
	h.register("dev-1", k)
	tok := h.token("dev-1", k)
	big := `[{"name":"x","value":"` + strings.Repeat("a", 70<<10) + `"}]`
	for _, chunked := range []bool{true, false} {
		if r := h.do(http.MethodPut, mender.InventoryPath, bearer(tok), big, chunked); r.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("chunked=%v: %d, want 413", chunked, r.status)
		}
	}
	if r := h.do(http.MethodPost, mender.AuthPath, nil, strings.Repeat(" ", 70<<10), true); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("auth: %d, want 413", r.status)
	}
	// The admin API reads chunked bodies too (adapters/rest), within its limit.
	k2 := newKey(t, "ecdsa")
	reg := `{"device_id":"dev-2","model":"cam-x1","public_key":` + jsonString(k2.pub) + `}`
	admin := map[string]string{"Authorization": "Bearer " + adminToken}
	if r := h.do(http.MethodPost, "/api/v1/admin/devices", admin, reg, true); r.status != http.StatusCreated {
		t.Fatalf("chunked registration: %d %s", r.status, r.body)
	}
	if r := h.do(http.MethodPost, "/api/v1/admin/devices", admin, `{"device_id":"dev-3","model":"`+strings.Repeat("m", 70<<10)+`"}`, true); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized chunked registration: %d", r.status)
	}
	if r := h.auth("dev-2", k2, k2, true); r.status != http.StatusOK {
		t.Fatalf("device registered by a chunked request: %d %s", r.status, r.body)
	}
}

// TestAdminRoutesMatchOpenAPI validates the operators' Mender routes
// against adapters/rest/openapi.yaml, which documents them.
func TestAdminRoutesMatchOpenAPI(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(rest.OpenAPISpec())
	if err != nil {
		t.Fatal(err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, true)
	k := newKey(t, "ed25519")
	h.auth("dev-new", k, k, true)
	check := func(method, path, body string, r response) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		hr := httptest.NewRequest(method, "/api/v1/admin"+path, rd)
		if body != "" {
			hr.Header.Set("Content-Type", "application/json")
		}
		route, params, err := router.FindRoute(hr)
		if err != nil {
			t.Fatalf("%s %s is not documented: %v", method, path, err)
		}
		if route.Operation.Extensions["x-served-by"] == nil {
			t.Fatalf("%s %s matched %s, not the mender operation", method, path, route.Operation.OperationID)
		}
		in := &openapi3filter.RequestValidationInput{Request: hr, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: r.status, Header: r.header,
			Body: io.NopCloser(bytes.NewReader(r.body)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("%s %s: %v\n%s", method, path, err, r.body)
		}
	}
	r := h.admin(http.MethodGet, "/devices/pending", nil, http.StatusOK)
	check(http.MethodGet, "/devices/pending", "", r)
	var list struct {
		Items []mender.PendingView `json:"items"`
	}
	_ = json.Unmarshal(r.body, &list)
	id := list.Items[0].ID
	check(http.MethodPost, "/devices/pending/"+id+"/accept", `{"model":"cam-x1"}`,
		h.admin(http.MethodPost, "/devices/pending/"+id+"/accept", map[string]any{"model": model}, http.StatusOK))
	k2 := newKey(t, "ecdsa")
	h.auth("dev-2", k2, k2, true)
	_ = json.Unmarshal(h.admin(http.MethodGet, "/devices/pending", nil, http.StatusOK).body, &list)
	check(http.MethodPost, "/devices/pending/"+list.Items[0].ID+"/reject", "",
		h.admin(http.MethodPost, "/devices/pending/"+list.Items[0].ID+"/reject", nil, http.StatusOK))
	check(http.MethodDelete, "/devices/pending/"+list.Items[0].ID, "",
		h.admin(http.MethodDelete, "/devices/pending/"+list.Items[0].ID, nil, http.StatusNoContent))
	// A request for a registered device is flagged; accepting it needs
	// replace_key.
	k4 := newKey(t, "ed25519")
	h.auth("dev-new", k4, k4, true)
	r = h.admin(http.MethodGet, "/devices/pending", nil, http.StatusOK)
	check(http.MethodGet, "/devices/pending", "", r)
	_ = json.Unmarshal(r.body, &list)
	if len(list.Items) != 1 || list.Items[0].Registered == nil {
		t.Fatalf("flagged request: %+v", list.Items)
	}
	check(http.MethodPost, "/devices/pending/"+list.Items[0].ID+"/accept", `{"replace_key":true}`,
		h.admin(http.MethodPost, "/devices/pending/"+list.Items[0].ID+"/accept", map[string]any{"replace_key": true}, http.StatusOK))
	k = k4

	h.release("2.0.0", "release-2")
	tok := h.token("dev-new", k)
	var d deployment
	_ = json.Unmarshal(h.nextAll(tok, "release-1")[0].body, &d)
	h.status(tok, d.ID, "failure")
	h.do(http.MethodPut, "/api/devices/v1/deployments/device/deployments/"+d.ID+"/log", bearer(tok),
		`{"messages":[{"level":"error","message":"boom","timestamp":"2026-12-01T00:00:00Z"}]}`, true)
	check(http.MethodGet, "/tasks/"+d.ID+"/log", "", h.admin(http.MethodGet, "/tasks/"+d.ID+"/log", nil, http.StatusOK))
	k3 := newKey(t, "ecdsa")
	setKey := `{"public_key":` + jsonString(k3.pub) + `}`
	check(http.MethodPut, "/devices/dev-new/public_key", setKey,
		h.admin(http.MethodPut, "/devices/dev-new/public_key", map[string]any{"public_key": k3.pub}, http.StatusOK))
	check(http.MethodPut, "/devices/dev-new/public_key", setKey,
		h.admin(http.MethodPut, "/devices/dev-new/public_key", map[string]any{"public_key": "x"}, http.StatusBadRequest))
}

func TestOperatorsSetAndRotateADeviceKey(t *testing.T) {
	h := newHarness(t, false)
	k1, k2 := newKey(t, "ed25519"), newKey(t, "ecdsa")
	// Registered without a key (REST devices), then preauthorized.
	h.admin(http.MethodPost, "/devices", map[string]any{"device_id": "dev-1", "model": model}, http.StatusCreated)
	if r := h.auth("dev-1", k1, k1, true); r.status != http.StatusUnauthorized {
		t.Fatalf("device without a key: %d", r.status)
	}
	var v mender.KeyView
	_ = json.Unmarshal(h.admin(http.MethodPut, "/devices/dev-1/public_key", map[string]any{"public_key": k1.pub}, http.StatusOK).body, &v)
	if v.DeviceID != "dev-1" || v.TokenGeneration != 1 || v.KeyFingerprint == "" {
		t.Fatalf("set: %+v", v)
	}
	old := h.token("dev-1", k1)
	_ = json.Unmarshal(h.admin(http.MethodPut, "/devices/dev-1/public_key", map[string]any{"public_key": k2.pub}, http.StatusOK).body, &v)
	if v.TokenGeneration != 2 {
		t.Fatalf("rotated: %+v", v)
	}
	if r := h.auth("dev-1", k1, k1, true); r.status != http.StatusUnauthorized {
		t.Fatalf("the rotated-out key still authenticates: %d", r.status)
	}
	fresh := h.token("dev-1", k2)
	// A token issued before the rotation stops working at once, though it
	// has not expired: the client authenticates again on the 401.
	if r := h.do(http.MethodPut, mender.InventoryPath, bearer(old), `[]`, true); r.status != http.StatusUnauthorized {
		t.Fatalf("unexpired token of the old generation after rotation: %d, want 401", r.status)
	}
	if r := h.do(http.MethodPut, mender.InventoryPath, bearer(fresh), `[]`, true); r.status != http.StatusOK {
		t.Fatalf("token of the new generation: %d", r.status)
	}
	h.admin(http.MethodPut, "/devices/ghost/public_key", map[string]any{"public_key": k1.pub}, http.StatusNotFound)
	// A malformed device id in the path names no device (the key is
	// judged first, as for any unknown device).
	h.admin(http.MethodPut, "/devices/bad%20id/public_key", map[string]any{"public_key": k1.pub}, http.StatusNotFound)
	h.admin(http.MethodPut, "/devices/bad%20id/public_key", map[string]any{"public_key": "nope"}, http.StatusBadRequest)
	h.admin(http.MethodPut, "/devices/dev-1/public_key", map[string]any{"public_key": "nope"}, http.StatusBadRequest)
	h.admin(http.MethodPut, "/devices/dev-1/public_key", map[string]any{}, http.StatusBadRequest)
	// The edge routes on the escaped path: the id is decoded once
	// ("dev%2D1" is dev-1), never twice.
	h.admin(http.MethodPut, "/devices/dev%2D1/public_key", map[string]any{"public_key": k1.pub}, http.StatusOK)
	h.admin(http.MethodPut, "/devices/dev%252D1/public_key", map[string]any{"public_key": k1.pub}, http.StatusNotFound)
}

// TestOperatorBodiesAreJSONWithKnownFieldsOnly: an operator's body
// (setting a key, accepting a request) is refused if it declares another
// media type (415), and whole if it carries a field the route does not
// know (a typo must not pass as a default), before anything is looked up.
func TestOperatorBodiesAreJSONWithKnownFieldsOnly(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ed25519")
	h.admin(http.MethodPost, "/devices", map[string]any{"device_id": "dev-1", "model": model}, http.StatusCreated)
	key := `"public_key":` + jsonString(k.pub)
	accept := "/devices/pending/00000000-0000-4000-8000-000000000001/accept"
	for _, c := range []struct {
		method, path, contentType, body string
		want                            int
	}{
		{http.MethodPut, "/devices/dev-1/public_key", "text/plain", "{" + key + "}", http.StatusUnsupportedMediaType},
		{http.MethodPut, "/devices/dev-1/public_key", "application/json", "{" + key + `,"replace":true}`, http.StatusBadRequest},
		{http.MethodPost, accept, "text/plain", `{"replace_key":true}`, http.StatusUnsupportedMediaType},
		{http.MethodPost, accept, "application/json", `{"replace_kye":true}`, http.StatusBadRequest},
	} {
		r := h.do(c.method, "/api/v1/admin"+c.path, map[string]string{"Authorization": "Bearer " + adminToken,
			"Content-Type": c.contentType}, c.body, false)
		if r.status != c.want {
			t.Errorf("%s %s (%s) %s: %d %s, want %d", c.method, c.path, c.contentType, c.body, r.status, r.body, c.want)
		}
	}
}

// TestAdminRoutesAreDocumented keeps openapi.yaml's x-served-by operations
// and the routes MountAdmin registers in step (the edge's own test skips
// them).
func TestAdminRoutesAreDocumented(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(rest.OpenAPISpec())
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`:([A-Za-z0-9_]+)`)
	served := map[string]bool{}
	mender.New(nil, nil, mender.Links{}).MountAdmin(func(method, path string, _ echo.HandlerFunc, _ ...echo.MiddlewareFunc) {
		served[method+" "+rest.APIPrefix+"/admin"+param.ReplaceAllString(path, "{x}")] = true
	})
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Extensions["x-served-by"] == "adapters/mender" {
				documented[method+" "+regexp.MustCompile(`\{[a-z_]+\}`).ReplaceAllString(path, "{x}")] = true
			}
		}
	}
	for k := range served {
		if !documented[k] {
			t.Errorf("%s is served but not documented with x-served-by", k)
		}
	}
	for k := range documented {
		if !served[k] {
			t.Errorf("%s is documented as served by adapters/mender, which does not serve it", k)
		}
	}
	if len(served) != 6 {
		t.Errorf("%d admin routes", len(served))
	}
}

// TestRotatedKeyRevokesTokensAtTheNextCall: a session token carries its
// admission's generation; once an operator rotates the device's key, the
// device's older tokens are refused (401) at its next call — next,
// status, log, inventory — though they have not expired, and a token got
// with the new key carries on with the same deployment.
func TestRotatedKeyRevokesTokensAtTheNextCall(t *testing.T) {
	h := newHarness(t, false)
	k1, k2 := newKey(t, "ecdsa"), newKey(t, "ed25519")
	h.register("dev-1", k1)
	h.release("1.0.0", "release-1")
	h.release("2.0.0", "release-2")
	old := h.token("dev-1", k1)
	r := h.nextAll(old, "release-1")[0]
	if r.status != http.StatusOK {
		t.Fatalf("next: %d %s", r.status, r.body)
	}
	var d deployment
	if err := json.Unmarshal(r.body, &d); err != nil {
		t.Fatal(err)
	}
	if s := h.status(old, d.ID, "downloading"); s != http.StatusNoContent {
		t.Fatalf("status before rotation: %d", s)
	}

	h.admin(http.MethodPut, "/devices/dev-1/public_key", map[string]any{"public_key": k2.pub}, http.StatusOK)
	for i, r := range h.nextAll(old, "release-1") {
		if r.status != http.StatusUnauthorized {
			t.Errorf("next #%d with a token of the rotated-out generation: %d, want 401", i, r.status)
		}
	}
	if s := h.status(old, d.ID, "installing"); s != http.StatusUnauthorized {
		t.Errorf("status with a token of the rotated-out generation: %d, want 401", s)
	}
	logBody := `{"messages":[{"level":"info","message":"x","timestamp":"2026-01-02T03:04:05Z"}]}`
	if r := h.do(http.MethodPut, "/api/devices/v1/deployments/device/deployments/"+d.ID+"/log", bearer(old), logBody, true); r.status != http.StatusUnauthorized {
		t.Errorf("log with a token of the rotated-out generation: %d, want 401", r.status)
	}
	if r := h.do(http.MethodPut, mender.InventoryPath, bearer(old), `[]`, true); r.status != http.StatusUnauthorized {
		t.Errorf("inventory with a token of the rotated-out generation: %d, want 401", r.status)
	}
	if got := h.task(d.ID)["status"]; got != "downloading" {
		t.Fatalf("a refused status changed the task: %v", got)
	}

	fresh := h.token("dev-1", k2)
	r = h.nextAll(fresh, "release-1")[0]
	var again deployment
	if r.status != http.StatusOK || json.Unmarshal(r.body, &again) != nil || again.ID != d.ID {
		t.Fatalf("next with the new key's token: %d %s, want deployment %s", r.status, r.body, d.ID)
	}
	if s := h.status(fresh, d.ID, "installing"); s != http.StatusNoContent {
		t.Fatalf("status with the new key's token: %d", s)
	}
}

// TestRSAKeysAbove4096BitsAreRefusedEverywhere: preauthorization, a key
// set on a registered device and an auth request all refuse an RSA key of
// more than 4096 bits as VALIDATION_FAILED, before any signature work.
func TestRSAKeysAbove4096BitsAreRefusedEverywhere(t *testing.T) {
	h := newHarness(t, true)
	n := new(big.Int).Lsh(big.NewInt(1), 8191)
	big8192 := pemOf(t, &rsa.PublicKey{N: n.Add(n, big.NewInt(1)), E: 65537})
	wantInvalid := func(what string, r response) {
		t.Helper()
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "VALIDATION_FAILED") {
			t.Fatalf("%s with an 8192-bit key: %d %s, want 400 VALIDATION_FAILED", what, r.status, r.body)
		}
	}
	wantInvalid("preauthorization", h.admin(http.MethodPost, "/devices", map[string]any{"device_id": "dev-1", "model": model, "public_key": big8192}, http.StatusBadRequest))
	h.admin(http.MethodGet, "/devices/dev-1", nil, http.StatusNotFound)
	h.admin(http.MethodPost, "/devices", map[string]any{"device_id": "dev-2", "model": model}, http.StatusCreated)
	wantInvalid("PUT public_key", h.admin(http.MethodPut, "/devices/dev-2/public_key", map[string]any{"public_key": big8192}, http.StatusBadRequest))
	body := authBody(t, map[string]string{"device_id": "dev-3"}, big8192)
	wantInvalid("an auth request", h.do(http.MethodPost, mender.AuthPath, map[string]string{"X-MEN-Signature": "c2ln"}, string(body), true))
	var list struct {
		Items []mender.PendingView `json:"items"`
	}
	_ = json.Unmarshal(h.admin(http.MethodGet, "/devices/pending", nil, http.StatusOK).body, &list)
	if len(list.Items) != 0 {
		t.Fatalf("an 8192-bit key was recorded: %+v", list.Items)
	}
}

// TestRotatingTheDeviceTokenEndsItsMenderSessions: POST
// /admin/devices/{id}/token replaces the device's credentials, so its
// unexpired session tokens are refused at the next call; its key still
// authenticates it again.
func TestRotatingTheDeviceTokenEndsItsMenderSessions(t *testing.T) {
	h := newHarness(t, false)
	k := newKey(t, "ecdsa")
	h.register("dev-1", k)
	old := h.token("dev-1", k)
	if r := h.do(http.MethodPut, mender.InventoryPath, bearer(old), `[]`, true); r.status != http.StatusOK {
		t.Fatalf("inventory before rotation: %d %s", r.status, r.body)
	}
	h.admin(http.MethodPost, "/devices/dev-1/token", nil, http.StatusOK)
	if r := h.do(http.MethodPut, mender.InventoryPath, bearer(old), `[]`, true); r.status != http.StatusUnauthorized {
		t.Fatalf("a session token issued before the token rotation: %d, want 401", r.status)
	}
	fresh := h.token("dev-1", k)
	if r := h.do(http.MethodPut, mender.InventoryPath, bearer(fresh), `[]`, true); r.status != http.StatusOK {
		t.Fatalf("a session got after the rotation: %d %s", r.status, r.body)
	}
	// A device without a key rotates as before.
	h.admin(http.MethodPost, "/devices", map[string]any{"device_id": "dev-2", "model": model}, http.StatusCreated)
	h.admin(http.MethodPost, "/devices/dev-2/token", nil, http.StatusOK)
	h.admin(http.MethodPost, "/devices/ghost/token", nil, http.StatusNotFound)
}

type pendingList struct {
	Items []mender.PendingView `json:"items"`
}

func (h *harness) pending() []mender.PendingView {
	h.t.Helper()
	var l pendingList
	if err := json.Unmarshal(h.admin(http.MethodGet, "/devices/pending", nil, http.StatusOK).body, &l); err != nil {
		h.t.Fatal(err)
	}
	return l.Items
}

func fingerprint(t *testing.T, k keyPair) string {
	t.Helper()
	key, err := domain.ParseDeviceKey("pubkey", k.pub)
	if err != nil {
		t.Fatal(err)
	}
	return key.Fingerprint()
}

// TestAcceptAdmitsExactlyTheKeyShown: between an operator reading the
// pending list and accepting, someone presents another key for the same
// device id. That is another request; accepting the one shown admits its
// key, and the other key stays out.
func TestAcceptAdmitsExactlyTheKeyShown(t *testing.T) {
	h := newHarness(t, true)
	genuine, intruder := newKey(t, "ed25519"), newKey(t, "ecdsa")
	h.auth("dev-1", genuine, genuine, true)
	shown := h.pending()
	if len(shown) != 1 || shown[0].KeyFingerprint != fingerprint(t, genuine) {
		t.Fatalf("pending: %+v", shown)
	}
	h.auth("dev-1", intruder, intruder, true)
	list := h.pending()
	if len(list) != 2 || list[0].ID != shown[0].ID || list[0].KeyFingerprint != fingerprint(t, genuine) ||
		list[1].ID == shown[0].ID || list[1].KeyFingerprint != fingerprint(t, intruder) {
		t.Fatalf("another key must be another request: %+v", list)
	}
	h.admin(http.MethodPost, "/devices/pending/"+shown[0].ID+"/accept", map[string]any{"model": model}, http.StatusOK)
	if r := h.auth("dev-1", intruder, intruder, true); r.status != http.StatusUnauthorized {
		t.Fatalf("the key nobody was shown authenticates: %d", r.status)
	}
	if r := h.auth("dev-1", genuine, genuine, true); r.status != http.StatusOK {
		t.Fatalf("the accepted key: %d %s", r.status, r.body)
	}
}

// TestRequestForARegisteredDeviceIsFlaggedAndNeedsReplaceKey: anyone can
// ask for an admitted device's id with their own key; the request is
// listed with the registered model, the admitted key's fingerprint and a
// device_type mismatch, and accepting it without replace_key changes
// nothing.
func TestRequestForARegisteredDeviceIsFlaggedAndNeedsReplaceKey(t *testing.T) {
	h := newHarness(t, true)
	genuine, other := newKey(t, "ed25519"), newKey(t, "ecdsa")
	h.register("dev-1", genuine)
	body := authBody(t, map[string]string{"device_id": "dev-1", "device_type": "cam-z9"}, other.pub)
	h.do(http.MethodPost, mender.AuthPath, map[string]string{"X-MEN-Signature": base64.StdEncoding.EncodeToString(other.sign(body))}, string(body), true)
	list := h.pending()
	if len(list) != 1 || list[0].Registered == nil || list[0].Registered.Model != model ||
		list[0].Registered.KeyFingerprint != fingerprint(t, genuine) || !list[0].Registered.DeviceTypeMismatch {
		t.Fatalf("the request for a registered device is not flagged: %+v %+v", list, list[0].Registered)
	}
	r := h.admin(http.MethodPost, "/devices/pending/"+list[0].ID+"/accept", nil, http.StatusConflict)
	if !strings.Contains(string(r.body), "INVALID_TRANSITION") || !strings.Contains(string(r.body), "replace_key") {
		t.Fatalf("accept without replace_key: %s", r.body)
	}
	if r := h.auth("dev-1", genuine, genuine, true); r.status != http.StatusOK {
		t.Fatalf("the admitted key after a refused accept: %d", r.status)
	}
	// A registered device keeps its model: an accept naming another is
	// refused, and the key stays as it was.
	r = h.admin(http.MethodPost, "/devices/pending/"+list[0].ID+"/accept", map[string]any{"replace_key": true, "model": "cam-z9"}, http.StatusConflict)
	if !strings.Contains(string(r.body), "MODEL_MISMATCH") {
		t.Fatalf("accept naming another model: %s", r.body)
	}
	if r := h.auth("dev-1", genuine, genuine, true); r.status != http.StatusOK {
		t.Fatalf("the admitted key after an accept naming another model: %d", r.status)
	}
	h.admin(http.MethodPost, "/devices/pending/"+list[0].ID+"/accept", map[string]any{"replace_key": true}, http.StatusOK)
	if r := h.auth("dev-1", other, other, true); r.status != http.StatusOK {
		t.Fatalf("the key accepted with replace_key: %d", r.status)
	}
	// An unregistered device is not flagged.
	k := newKey(t, "ed25519")
	h.auth("dev-2", k, k, true)
	if list := h.pending(); len(list) != 1 || list[0].Registered != nil {
		t.Fatalf("an unregistered device is flagged: %+v", list)
	}
}

// TestRejectedRequestDoesNotReopen: a rejected key asking again stays
// rejected, and another key makes a new request rather than turning the
// rejected one pending again under its id.
func TestRejectedRequestDoesNotReopen(t *testing.T) {
	h := newHarness(t, true)
	k1, k2 := newKey(t, "ed25519"), newKey(t, "ecdsa")
	h.auth("dev-1", k1, k1, true)
	rejected := h.pending()[0].ID
	h.admin(http.MethodPost, "/devices/pending/"+rejected+"/reject", nil, http.StatusOK)
	h.auth("dev-1", k1, k1, true)
	if list := h.pending(); len(list) != 0 {
		t.Fatalf("the rejected key is pending again: %+v", list)
	}
	h.auth("dev-1", k2, k2, true)
	list := h.pending()
	if len(list) != 1 || list[0].ID == rejected || list[0].KeyFingerprint != fingerprint(t, k2) {
		t.Fatalf("another key after a rejection: %+v (rejected %s)", list, rejected)
	}
	h.admin(http.MethodPost, "/devices/pending/"+rejected+"/accept", map[string]any{"model": model}, http.StatusConflict)
	if r := h.auth("dev-1", k2, k2, true); r.status != http.StatusUnauthorized {
		t.Fatalf("accepting the rejected request admitted another key: %d", r.status)
	}
}

// TestPendingQueueCountsPendingOnlyAndExpires: rejected requests do not
// hold the queue full; a dropped request is counted; requests expire, and
// operators delete them.
func TestPendingQueueCountsPendingOnlyAndExpires(t *testing.T) {
	h := newHarness(t, true, func(c *menderapp.Config) { c.MaxPending = 2; c.RequestTTL = time.Hour })
	k := newKey(t, "ed25519")
	h.auth("dev-1", k, k, true)
	h.auth("dev-2", k, k, true)
	h.auth("dev-3", k, k, true)
	if list := h.pending(); len(list) != 2 || h.queue.dropped.Load() != 1 {
		t.Fatalf("over the bound: %d listed, %d dropped", len(list), h.queue.dropped.Load())
	}
	h.admin(http.MethodPost, "/devices/pending/"+h.pending()[0].ID+"/reject", nil, http.StatusOK)
	h.auth("dev-3", k, k, true)
	if list := h.pending(); len(list) != 2 || list[1].DeviceID != "dev-3" {
		t.Fatalf("a rejected request holds the queue full: %+v", list)
	}
	// Delete: pending or rejected, once.
	id := h.pending()[0].ID
	h.admin(http.MethodDelete, "/devices/pending/"+id, nil, http.StatusNoContent)
	h.admin(http.MethodDelete, "/devices/pending/"+id, nil, http.StatusNotFound)
	h.admin(http.MethodDelete, "/devices/pending/not-a-request", nil, http.StatusNotFound)
	if list := h.pending(); len(list) != 1 || list[0].DeviceID != "dev-3" {
		t.Fatalf("after delete: %+v", list)
	}
	// Expiry: pending and rejected requests go; the rejected device asks
	// anew.
	last := h.pending()[0].ID
	h.clock.advance(time.Hour + time.Second)
	h.admin(http.MethodPost, "/devices/pending/"+last+"/accept", map[string]any{"model": model}, http.StatusNotFound)
	if list := h.pending(); len(list) != 0 {
		t.Fatalf("expired requests are listed: %+v", list)
	}
	h.auth("dev-1", k, k, true)
	if list := h.pending(); len(list) != 1 || list[0].DeviceID != "dev-1" || list[0].Status != "pending" {
		t.Fatalf("a device whose rejection expired asking again: %+v", list)
	}
}

// TestAuthRequestsAreLimitedPerSourceAddress: each source address has a
// budget of authentication requests; over it, 429 RATE_LIMITED with
// Retry-After, before any signature is checked.
func TestAuthRequestsAreLimitedPerSourceAddress(t *testing.T) {
	h := newHarness(t, true, func(c *menderapp.Config) { c.AuthLimiter = local.NewRateLimiter(0.001, 3) })
	k := newKey(t, "ed25519")
	h.register("dev-1", k)
	for i := 0; i < 3; i++ {
		if r := h.auth("dev-1", k, k, true); r.status != http.StatusOK {
			t.Fatalf("request %d within the budget: %d", i, r.status)
		}
	}
	r := h.auth("dev-1", k, k, true)
	if r.status != http.StatusTooManyRequests || !strings.Contains(string(r.body), "RATE_LIMITED") || r.header.Get("Retry-After") == "" {
		t.Fatalf("over the budget: %d %s %q", r.status, r.body, r.header.Get("Retry-After"))
	}
}

// A rollout that paused itself withdraws a deployment a device was given
// but has not begun (check rule 5, ROLLOUT_PAUSED): its next poll finds
// nothing to install.
func TestSelfPausedRolloutWithdrawsPendingDeployment(t *testing.T) {
	h := newHarness(t, false)
	k1, k2 := newKey(t, "ed25519"), newKey(t, "ed25519")
	h.register("dev-1", k1)
	h.register("dev-2", k2)
	fw := h.admin(http.MethodPost, "/firmwares", map[string]any{
		"model": model, "version": "2.0.0", "url": "http://files.example/release-2.mender",
		"size_bytes": 123456, "sha256": strings.Repeat("a", 64), "artifact_name": "release-2",
	}, http.StatusCreated).json(t)["id"]
	h.admin(http.MethodPost, "/rollouts", map[string]any{"firmware_id": fw, "percentage": 100,
		"failure_threshold_percent": 50, "min_sample": 1}, http.StatusCreated)
	tok1, tok2 := h.token("dev-1", k1), h.token("dev-2", k2)
	var d1, d2 deployment
	_ = json.Unmarshal(h.nextAll(tok1, "release-1")[0].body, &d1)
	_ = json.Unmarshal(h.nextAll(tok2, "release-1")[0].body, &d2)
	if d1.ID == "" || d2.ID == "" {
		t.Fatalf("deployments %q %q, want one each", d1.ID, d2.ID)
	}
	if got := h.status(tok1, d1.ID, "failure"); got != http.StatusNoContent {
		t.Fatalf("failure: %d", got)
	}
	if r := h.nextAll(tok2, "release-1")[0]; r.status != http.StatusNoContent {
		t.Fatalf("next after the rollout paused itself: %d %s, want 204", r.status, r.body)
	}
	if task := h.task(d2.ID); task["status"] != "cancelled" || task["error_code"] != "ROLLOUT_PAUSED" {
		t.Fatalf("task: %v", task)
	}
}
