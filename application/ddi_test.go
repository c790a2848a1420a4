package application_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

func TestDDIEventTranslation(t *testing.T) {
	prog := func(cnt, of int) *ports.DDIProgress { return &ports.DDIProgress{Cnt: cnt, Of: of} }
	for _, tc := range []struct {
		name     string
		current  domain.TaskStatus
		fb       ports.DDIFeedback
		status   string
		progress int // -1: none
		code     string
		apply    bool
	}{
		{"proceeding", domain.TaskPending, ports.DDIFeedback{Execution: "proceeding", Finished: "none", Progress: prog(1, 4)}, "downloading", 25, "", true},
		{"proceeding of 0", domain.TaskPending, ports.DDIFeedback{Execution: "proceeding", Finished: "none", Progress: prog(0, 0)}, "downloading", -1, "", true},
		{"progress clamped", domain.TaskPending, ports.DDIFeedback{Execution: "resumed", Finished: "none", Progress: prog(9, 4)}, "downloading", 100, "", true},
		{"progress of huge counts does not wrap", domain.TaskPending, ports.DDIFeedback{Execution: "proceeding", Finished: "none", Progress: prog(math.MaxInt/2, math.MaxInt)}, "downloading", 49, "", true},
		{"progress of a count just below a huge total", domain.TaskPending, ports.DDIFeedback{Execution: "proceeding", Finished: "none", Progress: prog(math.MaxInt-1, math.MaxInt)}, "downloading", 99, "", true},
		{"negative progress", domain.TaskPending, ports.DDIFeedback{Execution: "proceeding", Finished: "none", Progress: prog(-5, 10)}, "downloading", 0, "", true},
		{"proceeding while installing", domain.TaskInstalling, ports.DDIFeedback{Execution: "proceeding", Finished: "none", Progress: prog(3, 4)}, "installing", 75, "", true},
		{"proceeding after downloaded", domain.TaskDownloaded, ports.DDIFeedback{Execution: "proceeding", Finished: "none"}, "installing", -1, "", true},
		{"downloaded", domain.TaskDownloading, ports.DDIFeedback{Execution: "downloaded", Finished: "none"}, "downloaded", -1, "", true},
		{"closed success", domain.TaskDownloading, ports.DDIFeedback{Execution: "closed", Finished: "success"}, "succeeded", -1, "", true},
		{"closed none", domain.TaskDownloading, ports.DDIFeedback{Execution: "closed", Finished: "none"}, "succeeded", -1, "", true},
		{"closed failure", domain.TaskDownloading, ports.DDIFeedback{Execution: "closed", Finished: "failure", Details: []string{"ERROR a", "b\x00\xff"}}, "failed", -1, application.CodeDDIFailure, true},
		{"canceled", domain.TaskDownloading, ports.DDIFeedback{Execution: "canceled", Finished: "none"}, "failed", -1, application.CodeDDICanceled, true},
		{"rejected", domain.TaskPending, ports.DDIFeedback{Execution: "rejected", Finished: "none"}, "failed", -1, application.CodeDDIRejected, true},
		{"scheduled", domain.TaskPending, ports.DDIFeedback{Execution: "scheduled", Finished: "none"}, "", -1, "", false},
	} {
		ev, apply, err := application.DDIEvent(7, tc.current, tc.fb)
		if err != nil || apply != tc.apply {
			t.Errorf("%s: apply=%v err=%v", tc.name, apply, err)
			continue
		}
		if !apply {
			continue
		}
		if ev.Status != tc.status || ev.ErrorCode != tc.code {
			t.Errorf("%s: %+v", tc.name, ev)
		}
		if (tc.progress < 0) != (ev.Progress == nil) || (ev.Progress != nil && *ev.Progress != tc.progress) {
			t.Errorf("%s: progress %v, want %d", tc.name, ev.Progress, tc.progress)
		}
		// The event is one the domain accepts as is.
		if _, err := domain.NewEvent(ev.EventID, ev.Status, ev.Progress, ev.ErrorCode, ev.ErrorMessage); err != nil {
			t.Errorf("%s: the domain refuses the translated event: %v", tc.name, err)
		}
		again, _, _ := application.DDIEvent(7, tc.current, tc.fb)
		if again.EventID != ev.EventID {
			t.Errorf("%s: the same feedback must give the same event id", tc.name)
		}
		other, _, _ := application.DDIEvent(8, tc.current, tc.fb)
		if other.EventID == ev.EventID {
			t.Errorf("%s: another action's feedback must not share the event id", tc.name)
		}
	}
	a, _, _ := application.DDIEvent(7, domain.TaskPending, ports.DDIFeedback{Execution: "proceeding", Finished: "none", Details: []string{"x"}})
	b, _, _ := application.DDIEvent(7, domain.TaskPending, ports.DDIFeedback{Execution: "proceeding", Finished: "none", Details: []string{"y"}})
	if a.EventID == b.EventID {
		t.Error("feedback with other details must be another event")
	}
	fail, _, _ := application.DDIEvent(7, domain.TaskPending, ports.DDIFeedback{Execution: "closed", Finished: "failure",
		Details: []string{strings.Repeat("é", 2000)}})
	if len(fail.ErrorMessage) > domain.MaxMessageLen || !strings.HasPrefix(fail.ErrorMessage, "é") {
		t.Errorf("long details must be cut to %d bytes at a rune boundary: %d", domain.MaxMessageLen, len(fail.ErrorMessage))
	}
	for _, fb := range []ports.DDIFeedback{{Execution: "exploded", Finished: "none"}, {Execution: "closed", Finished: "maybe"}} {
		if _, _, err := application.DDIEvent(7, domain.TaskPending, fb); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%+v: %v, want a validation error", fb, err)
		}
	}
}
