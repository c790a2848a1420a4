package httpedge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// A caller that hangs up mid-request is not a server error: it must not be
// answered or counted as 500 INTERNAL.
func TestClientHangUpIsNotAnInternalError(t *testing.T) {
	var logs strings.Builder
	s := New(nil, slog.New(slog.NewTextHandler(&logs, nil)))
	e := echo.New()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest(http.MethodPost, "/x", nil).WithContext(ctx)
	rec := httptest.NewRecorder()
	c := e.NewContext(req, rec)
	s.HandleError(errors.New("pq: canceling statement due to user request"), c)
	if rec.Code != StatusClientClosedRequest {
		t.Fatalf("status %d, want 499", rec.Code)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("logged as an error: %s", logs.String())
	}
	// The same error with the caller still there is a real 500.
	rec = httptest.NewRecorder()
	s.HandleError(errors.New("boom"), e.NewContext(httptest.NewRequest(http.MethodPost, "/x", nil), rec))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", rec.Code)
	}
}
