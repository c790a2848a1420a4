package console_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/ai-device/ota/adapters/console"
	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// TestConsoleUploadDuringAnOutageSaysWhenToRetry: DOMAIN.md S3 — "An
// account that cannot be read (the database unreachable) ends no session:
// the page answers 503 with Retry-After, as the API does". The pages do
// (Console.failErr), but the upload endpoint answers the same
// SERVICE_BUSY from readSession through writeUploadAnswer, which sends no
// Retry-After: the page's script is told "busy" and not when to retry.
func TestConsoleUploadDuringAnOutageSaysWhenToRetry(t *testing.T) {
	clk := &clock{}
	svc := testenv.NewMemoryService(t, testenv.MemoryOptions{Clock: clk, Artifacts: true})
	inner, err := application.NewAccounts(memory.NewAccounts(svc.Store), clk, svc.Deps.IDs, application.RootToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inner.CreateUser(context.Background(), testActor,
		ports.NewUser{Username: "alice", Role: "admin", Password: userPassword}); err != nil {
		t.Fatal(err)
	}
	accounts := &outageAccounts{AccountService: inner}
	con, err := console.New(console.Config{AdminToken: adminToken, SignInLimiter: local.NewRateLimiter(1e-9, signInBurst)},
		svc.Admin, svc.Fleet, clk, nil, console.WithAccounts(accounts), console.WithArtifacts(svc.Artifacts))
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, rest.NewServer(rest.Config{AdminToken: adminToken}, svc.Devices, svc.Admin, nil, nil, nil, nil,
		rest.WithFleet(svc.Fleet), rest.WithMount(console.Prefix, con)))
	e := &accountsEnv{env: &env{t: t, clock: clk, srv: srv, console: con, admin: svc.Admin, client: newClient(t)}}
	e.mustSignInAs("alice")
	csrf := e.uploadCSRF()

	accounts.down.Store(true)
	if r := e.get("/console/firmwares"); r.code != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("control: a page during the outage: %d, Retry-After %q", r.code, r.header.Get("Retry-After"))
	}
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/console/artifacts?filename=a.bin", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("X-CSRF-Token", csrf)
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("upload during the outage: %d, want 503", res.StatusCode)
	}
	if res.Header.Get("Retry-After") == "" {
		t.Errorf("the upload's 503 during the outage sends no Retry-After (the pages' 503 does)")
	}
}
