package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
)

// ShutdownGrace bounds how long in-flight requests may take to finish after
// a stop signal, before connections are closed.
const ShutdownGrace = 15 * time.Second

// App is an assembled service, ready to serve.
type App struct {
	server *echo.Echo
	addr   string
	logger *slog.Logger
	// pprofAddr is OTA_PPROF_ADDR: empty, no profiling listener.
	pprofAddr string
	// flushers run after the server drained and before clients close
	// (e.g. the write-behind batcher).
	flushers []func(context.Context) error
	// background runs while the app serves (the webhook delivery); it
	// stops when the server has drained, before the flushers.
	background []func(context.Context)
}

// NewApp wraps the HTTP server with its lifecycle.
func NewApp(cfg Config, server *echo.Echo, logger *slog.Logger) *App {
	return &App{server: server, addr: cfg.HTTPAddr, logger: logger, pprofAddr: cfg.PprofAddr}
}

// OnShutdown registers work to finish after requests drained.
func (a *App) OnShutdown(f func(context.Context) error) { a.flushers = append(a.flushers, f) }

// InBackground runs f while the app serves; f must return once its
// context ends, which is after the server drained.
func (a *App) InBackground(f func(context.Context)) { a.background = append(a.background, f) }

// Handler exposes the HTTP handler, for in-process tests.
func (a *App) Handler() http.Handler { return a.server }

// Run serves until ctx is cancelled, then stops accepting connections,
// drains in-flight requests (up to ShutdownGrace) and runs the shutdown
// hooks. The caller closes clients afterwards (wire's cleanup).
func (a *App) Run(ctx context.Context) error {
	ln, err := Listen(a.addr)
	if err != nil {
		return err
	}
	return a.Serve(ctx, ln)
}

// Listen opens the HTTP listener on addr (OTA_HTTP_ADDR). otad serve opens
// it before it connects or migrates, so that a port already taken is the
// first thing an operator hears about, with the variable that moves it.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		hint := ""
		if errors.Is(err, syscall.EADDRINUSE) {
			hint = "; another process (another otad?) is listening there: stop it, or set OTA_HTTP_ADDR to a free address such as :8081"
		}
		return nil, fmt.Errorf("listening on %s (OTA_HTTP_ADDR): %w%s", addr, err, hint)
	}
	return ln, nil
}

// Serve is Run on a listener the caller opened.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           a.server,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	if a.pprofAddr != "" {
		stop, err := a.servePprof()
		if err != nil {
			return err
		}
		defer stop()
	}
	bctx, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	var background sync.WaitGroup
	for _, f := range a.background {
		background.Go(func() { f(bctx) })
	}
	defer func() { stopBackground(); background.Wait() }() // also when serving fails
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	a.logger.Info("serving", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	a.logger.Info("shutting down: draining in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	stopBackground()
	background.Wait()
	for _, f := range a.flushers {
		if ferr := f(sctx); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	if err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	a.logger.Info("stopped")
	return nil
}

// servePprof serves net/http/pprof on OTA_PPROF_ADDR, a listener of its
// own: the profiles stay off the service's address (devices never reach
// them) and off the access log and metrics, so profiling under load
// measures the service, not the profiler's requests. stop closes it.
func (a *App) servePprof() (stop func(), err error) {
	ln, err := net.Listen("tcp", a.pprofAddr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (OTA_PPROF_ADDR): %w", a.pprofAddr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	a.logger.Warn("serving pprof profiles (OTA_PPROF_ADDR)", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
