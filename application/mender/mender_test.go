package mender_test

import (
	"errors"
	"testing"

	"github.com/ai-device/ota/application/mender"
	"github.com/ai-device/ota/domain"
)

func TestMenderEventTranslation(t *testing.T) {
	const task = "5c0c6f3e-4a5b-4c53-9d3e-4f1d7f9e0a11"
	for _, c := range []struct {
		status, want, code string
		apply              bool
	}{
		{"downloading", "downloading", "", true},
		{"installing", "installing", "", true},
		{"rebooting", "installing", "", true},
		{"success", "succeeded", "", true},
		{"already-installed", "succeeded", domain.CodeAlreadyInstalled, true},
		{"failure", "failed", mender.CodeFailure, true},
		{"pause_before_installing", "", "", false},
		{"pause_before_committing", "", "", false},
	} {
		ev, apply, err := mender.Event(task, c.status)
		if err != nil || apply != c.apply || ev.Status != c.want || ev.ErrorCode != c.code {
			t.Errorf("%s: %+v apply=%v err=%v", c.status, ev, apply, err)
			continue
		}
		if apply {
			again, _, _ := mender.Event(task, c.status)
			other, _, _ := mender.Event("9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d", c.status)
			if again.EventID != ev.EventID || other.EventID == ev.EventID {
				t.Errorf("%s: event ids must repeat per task and differ across tasks", c.status)
			}
			if _, err := domain.NewEvent(ev.EventID, ev.Status, ev.Progress, ev.ErrorCode, ev.ErrorMessage); err != nil {
				t.Errorf("%s: not a valid event: %v", c.status, err)
			}
		}
	}
	// Statuses mapping to the same task status are one event (replays).
	a, _, _ := mender.Event(task, "installing")
	b, _, _ := mender.Event(task, "rebooting")
	if a.EventID != b.EventID {
		t.Error("installing and rebooting must replay one event")
	}
	if _, _, err := mender.Event(task, "exploded"); !errors.Is(err, domain.ErrValidation) {
		t.Errorf("unknown status: %v", err)
	}
}
