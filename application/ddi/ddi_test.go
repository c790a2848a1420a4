package ddi_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ai-device/ota/application/ddi"
	"github.com/ai-device/ota/domain"
)

func TestDDIEventTranslation(t *testing.T) {
	prog := func(cnt, of int) *ddi.Progress { return &ddi.Progress{Cnt: cnt, Of: of} }
	for _, tc := range []struct {
		name     string
		current  domain.TaskStatus
		fb       ddi.Feedback
		status   string
		progress int // -1: none
		code     string
		apply    bool
	}{
		{"proceeding", domain.TaskPending, ddi.Feedback{Execution: "proceeding", Finished: "none", Progress: prog(1, 4)}, "downloading", 25, "", true},
		{"proceeding of 0", domain.TaskPending, ddi.Feedback{Execution: "proceeding", Finished: "none", Progress: prog(0, 0)}, "downloading", -1, "", true},
		{"progress clamped", domain.TaskPending, ddi.Feedback{Execution: "resumed", Finished: "none", Progress: prog(9, 4)}, "downloading", 100, "", true},
		{"progress of huge counts does not wrap", domain.TaskPending, ddi.Feedback{Execution: "proceeding", Finished: "none", Progress: prog(math.MaxInt/2, math.MaxInt)}, "downloading", 49, "", true},
		{"progress of a count just below a huge total", domain.TaskPending, ddi.Feedback{Execution: "proceeding", Finished: "none", Progress: prog(math.MaxInt-1, math.MaxInt)}, "downloading", 99, "", true},
		{"negative progress", domain.TaskPending, ddi.Feedback{Execution: "proceeding", Finished: "none", Progress: prog(-5, 10)}, "downloading", 0, "", true},
		{"proceeding while installing", domain.TaskInstalling, ddi.Feedback{Execution: "proceeding", Finished: "none", Progress: prog(3, 4)}, "installing", 75, "", true},
		{"proceeding after downloaded", domain.TaskDownloaded, ddi.Feedback{Execution: "proceeding", Finished: "none"}, "installing", -1, "", true},
		{"downloaded", domain.TaskDownloading, ddi.Feedback{Execution: "downloaded", Finished: "none"}, "downloaded", -1, "", true},
		{"closed success", domain.TaskDownloading, ddi.Feedback{Execution: "closed", Finished: "success"}, "succeeded", -1, "", true},
		{"closed none", domain.TaskDownloading, ddi.Feedback{Execution: "closed", Finished: "none"}, "succeeded", -1, "", true},
		{"closed failure", domain.TaskDownloading, ddi.Feedback{Execution: "closed", Finished: "failure", Details: []string{"ERROR a", "b\x00\xff"}}, "failed", -1, ddi.CodeFailure, true},
		{"canceled", domain.TaskDownloading, ddi.Feedback{Execution: "canceled", Finished: "none"}, "failed", -1, ddi.CodeCanceled, true},
		{"rejected", domain.TaskPending, ddi.Feedback{Execution: "rejected", Finished: "none"}, "failed", -1, ddi.CodeRejected, true},
		{"scheduled", domain.TaskPending, ddi.Feedback{Execution: "scheduled", Finished: "none"}, "", -1, "", false},
	} {
		ev, apply, err := ddi.Event(7, tc.current, tc.fb)
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
		again, _, _ := ddi.Event(7, tc.current, tc.fb)
		if again.EventID != ev.EventID {
			t.Errorf("%s: the same feedback must give the same event id", tc.name)
		}
		other, _, _ := ddi.Event(8, tc.current, tc.fb)
		if other.EventID == ev.EventID {
			t.Errorf("%s: another action's feedback must not share the event id", tc.name)
		}
	}
	a, _, _ := ddi.Event(7, domain.TaskPending, ddi.Feedback{Execution: "proceeding", Finished: "none", Details: []string{"x"}})
	b, _, _ := ddi.Event(7, domain.TaskPending, ddi.Feedback{Execution: "proceeding", Finished: "none", Details: []string{"y"}})
	if a.EventID == b.EventID {
		t.Error("feedback with other details must be another event")
	}
	fail, _, _ := ddi.Event(7, domain.TaskPending, ddi.Feedback{Execution: "closed", Finished: "failure",
		Details: []string{strings.Repeat("é", 2000)}})
	if len(fail.ErrorMessage) > domain.MaxMessageLen || !strings.HasPrefix(fail.ErrorMessage, "é") {
		t.Errorf("long details must be cut to %d bytes at a rune boundary: %d", domain.MaxMessageLen, len(fail.ErrorMessage))
	}
	for _, fb := range []ddi.Feedback{{Execution: "exploded", Finished: "none"}, {Execution: "closed", Finished: "maybe"}} {
		if _, _, err := ddi.Event(7, domain.TaskPending, fb); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%+v: %v, want a validation error", fb, err)
		}
	}
}
