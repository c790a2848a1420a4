package domain_test

import (
	"strings"
	"testing"

	"github.com/ai-device/ota/domain"
)

func TestNewEventValidation(t *testing.T) {
	tests := []struct {
		name     string
		id       string
		status   string
		progress *int
		code     string
		msg      string
		field    string // "" when valid
	}{
		{"downloading", "e1", "downloading", intp(10), "", "", ""},
		{"downloaded", "e1", "downloaded", nil, "", "", ""},
		{"installing", "e1", "installing", intp(0), "", "", ""},
		{"succeeded", "e1", "succeeded", intp(100), "", "", ""},
		{"failed with code", "e1", "failed", nil, "E_FLASH", "flash write failed", ""},
		{"id 64 bytes", strings.Repeat("e", 64), "downloading", nil, "", "", ""},
		{"id free-form", "evt 2025-03-01T12:00:00Z #1", "downloading", nil, "", "", ""},
		{"message at max", "e1", "failed", nil, "E", strings.Repeat("m", domain.MaxMessageLen), ""},

		{"id empty", "", "downloading", nil, "", "", "event_id"},
		{"id 65 bytes", strings.Repeat("e", 65), "downloading", nil, "", "", "event_id"},
		{"id NUL", "e\x001", "downloading", nil, "", "", "event_id"},
		{"id invalid UTF-8", "e\xff", "downloading", nil, "", "", "event_id"},

		{"status pending", "e1", "pending", nil, "", "", "status"},
		{"status cancelled", "e1", "cancelled", nil, "", "", "status"},
		{"status empty", "e1", "", nil, "", "", "status"},
		{"status upper-case", "e1", "DOWNLOADING", nil, "", "", "status"},
		{"status unknown", "e1", "rebooting", nil, "", "", "status"},

		{"progress -1", "e1", "downloading", intp(-1), "", "", "progress"},
		{"progress 101", "e1", "downloading", intp(101), "", "", "progress"},

		{"code too long", "e1", "failed", nil, strings.Repeat("C", 65), "", "error_code"},
		{"code NUL", "e1", "failed", nil, "E\x00", "", "error_code"},
		{"message too long", "e1", "failed", nil, "E", strings.Repeat("m", domain.MaxMessageLen+1), "error_message"},
		{"message invalid UTF-8", "e1", "failed", nil, "E", "bad \xc3(", "error_message"},
		{"message NUL", "e1", "failed", nil, "E", "a\x00", "error_message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := domain.NewEvent(tt.id, tt.status, tt.progress, tt.code, tt.msg)
			if tt.field != "" {
				wantValidation(t, err, tt.field)
				return
			}
			if err != nil {
				t.Fatalf("NewEvent: %v", err)
			}
			if ev.ID() != tt.id || ev.Status().String() != tt.status {
				t.Fatalf("id/status = %q/%s", ev.ID(), ev.Status())
			}
			if ev.IsFinal() != (tt.status == "succeeded" || tt.status == "failed") {
				t.Fatalf("IsFinal = %v for %s", ev.IsFinal(), tt.status)
			}
			if ev.Fingerprint() == "" {
				t.Fatal("empty fingerprint")
			}
		})
	}
}

func TestEventSameBody(t *testing.T) {
	ref := mustEvent(t, "e1", "failed", intp(40), "E1", "boom")
	tests := []struct {
		name     string
		status   string
		progress *int
		code     string
		msg      string
		same     bool
	}{
		{"identical", "failed", intp(40), "E1", "boom", true},
		{"different status", "installing", intp(40), "E1", "boom", false},
		{"different progress", "failed", intp(41), "E1", "boom", false},
		{"nil progress vs 40", "failed", nil, "E1", "boom", false},
		{"different code", "failed", intp(40), "E2", "boom", false},
		{"different message", "failed", intp(40), "E1", "bang", false},
		{"empty message", "failed", intp(40), "E1", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A different event id must not matter: only the body is compared.
			ev := mustEvent(t, "e2", tt.status, tt.progress, tt.code, tt.msg)
			if got := ref.SameBody(ev); got != tt.same {
				t.Fatalf("SameBody = %v, want %v", got, tt.same)
			}
			if got := ev.SameBody(ref); got != tt.same {
				t.Fatalf("SameBody not symmetric")
			}
			if got := ref.Fingerprint() == ev.Fingerprint(); got != tt.same {
				t.Fatalf("fingerprints equal = %v, want %v", got, tt.same)
			}
		})
	}
}

func TestEventFingerprintHasNoFieldCollisions(t *testing.T) {
	// Without quoting, "a|b"+"c" and "a"+"b|c" would render the same.
	a := mustEvent(t, "e1", "failed", nil, "a|b", "c")
	b := mustEvent(t, "e1", "failed", nil, "a", "b|c")
	if a.SameBody(b) {
		t.Fatal("different (code, message) splits share a fingerprint")
	}
	c := mustEvent(t, "e1", "failed", nil, `a"|"b`, "")
	d := mustEvent(t, "e1", "failed", nil, "a", "b")
	if c.SameBody(d) {
		t.Fatal("quote injection produced a fingerprint collision")
	}
	e := mustEvent(t, "e1", "failed", nil, "-", "")
	f := mustEvent(t, "e1", "failed", intp(0), "-", "")
	if e.SameBody(f) {
		t.Fatal("nil and 0 progress share a fingerprint")
	}
}

func TestEventCopiesProgress(t *testing.T) {
	p := 30
	ev := mustEvent(t, "e1", "downloading", &p, "", "")
	fp := ev.Fingerprint()
	p = 90
	if ev.Fingerprint() != fp {
		t.Fatal("fingerprint changed when the caller's progress variable changed")
	}
	task := taskIn(domain.TaskPending, 0)
	if _, err := task.ApplyEvent(ev, nil, t1); err != nil {
		t.Fatal(err)
	}
	if task.Progress() != 30 {
		t.Fatalf("event aliased the caller's progress: task progress %d, want 30", task.Progress())
	}
}

func TestRehydrateEventComparesByFingerprint(t *testing.T) {
	ev := mustEvent(t, "e1", "downloading", intp(5), "", "")
	stored := domain.RehydrateEvent(ev.ID(), ev.Fingerprint())
	if stored.ID() != "e1" || !stored.SameBody(ev) || !ev.SameBody(stored) {
		t.Fatal("rehydrated event does not match its original body")
	}
	other := mustEvent(t, "e1", "downloading", intp(6), "", "")
	if stored.SameBody(other) {
		t.Fatal("rehydrated event matches a different body")
	}
}
