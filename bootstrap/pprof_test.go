package bootstrap_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/bootstrap"
)

// freeAddr is a 127.0.0.1 address nothing listens on (closed again at once).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func get(t *testing.T, url string) (int, error) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, nil
}

// OTA_PPROF_ADDR serves the profiles on their own listener only: never on
// the service's address, and gone when the service stops.
func TestPprofServedOnlyOnItsOwnAddress(t *testing.T) {
	pprofAddr := freeAddr(t)
	cfg := bootstrap.Config{HTTPAddr: "127.0.0.1:0", PprofAddr: pprofAddr}
	app := bootstrap.NewApp(cfg, echo.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, ln) }()

	var code int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if code, err = get(t, "http://"+pprofAddr+"/debug/pprof/cmdline"); err == nil {
			break
		}
	}
	if err != nil || code != http.StatusOK {
		t.Fatalf("pprof on OTA_PPROF_ADDR: %d, %v", code, err)
	}
	if code, err := get(t, "http://"+ln.Addr().String()+"/debug/pprof/cmdline"); err != nil || code != http.StatusNotFound {
		t.Errorf("pprof on the service's address: %d, %v; want 404", code, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := get(t, "http://"+pprofAddr+"/debug/pprof/cmdline"); err == nil {
		t.Error("pprof still served after the service stopped")
	}
}

// Without OTA_PPROF_ADDR nothing but the service listens.
func TestPprofOffByDefault(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env(map[string]string{"OTA_ADMIN_TOKEN": "0123456789abcdef"}), true)
	if err != nil || cfg.PprofAddr != "" {
		t.Fatalf("default PprofAddr %q, %v; want empty", cfg.PprofAddr, err)
	}
	if _, err := bootstrap.LoadConfig(env(map[string]string{
		"OTA_ADMIN_TOKEN": "0123456789abcdef", "OTA_HTTP_ADDR": ":8080", "OTA_PPROF_ADDR": ":8080",
	}), true); err == nil {
		t.Error("OTA_PPROF_ADDR equal to OTA_HTTP_ADDR was accepted")
	}
}
