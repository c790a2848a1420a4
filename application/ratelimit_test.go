package application_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

func TestRateLimitRefusesChecksAndProgressButNeverAFinalStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	deps := e.deps
	deps.Limiter = local.NewRateLimiter(0.0001, 3) // three requests, then nothing for hours
	limited, err := application.NewDevices(deps, application.PollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	e.rollout(e.firmware("1.1.0"), 100)
	d := e.device("1.0.0")
	req := e.req(d, model, "1.0.0")
	res, err := limited.Check(e.ctx, req) // 1
	if err != nil || res.Task == nil {
		t.Fatal(res, err)
	}
	taskID := res.Task.Task.ID()
	if _, err := limited.ReportEvent(e.ctx, asDeviceID(d), taskID, ports.EventRequest{EventID: "a", Status: "downloading"}); err != nil { // 2
		t.Fatal(err)
	}
	if _, err := limited.Check(e.ctx, req); err != nil { // 3
		t.Fatal(err)
	}
	res, err = limited.Check(e.ctx, req)
	var rl *ports.RateLimitedError
	if !errors.Is(err, domain.ErrRateLimited) || !errors.As(err, &rl) || rl.RetryAfter() < time.Second || res.Outcome != ports.CheckRateLimited {
		t.Fatalf("4th check: %+v %v", res, err)
	}
	if _, err := limited.ReportEvent(e.ctx, asDeviceID(d), taskID, ports.EventRequest{EventID: "b", Status: "downloaded"}); !errors.Is(err, domain.ErrRateLimited) {
		t.Fatalf("progress over budget: %v", err)
	}
	v, err := limited.ReportEvent(e.ctx, asDeviceID(d), taskID, ports.EventRequest{EventID: "c", Status: "failed", ErrorCode: "E_FLASH"})
	if err != nil || v.Task.Status() != domain.TaskFailed {
		t.Fatalf("final status refused over budget: %+v %v", v, err)
	}
}
