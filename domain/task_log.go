package domain

import (
	"slices"
	"time"
)

// Bounds of a task's device log.
const (
	MaxLogLines      = 200
	MaxLogLevelLen   = 16
	MaxLogStampLen   = 64
	MaxLogMessageLen = MaxMessageLen
)

// LogLine is one line of the log a device uploads about a task.
type LogLine struct {
	Level     string
	Message   string
	Timestamp string
}

// TaskLog is the log a device uploaded about a task (Mender uploads its
// deployment log after a failure), kept with the task for operators.
type TaskLog struct {
	taskID    UUID
	lines     []LogLine
	updatedAt time.Time
}

// NewTaskLog keeps a device's upload within bounds: the last MaxLogLines
// lines, each field cut to its length and made valid text. An upload
// replaces the previous one (the device sends its whole log each time).
func NewTaskLog(taskID UUID, lines []LogLine, now time.Time) TaskLog {
	if len(lines) > MaxLogLines {
		lines = lines[len(lines)-MaxLogLines:]
	}
	kept := make([]LogLine, 0, len(lines))
	for _, l := range lines {
		kept = append(kept, LogLine{Level: clip(l.Level, MaxLogLevelLen), Message: clip(l.Message, MaxLogMessageLen), Timestamp: clip(l.Timestamp, MaxLogStampLen)})
	}
	return TaskLog{taskID: taskID, lines: kept, updatedAt: stamp(now)}
}

// RehydrateTaskLog rebuilds a stored log; only adapters call it.
func RehydrateTaskLog(taskID string, lines []LogLine, updatedAt time.Time) TaskLog {
	return TaskLog{taskID: UUID{s: taskID}, lines: slices.Clone(lines), updatedAt: stamp(updatedAt)}
}

// TaskID is the task the log is about.
func (l TaskLog) TaskID() UUID { return l.taskID }

// Lines returns a copy of the log's lines, oldest first.
func (l TaskLog) Lines() []LogLine { return slices.Clone(l.lines) }

// UpdatedAt is when the device uploaded it.
func (l TaskLog) UpdatedAt() time.Time { return l.updatedAt }
