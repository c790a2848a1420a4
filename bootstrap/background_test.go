package bootstrap_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/bootstrap"
)

// The webhook delivery runs while the app serves and has stopped when
// Serve returns: a worker is never left running against closed pools.
func TestBackgroundWorkRunsWhileServing(t *testing.T) {
	app := bootstrap.NewApp(bootstrap.Config{HTTPAddr: "127.0.0.1:0"}, echo.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	started, stopped := make(chan struct{}), make(chan struct{})
	app.InBackground(func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // finishing an attempt
		close(stopped)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, ln) }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the background work did not start with the server")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("Serve returned before the background work stopped")
	}
}
