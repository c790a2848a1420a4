package domain

import (
	"fmt"
	"strconv"
	"strings"
)

// Event is one progress report from a device about one task. The device
// picks the event id; replaying an id must be harmless.
type Event struct {
	id           string
	status       TaskStatus
	progress     *int
	errorCode    string
	errorMessage string
	fingerprint  string
}

// NewEvent validates a device's report. progress may be nil (unchanged
// within a status, 0 when the status moves forward).
func NewEvent(id, status string, progress *int, errorCode, errorMessage string) (Event, error) {
	if id == "" {
		return Event{}, invalid("event_id", "is required")
	}
	if err := ValidateText("event_id", id, MaxIDLen); err != nil {
		return Event{}, err
	}
	st, err := ParseTaskStatus(status)
	if err != nil || st == TaskPending || st == TaskCancelled {
		return Event{}, invalid("status", "must be one of downloading, downloaded, installing, succeeded, failed")
	}
	if progress != nil && (*progress < 0 || *progress > 100) {
		return Event{}, invalid("progress", "must be between 0 and 100")
	}
	if err := ValidateText("error_code", errorCode, MaxIDLen); err != nil {
		return Event{}, err
	}
	if err := ValidateText("error_message", errorMessage, MaxMessageLen); err != nil {
		return Event{}, err
	}
	var p *int
	if progress != nil {
		v := *progress
		p = &v
	}
	ev := Event{id: id, status: st, progress: p, errorCode: errorCode, errorMessage: errorMessage}
	ev.fingerprint = ev.digest()
	return ev, nil
}

// ID is the device-made event id.
func (e Event) ID() string { return e.id }

// Status is the status the device reports.
func (e Event) Status() TaskStatus { return e.status }

// IsFinal reports whether the event ends the task; such events are never
// refused for quota or rate reasons.
func (e Event) IsFinal() bool { return e.status.IsFinal() }

// Fingerprint is a stable digest of the event's body, stored beside its id
// so a replay can be told from a conflicting reuse of the id.
func (e Event) Fingerprint() string { return e.fingerprint }

func (e Event) digest() string {
	p := "-"
	if e.progress != nil {
		p = strconv.Itoa(*e.progress)
	}
	return e.status.s + "|" + p + "|" + strconv.Quote(e.errorCode) + "|" + strconv.Quote(e.errorMessage)
}

// SameBody reports whether two events say the same thing.
func (e Event) SameBody(o Event) bool { return e.Fingerprint() == o.Fingerprint() }

// RehydrateEvent rebuilds a stored event from its id and fingerprint, the
// only parts kept, enough to compare bodies.
func RehydrateEvent(id, fingerprint string) Event {
	return Event{id: id, fingerprint: fingerprint}
}

func (e Event) progressOr(current TaskStatus, currentProgress int) int {
	if e.progress != nil {
		return *e.progress
	}
	if e.status == current {
		return currentProgress
	}
	return 0
}

// Progress is the progress the event reported, if it reported one.
func (e Event) Progress() (int, bool) {
	if e.progress == nil {
		return 0, false
	}
	return *e.progress, true
}

// ErrorCode is the code the event carried ("" if none).
func (e Event) ErrorCode() string { return e.errorCode }

// ErrorMessage is the message the event carried ("" if none).
func (e Event) ErrorMessage() string { return e.errorMessage }

// RehydrateStoredEvent rebuilds a stored event whole from its id and
// fingerprint — the stores keep only those, and the fingerprint is the
// event's body (digest) — for a task's history. A fingerprint that is not
// one digest wrote is an error.
func RehydrateStoredEvent(id, fingerprint string) (Event, error) {
	bad := fmt.Errorf("event %q: stored fingerprint does not parse", id)
	st, rest, ok := strings.Cut(fingerprint, "|")
	if !ok {
		return Event{}, bad
	}
	status, err := ParseTaskStatus(st)
	if err != nil {
		return Event{}, bad
	}
	p, rest, ok := strings.Cut(rest, "|")
	if !ok {
		return Event{}, bad
	}
	var progress *int
	if p != "-" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return Event{}, bad
		}
		progress = &n
	}
	var texts [2]string
	for i := range texts {
		if i > 0 {
			if rest, ok = strings.CutPrefix(rest, "|"); !ok {
				return Event{}, bad
			}
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return Event{}, bad
		}
		if texts[i], err = strconv.Unquote(q); err != nil {
			return Event{}, bad
		}
		rest = rest[len(q):]
	}
	if rest != "" {
		return Event{}, bad
	}
	return Event{id: id, status: status, progress: progress, errorCode: texts[0], errorMessage: texts[1], fingerprint: fingerprint}, nil
}
