package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ai-device/ota/bootstrap"

	// The driver registers itself as "postgres".
	_ "github.com/lib/pq"
)

func deadPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// An unreachable dependency is one clear line that names the variable and
// the way to try the service without it.
func TestServeWithoutPostgresSaysSoInOneLine(t *testing.T) {
	env := map[string]string{
		"OTA_ADMIN_TOKEN":  "0123456789abcdef",
		"OTA_DATABASE_URL": "postgres://postgres@" + deadPort(t) + "/ota?sslmode=disable",
		"OTA_HTTP_ADDR":    "127.0.0.1:0",
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "--create-db"}, func(k string) string { return env[k] }, &stdout, &stderr)
	// Before it, only the "otad starting" log record.
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	out := lines[len(lines)-1]
	if code != 1 || len(lines) != 2 || !strings.Contains(lines[0], `"otad starting"`) ||
		!strings.HasPrefix(out, "otad: ") || !strings.Contains(out, "OTA_DATABASE_URL") || !strings.Contains(out, "OTA_STORE=memory make run") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// A port already taken is said first, naming OTA_HTTP_ADDR, before the
// service connects or migrates: here the database is unreachable too, and
// it is the port that is reported.
func TestServeOnATakenPortSaysSoFirst(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	env := map[string]string{
		"OTA_ADMIN_TOKEN":  "0123456789abcdef",
		"OTA_DATABASE_URL": "postgres://postgres@" + deadPort(t) + "/ota?sslmode=disable",
		"OTA_HTTP_ADDR":    taken.Addr().String(),
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "--create-db"}, func(k string) string { return env[k] }, &stdout, &stderr)
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	out := lines[len(lines)-1]
	if code != 1 || !strings.Contains(out, "address already in use") || !strings.Contains(out, "OTA_HTTP_ADDR") ||
		strings.Contains(stderr.String(), "OTA_DATABASE_URL") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestUsageAndVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	getenv := func(string) string { return "" }
	if code := run(context.Background(), nil, getenv, &stdout, &stderr); code != 2 {
		t.Fatalf("no command: exit %d", code)
	}
	if code := run(context.Background(), []string{"version"}, getenv, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "otad ") {
		t.Fatalf("version: exit %d, %q", code, stdout.String())
	}
	if code := run(context.Background(), []string{"serve"}, getenv, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "OTA_ADMIN_TOKEN") {
		t.Fatalf("serve without a token: exit %d, %q", code, stderr.String())
	}
}

// A command line that cannot be understood exits 2, as docs/CONFIGURATION.md
// says, with the usage on stderr — before any connection is tried (the
// environment here names no database, so a connection would fail with 1).
func TestUsageErrorsExitTwo(t *testing.T) {
	getenv := func(string) string { return "" }
	for _, args := range [][]string{
		{"migrate"}, {"migrate", "sideways"}, {"migrate", "up", "down"}, {"bogus"},
		{"serve", "--bogus"}, {"partitions", "--drop-before", "soon"}, {"partitions", "--drop-before", "2024-01", "--table", "devices"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, getenv, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "usage") {
			t.Errorf("otad %s: exit %d, stderr %q; want 2 with the usage", strings.Join(args, " "), code, stderr.String())
		}
	}
}

// migrate's help says what each subcommand does, not only their names.
func TestMigrateHelpExplainsSubcommands(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"migrate", "--help"}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{"up ", "apply every pending migration", "down ", "roll back", "status ", "applied or pending"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("migrate --help lacks %q:\n%s", w, stdout.String())
		}
	}
}

