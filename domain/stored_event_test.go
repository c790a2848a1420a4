package domain_test

import (
	"testing"

	"github.com/ai-device/ota/domain"
)

// TestStoredEventRoundTrips: a task's history rebuilds each event whole
// from the fingerprint the stores keep, whatever its text holds.
func TestStoredEventRoundTrips(t *testing.T) {
	for _, ev := range []domain.Event{
		mustEvent(t, "e1", "downloading", intp(40), "", ""),
		mustEvent(t, "e2", "installing", nil, "", ""),
		mustEvent(t, "e3", "failed", nil, `A|"B"`, "line 1|\n\"quoted\" \u00e9 \\ |"),
		mustEvent(t, "e4", "succeeded", intp(100), domain.CodeAlreadyInstalled, ""),
	} {
		got, err := domain.RehydrateStoredEvent(ev.ID(), ev.Fingerprint())
		if err != nil {
			t.Fatalf("%s: %v", ev.ID(), err)
		}
		gp, gok := got.Progress()
		wp, wok := ev.Progress()
		if got.ID() != ev.ID() || got.Status() != ev.Status() || gp != wp || gok != wok ||
			got.ErrorCode() != ev.ErrorCode() || got.ErrorMessage() != ev.ErrorMessage() || !got.SameBody(ev) {
			t.Errorf("%s: rebuilt %+v, want %+v", ev.ID(), got, ev)
		}
	}
	for _, fp := range []string{"", "downloading", "nope|-|\"\"|\"\"", "failed|x|\"\"|\"\"", "failed|-|\"\"", "failed|-|\"\"|\"\"tail"} {
		if _, err := domain.RehydrateStoredEvent("e", fp); err == nil {
			t.Errorf("fingerprint %q parsed", fp)
		}
	}
}
