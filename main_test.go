package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
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
	out := strings.TrimSpace(stderr.String())
	if code != 1 || strings.Count(out, "\n") != 0 || !strings.Contains(out, "OTA_DATABASE_URL") || !strings.Contains(out, "OTA_STORE=memory make run") {
		t.Fatalf("exit %d, stderr %q", code, out)
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
	if code := run(context.Background(), []string{"migrate", "sideways"}, getenv, &stdout, &stderr); code != 1 {
		t.Fatalf("bad migrate command: exit %d", code)
	}
}
