package bootstrap

import (
	"io"
	"log/slog"
)

// NewLogger writes structured JSON logs at the configured level. Handlers
// add request_id, device_id and task_id; tokens are never logged.
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}
