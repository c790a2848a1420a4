package rest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/adapters/httpedge"
)

// healthView is the body of /healthz and /readyz.
type healthView struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks,omitempty"`
}

// healthz answers as long as the process serves HTTP: it checks nothing
// else, so a dependency outage never makes an orchestrator restart an
// otherwise healthy process.
func (s *server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, healthView{Status: "ok"})
}

// readyz runs every health check concurrently, each bounded by
// ReadyTimeout, and answers 503 when any fails so that a load balancer stops
// sending traffic this replica cannot serve. A failure is reported as a
// short fixed reason; the full error (which may name hosts) is only logged.
func (s *server) readyz(c echo.Context) error {
	ctx := c.Request().Context()
	results := make([]string, len(s.checks))
	var wg sync.WaitGroup
	for i, hc := range s.checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
			defer cancel()
			err := hc.Check(cctx)
			if err == nil {
				results[i] = "ok"
				return
			}
			results[i] = failureReason(cctx, err)
			s.logger.WarnContext(ctx, "readiness check failed",
				"request_id", httpedge.RequestIDOf(c), "check", hc.Name(), "error", err.Error())
		})
	}
	wg.Wait()

	out := healthView{Status: "ok", Checks: make(map[string]string, len(s.checks))}
	status := http.StatusOK
	for i, hc := range s.checks {
		out.Checks[hc.Name()] = results[i]
		if results[i] != "ok" {
			out.Status, status = "unavailable", http.StatusServiceUnavailable
		}
	}
	if len(s.checks) == 0 {
		out.Checks = map[string]string{}
	}
	return c.JSON(status, out)
}

// failureReason classifies a failed probe without repeating its text.
func failureReason(ctx context.Context, err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return "timeout"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.As(err, &ne):
		return "unreachable"
	}
	return "failed"
}