// Every subcommand answers --help (and -h) with its flags on stdout and exit
// 0: help that was asked for is not an error. A flag it does not know is a
// usage error (exit 2) explained on stderr.
func TestSubcommandHelp(t *testing.T) {
	getenv := func(string) string { return "" }
	for _, tc := range []struct {
		cmd  string
		want []string
	}{
		{"serve", []string{"usage: otad serve", "-no-migrate", "-create-db"}},
		{"migrate", []string{"usage: otad migrate up|down|status"}},
		{"healthcheck", []string{"usage: otad healthcheck", "-url"}},
		{"version", []string{"usage: otad version"}},
	} {
		for _, flag := range []string{"--help", "-h"} {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{tc.cmd, flag}, getenv, &stdout, &stderr)
			if code != 0 || stderr.Len() != 0 {
				t.Errorf("%s %s: exit %d, stderr %q", tc.cmd, flag, code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("%s %s: stdout %q lacks %q", tc.cmd, flag, stdout.String(), w)
				}
			}
		}
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{tc.cmd, "--no-such-flag"}, getenv, &stdout, &stderr); code != 2 ||
			!strings.Contains(stderr.String(), "no-such-flag") || !strings.Contains(stderr.String(), "usage: otad "+tc.cmd) {
			t.Errorf("%s --no-such-flag: exit %d, stderr %q", tc.cmd, code, stderr.String())
		}
	}
}

func TestResolveBuild(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified},
		}}
	}
	for _, tc := range []struct {
		name           string
		stampV, stampC string
		bi             *debug.BuildInfo
		want           buildInfo
	}{
		{"stamped by make", "v1.4.0-3-gabc1234-dirty", "abc1234def56", vcs("ffffffffffffffff", "false"), buildInfo{"v1.4.0-3-gabc1234-dirty", "abc1234def56"}},
		{"go build in a checkout", "", "", vcs("0123456789abcdef0123", "true"), buildInfo{"dev", "0123456789ab-dirty"}},
		{"clean checkout", "", "", vcs("0123456789abcdef0123", "false"), buildInfo{"dev", "0123456789ab"}},
		{"go install at a tag", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, buildInfo{"v1.2.3", "unknown"}},
		{"nothing known", "", "", nil, buildInfo{"dev", "unknown"}},
	} {
		if got := resolveBuild(tc.stampV, tc.stampC, tc.bi); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// The Makefile's -ldflags really reach `otad version`: the variables'
// import path and names are what the linker is told.
func TestVersionIsStampedAtLinkTime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "otad")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7-test -X main.commit=feedface1234", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), "otad v9.8.7-test (commit feedface1234)"; got != want {
		t.Fatalf("otad version = %q, want %q", got, want)
	}
}

// syncBuffer is a log sink that serve writes to while the test reads it.
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

// The first line serve logs says which build is starting, so a log alone
// tells an operator what ran.
func TestServeLogsItsVersionAtStart(t *testing.T) {
	oldV, oldC := version, commit
	version, commit = "v0.0.1-logtest", "c0ffee000000"
	t.Cleanup(func() { version, commit = oldV, oldC })

	env := map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef", "OTA_STORE": "memory", "OTA_HTTP_ADDR": "127.0.0.1:0"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout bytes.Buffer
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve"}, func(k string) string { return env[k] }, &stdout, &stderr) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), `"msg":"serving"`) {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, stderr.String())
	}
	var first struct{ Msg, Version, Commit, Store string }
	line, _, _ := strings.Cut(stderr.String(), "\n")
	if err := json.Unmarshal([]byte(line), &first); err != nil {
		t.Fatalf("first log line %q: %v", line, err)
	}
	if first.Msg != "otad starting" || first.Version != "v0.0.1-logtest" || first.Commit != "c0ffee000000" || first.Store != "memory" {
		t.Fatalf("first log line: %+v", first)
	}
}

