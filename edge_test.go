package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"

	"github.com/ai-device/ota/adapters/mender"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/bootstrap"
	"github.com/ai-device/ota/tests/testenv"
)

// Tests of the whole HTTP edge as otad assembles it (every adapter
// mounted), on each store.

const edgeAdminToken = "edge-test-admin-token-0123456789"

// edgeApp is otad's handler on one store.
type edgeApp struct {
	name string
	h    http.Handler
}

// edgeApps assembles otad on the memory store and, when there is one, on
// Postgres and Redis (OTA_TEST_DATABASE_URL, OTA_TEST_REDIS_URL).
func edgeApps(t *testing.T) []edgeApp {
	t.Helper()
	apps := []edgeApp{memoryEdge(t)}
	if os.Getenv("OTA_TEST_DATABASE_URL") == "" || os.Getenv("OTA_TEST_REDIS_URL") == "" {
		t.Log("no OTA_TEST_DATABASE_URL and OTA_TEST_REDIS_URL: the memory store only")
		return apps
	}
	db, dbURL := testenv.PostgresDB(t)
	env := edgeEnv()
	env["OTA_STORE"], env["OTA_DATABASE_URL"], env["OTA_REDIS_URL"] = "postgres", dbURL, os.Getenv("OTA_TEST_REDIS_URL")
	cfg, err := bootstrap.LoadConfig(func(k string) string { return env[k] }, true)
	if err != nil {
		t.Fatal(err)
	}
	pg, cleanup, err := initPostgresApp(cfg, db, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return append(apps, edgeApp{"postgres", pg.Handler()})
}

func edgeEnv() map[string]string {
	return map[string]string{"OTA_STORE": "memory", "OTA_ADMIN_TOKEN": edgeAdminToken, "OTA_MENDER_ACCEPT_PENDING": "true"}
}

// memoryEdge assembles otad on the memory store.
func memoryEdge(t *testing.T) edgeApp { t.Helper(); return memoryEdgeWith(t, edgeEnv()) }

// memoryEdgeWith assembles otad on the memory store configured by env.
func memoryEdgeWith(t *testing.T, env map[string]string) edgeApp {
	t.Helper()
	cfg, err := bootstrap.LoadConfig(func(k string) string { return env[k] }, true)
	if err != nil {
		t.Fatal(err)
	}
	mem, cleanup, err := initMemoryApp(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return edgeApp{"memory", mem.Handler()}
}

// edgeAnswer is one answer of the edge.
type edgeAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (a edgeAnswer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v: %s", a.status, err, a.body)
	}
	return m
}

// errorCode is the code of an error answer ("" for any other).
func (a edgeAnswer) errorCode() string {
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Code
}

func (a edgeAnswer) errorMessage() string {
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Message
}

// call sends one request to h; body, when not nil, is sent as JSON.
func call(t *testing.T, h http.Handler, method, path, token string, body []byte) edgeAnswer {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return edgeAnswer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A caller may send any token as a method; the request metric names the
// nine methods of HTTP and counts every other under one label, so made-up
// methods cannot grow /metrics without limit.
func TestMadeUpMethodsDoNotGrowTheRequestMetric(t *testing.T) {
	app := memoryEdge(t) // the metric is the edge's, whatever the store
	for i := range 50 {
		method := fmt.Sprintf("X%dRANDOM%s", i, strings.ToUpper(uuid.NewString()[:6]))
		for _, path := range []string{"/api/v1/admin/devices", "/healthz", "/no/such/route"} {
			if a := call(t, app.h, method, path, edgeAdminToken, nil); a.status < 400 {
				t.Fatalf("%s %s: %d", method, path, a.status)
			}
		}
	}
	call(t, app.h, http.MethodGet, "/healthz", "", nil)
	metrics := call(t, app.h, http.MethodGet, "/metrics", "", nil)
	if metrics.status != http.StatusOK {
		t.Fatalf("/metrics: %d", metrics.status)
	}
	methods := map[string]bool{}
	re := regexp.MustCompile(`(?m)^ota_http_request_duration_seconds_count\{[^}]*method="([^"]*)"`)
	for _, m := range re.FindAllStringSubmatch(string(metrics.body), -1) {
		methods[m[1]] = true
	}
	if !methods["other"] || !methods["GET"] {
		t.Fatalf("method labels %v: want GET and other", methods)
	}
	if len(methods) > 9+1 {
		t.Fatalf("%d method labels after 50 made-up methods: %v", len(methods), methods)
	}
	for m := range methods {
		if strings.Contains(m, "RANDOM") {
			t.Fatalf("a made-up method is a label: %q", m)
		}
	}
}

// Every answer carries X-Content-Type-Options: nosniff (a JSON body, errors
// included, is never sniffed into HTML) and Cache-Control: no-store — above
// all those that carry a token: a device's registration, its token
// rotation and Mender's auth answer.
func TestAnswersAreNotSniffedAndTokensAreNotStored(t *testing.T) {
	for _, app := range edgeApps(t) {
		t.Run(app.name, func(t *testing.T) {
			h := app.h
			dev := "hdr-" + uuid.NewString()[:8]
			answers := map[string]edgeAnswer{}
			answers["register"] = call(t, h, http.MethodPost, "/api/v1/admin/devices", edgeAdminToken,
				mustJSON(t, map[string]any{"device_id": dev, "model": "cam-x1", "current_version": "1.0.0"}))
			answers["rotate"] = call(t, h, http.MethodPost, "/api/v1/admin/devices/"+dev+"/token", edgeAdminToken, nil)
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			der, err := x509.MarshalPKIXPublicKey(pub)
			if err != nil {
				t.Fatal(err)
			}
			pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
			if a := call(t, h, http.MethodPut, "/api/v1/admin/devices/"+dev+"/public_key", edgeAdminToken,
				mustJSON(t, map[string]any{"public_key": pemKey})); a.status != http.StatusOK {
				t.Fatalf("set key: %d %s", a.status, a.body)
			}
			idData := mustJSON(t, map[string]string{"device_id": dev})
			authBody := mustJSON(t, map[string]string{"id_data": string(idData), "pubkey": pemKey, "tenant_token": ""})
			req := httptest.NewRequest(http.MethodPost, mender.AuthPath, bytes.NewReader(authBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-MEN-Signature", base64.StdEncoding.EncodeToString(ed25519.Sign(priv, authBody)))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			answers["mender auth"] = edgeAnswer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
			for name, want := range map[string]int{"register": http.StatusCreated, "rotate": http.StatusOK, "mender auth": http.StatusOK} {
				if answers[name].status != want || len(answers[name].body) == 0 {
					t.Fatalf("%s: %d %s, want %d with a token", name, answers[name].status, answers[name].body, want)
				}
			}
			answers["validation error"] = call(t, h, http.MethodPost, "/api/v1/admin/devices", edgeAdminToken, []byte(`{"device_id":"a b","model":"m"}`))
			answers["malformed"] = call(t, h, http.MethodPost, "/api/v1/admin/devices", edgeAdminToken, []byte(`{`))
			answers["unauthorized"] = call(t, h, http.MethodGet, "/api/v1/admin/devices/"+dev, "wrong", nil)
			answers["not found"] = call(t, h, http.MethodGet, "/no/such/route", "", nil)
			answers["wrong method"] = call(t, h, http.MethodDelete, "/api/v1/admin/devices", edgeAdminToken, nil)
			answers["device"] = call(t, h, http.MethodGet, "/api/v1/admin/devices/"+dev, edgeAdminToken, nil)
			for name, a := range answers {
				if got := a.header.Get("X-Content-Type-Options"); got != "nosniff" {
					t.Errorf("%s (%d): X-Content-Type-Options %q, want nosniff", name, a.status, got)
				}
				if got := a.header.Get("Cache-Control"); got != "no-store" {
					t.Errorf("%s (%d): Cache-Control %q, want no-store", name, a.status, got)
				}
			}
		})
	}
}

// probe is a body carrying an unknown field, and that field's path.
type probe struct {
	body  any
	field string
}

// unknownFieldProbes are bodies for schema with an unknown field at the
// top level and inside every object property (and every array of objects)
// the schema documents, however deep.
func unknownFieldProbes(schema *openapi3.Schema, prefix string) []probe {
	const unknown = "zz_not_a_field"
	out := []probe{{body: map[string]any{unknown: true}, field: prefix + unknown}}
	for _, name := range slices.Sorted(maps.Keys(schema.Properties)) {
		p := schema.Properties[name].Value
		switch {
		case p.Type.Is("object") && len(p.Properties) > 0:
			for _, in := range unknownFieldProbes(p, prefix+name+".") {
				out = append(out, probe{body: map[string]any{name: in.body}, field: in.field})
			}
		case p.Type.Is("array") && p.Items != nil && p.Items.Value.Type.Is("object") && len(p.Items.Value.Properties) > 0:
			for _, in := range unknownFieldProbes(p.Items.Value, prefix+name+".") {
				out = append(out, probe{body: map[string]any{name: []any{in.body}}, field: in.field})
			}
		}
	}
	return out
}

// edgeState is what the admin API shows of everything stored, to show
// that a refused request wrote nothing.
func edgeState(t *testing.T, h http.Handler) string {
	t.Helper()
	var b strings.Builder
	for _, path := range []string{"/api/v1/admin/devices?limit=500", "/api/v1/admin/firmwares", "/api/v1/admin/rollouts",
		"/api/v1/admin/tasks?limit=500", "/api/v1/admin/devices/pending", "/api/v1/admin/fleet"} {
		a := call(t, h, http.MethodGet, path, edgeAdminToken, nil)
		if a.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, a.status, a.body)
		}
		fmt.Fprintf(&b, "%s %s\n", path, a.body)
	}
	return b.String()
}

// Every operator body the OpenAPI document describes refuses a field it
// does not have — at the top level, in nested objects and in arrays of
// objects — with 400 VALIDATION_FAILED naming the field by its path, and
// writes nothing. A typo in a rollout's policy was silently dropped: the
// rollout then covered the whole model, ran in UTC or used the default
// gate. Device bodies stay lenient: an agent's extra field is ignored.
func TestOperatorBodiesRefuseUnknownFields(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(rest.OpenAPISpec())
	if err != nil {
		t.Fatal(err)
	}
	for _, app := range edgeApps(t) {
		t.Run(app.name, func(t *testing.T) {
			h := app.h
			dev := "strict-" + uuid.NewString()[:8]
			reg := call(t, h, http.MethodPost, "/api/v1/admin/devices", edgeAdminToken,
				mustJSON(t, map[string]any{"device_id": dev, "model": "cam-x1", "current_version": "1.0.0"}))
			if reg.status != http.StatusCreated {
				t.Fatalf("register: %d %s", reg.status, reg.body)
			}
			devToken := reg.json(t)["token"].(string)
			fw := call(t, h, http.MethodPost, "/api/v1/admin/firmwares", edgeAdminToken, mustJSON(t, map[string]any{
				"model": "cam-x1", "version": "1.1.0", "url": "https://files.example/fw.bin", "size_bytes": 10, "sha256": strings.Repeat("a", 64)}))
			if fw.status != http.StatusCreated {
				t.Fatalf("publish: %d %s", fw.status, fw.body)
			}
			fwID := fw.json(t)["id"].(string)
			before := edgeState(t, h)

			probed := 0
			for _, path := range doc.Paths.InMatchingOrder() {
				for method, op := range doc.Paths.Value(path).Operations() {
					if !slices.Contains(op.Tags, "admin") || op.RequestBody == nil {
						continue
					}
					media := op.RequestBody.Value.Content.Get("application/json")
					if media == nil {
						continue
					}
					url := strings.NewReplacer("{device_id}", dev, "{id}", uuid.NewString(), "{task_id}", uuid.NewString()).Replace(path)
					probed++
					for _, p := range unknownFieldProbes(media.Schema.Value, "") {
						a := call(t, h, method, url, edgeAdminToken, mustJSON(t, p.body))
						if a.status != http.StatusBadRequest || a.errorCode() != "VALIDATION_FAILED" ||
							!strings.HasPrefix(a.errorMessage(), p.field+":") {
							t.Errorf("%s %s %s: %d %s, want 400 VALIDATION_FAILED naming %s",
								op.OperationID, method, mustJSON(t, p.body), a.status, a.body, p.field)
						}
					}
				}
			}
			if probed < 10 {
				t.Fatalf("only %d operator operations with a JSON body in the document", probed)
			}

			// Typos an operator makes, in bodies otherwise valid.
			rollout := func(extra map[string]any) []byte {
				m := map[string]any{"firmware_id": fwID, "percentage": 10}
				maps.Copy(m, extra)
				return mustJSON(t, m)
			}
			typos := []struct {
				body  []byte
				field string
			}{
				{rollout(map[string]any{"selector": map[string]any{"tag_all": []string{"lab"}}}), "selector.tag_all"},
				{rollout(map[string]any{"window": map[string]any{"daily": "02:00-04:00", "timezone": "Europe/Paris"}}), "window.timezone"},
				{rollout(map[string]any{"stages": []any{map[string]any{"percentage": 10, "min_finish": 5}}}), "stages.min_finish"},
				{rollout(map[string]any{"Percentage": 20}), "Percentage"},
			}
			for _, c := range typos {
				a := call(t, h, http.MethodPost, "/api/v1/admin/rollouts", edgeAdminToken, c.body)
				if a.status != http.StatusBadRequest || a.errorCode() != "VALIDATION_FAILED" || !strings.HasPrefix(a.errorMessage(), c.field+":") {
					t.Errorf("%s: %d %s, want 400 VALIDATION_FAILED naming %s", c.body, a.status, a.body, c.field)
				}
			}
			if after := edgeState(t, h); after != before {
				t.Fatalf("refused requests changed what is stored:\nbefore %s\nafter  %s", before, after)
			}

			// The same bodies without the typo are accepted.
			if a := call(t, h, http.MethodPost, "/api/v1/admin/rollouts", edgeAdminToken, rollout(map[string]any{
				"selector": map[string]any{"tags_all": []string{"lab"}},
				"window":   map[string]any{"daily": "02:00-04:00", "time_zone": "Europe/Paris"},
			})); a.status != http.StatusCreated {
				t.Fatalf("the rollout without typos: %d %s", a.status, a.body)
			}
			// A device's extra field is ignored.
			if a := call(t, h, http.MethodPost, "/api/v1/devices/"+dev+"/ota/check", devToken, mustJSON(t, map[string]any{
				"model": "cam-x1", "current_version": "1.0.0", "agent_build": "2031.1"})); a.status != http.StatusOK {
				t.Fatalf("a check with an extra field: %d %s", a.status, a.body)
			}
		})
	}
}

// A selector's versions given as "" (or only separators) is refused, not
// read as "every version": an operator narrowing a rollout must not reach
// the whole model by a blank. Absent or null still means no range.
func TestBlankVersionRangeIsRefused(t *testing.T) {
	for _, app := range edgeApps(t) {
		t.Run(app.name, func(t *testing.T) {
			h := app.h
			fw := call(t, h, http.MethodPost, "/api/v1/admin/firmwares", edgeAdminToken, mustJSON(t, map[string]any{
				"model": "cam-x2", "version": "1.1.0", "url": "https://files.example/fw.bin", "size_bytes": 10, "sha256": strings.Repeat("a", 64)}))
			if fw.status != http.StatusCreated {
				t.Fatalf("publish: %d %s", fw.status, fw.body)
			}
			fwID := fw.json(t)["id"].(string)
			before := edgeState(t, h)
			for _, versions := range []string{"", " ", ",", " , "} {
				a := call(t, h, http.MethodPost, "/api/v1/admin/rollouts", edgeAdminToken, mustJSON(t, map[string]any{
					"firmware_id": fwID, "percentage": 10, "selector": map[string]any{"tags_all": []string{"lab"}, "versions": versions}}))
				if a.status != http.StatusBadRequest || a.errorCode() != "VALIDATION_FAILED" || !strings.HasPrefix(a.errorMessage(), "selector.versions:") {
					t.Errorf("versions %q: %d %s, want 400 VALIDATION_FAILED naming selector.versions", versions, a.status, a.body)
				}
			}
			if after := edgeState(t, h); after != before {
				t.Fatalf("refused requests changed what is stored:\nbefore %s\nafter  %s", before, after)
			}
			a := call(t, h, http.MethodPost, "/api/v1/admin/rollouts", edgeAdminToken, mustJSON(t, map[string]any{
				"firmware_id": fwID, "percentage": 10, "selector": map[string]any{"tags_all": []string{"lab"}, "versions": nil}}))
			if a.status != http.StatusCreated {
				t.Fatalf("versions null: %d %s", a.status, a.body)
			}
			if sel := a.json(t)["selector"].(map[string]any); sel["versions"] != nil {
				t.Fatalf("versions null stored as %v", sel["versions"])
			}
		})
	}
}