// otad healthcheck is the container's HEALTHCHECK: 0 on a 200 from
// /healthz, 1 on anything else, including nothing listening.
func TestHealthcheck(t *testing.T) {
	var hits atomic.Int32
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		w.WriteHeader(status)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	probe := func(addr string, args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"healthcheck"}, args...),
			func(k string) string {
				if k == "OTA_HTTP_ADDR" {
					return addr
				}
				return ""
			}, &stdout, &stderr)
		return code, stderr.String()
	}
	// A wildcard listen address is probed on loopback.
	if code, errs := probe(":" + port); code != 0 || hits.Load() != 1 {
		t.Fatalf("healthy: exit %d (%s), %d hits", code, errs, hits.Load())
	}
	if code, errs := probe("", "--url", srv.URL+"/healthz"); code != 0 || hits.Load() != 2 {
		t.Fatalf("--url: exit %d (%s), %d hits", code, errs, hits.Load())
	}
	status = http.StatusServiceUnavailable
	if code, errs := probe("0.0.0.0:" + port); code != 1 || !strings.Contains(errs, "503") {
		t.Fatalf("unhealthy: exit %d, %q", code, errs)
	}
	if code, _ := probe(deadPort(t)); code != 1 {
		t.Fatalf("nothing listening: exit %d", code)
	}
	if code, errs := probe("not-an-address"); code != 1 || !strings.Contains(errs, "OTA_HTTP_ADDR") {
		t.Fatalf("bad address: exit %d, %q", code, errs)
	}
}

func TestHealthzURL(t *testing.T) {
	for addr, want := range map[string]string{
		":8080":          "http://127.0.0.1:8080/healthz",
		"0.0.0.0:9000":   "http://127.0.0.1:9000/healthz",
		"[::]:9000":      "http://127.0.0.1:9000/healthz",
		"10.0.0.5:8080":  "http://10.0.0.5:8080/healthz",
		"[::1]:8080":     "http://[::1]:8080/healthz",
		"localhost:8081": "http://localhost:8081/healthz",
	} {
		if got, err := healthzURL(addr); err != nil || got != want {
			t.Errorf("healthzURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
}

// serve --create-db (what make run does) says when it created the
// database, and only then. It needs a Postgres server on which databases
// may be created: OTA_TEST_DATABASE_URL's (the Makefile sets it).
func TestCreateDBSaysSo(t *testing.T) {
	base := os.Getenv("OTA_TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("OTA_TEST_REQUIRE_SERVICES") != "" {
			t.Fatal("OTA_TEST_REQUIRE_SERVICES is set but OTA_TEST_DATABASE_URL is not")
		}
		t.Skip("no Postgres: set OTA_TEST_DATABASE_URL (make test does when 127.0.0.1:5432 answers)")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("ota_createdb_test_%d", time.Now().UnixNano())
	u.Path = "/" + name
	admin, err := sql.Open("postgres", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(`DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
		admin.Close()
	})
	env := map[string]string{
		"OTA_ADMIN_TOKEN":  "0123456789abcdef",
		"OTA_DATABASE_URL": u.String(),
		"OTA_REDIS_URL":    "redis://" + deadPort(t) + "/0", // serve stops at Redis, after the database work
		"OTA_HTTP_ADDR":    "127.0.0.1:0",
	}
	serve := func() string {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"serve", "--create-db"}, func(k string) string { return env[k] }, &stdout, &stderr); code != 1 {
			t.Fatalf("serve exited %d, want 1 (no Redis):\n%s", code, stderr.String())
		}
		return stderr.String()
	}
	if out := serve(); !strings.Contains(out, `"msg":"created the database named in OTA_DATABASE_URL","database":"`+name+`"`) {
		t.Fatalf("first start did not say it created %s:\n%s", name, out)
	}
	if out := serve(); strings.Contains(out, "created the database") {
		t.Fatalf("second start claims to have created the database again:\n%s", out)
	}
}

// An unset OTA_PUBLIC_URL is said at start, naming the links it makes;
// a set one says nothing.
func TestPublicURLWarning(t *testing.T) {
	cfg := bootstrap.Config{PublicURL: "http://localhost:8080"}
	msg := publicURLWarning(cfg, func(string) string { return "" })
	if !strings.Contains(msg, "OTA_PUBLIC_URL is not set") || !strings.Contains(msg, "http://localhost:8080") {
		t.Fatalf("unset: %q", msg)
	}
	set := map[string]string{"OTA_PUBLIC_URL": "https://ota.example.com"}
	if msg := publicURLWarning(cfg, func(k string) string { return set[k] }); msg != "" {
		t.Fatalf("set: %q", msg)
	}
}
