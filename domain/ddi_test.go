package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

func TestAttributesModes(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var a domain.DeviceAttributes
	if a.Known() || len(a.Values()) != 0 {
		t.Fatal("zero attributes must be unknown and empty")
	}
	merge, _ := domain.ParseAttributeMode("")
	if merge != domain.AttributesMerge {
		t.Fatal("empty mode must mean merge")
	}
	if err := a.Apply(merge, map[string]string{"hw": "2", "sw_version": "1.0.0"}, now); err != nil {
		t.Fatal(err)
	}
	if !a.Known() || a.Values()["hw"] != "2" {
		t.Fatalf("merge into empty: %v", a.Values())
	}
	if err := a.Apply(domain.AttributesMerge, map[string]string{"hw": "3", "serial": "x"}, now); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.Keys(), ","); got != "hw,serial,sw_version" || a.Values()["hw"] != "3" {
		t.Fatalf("merge overwrites and adds: %v", a.Values())
	}
	if err := a.Apply(domain.AttributesRemove, map[string]string{"hw": "ignored"}, now); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Get("hw"); ok {
		t.Fatal("remove must delete the key whatever its value")
	}
	if err := a.Apply(domain.AttributesReplace, map[string]string{"only": "1"}, now); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.Keys(), ","); got != "only" {
		t.Fatalf("replace must leave exactly the report: %v", got)
	}
	if _, err := domain.ParseAttributeMode("append"); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("unknown mode: %v", err)
	}
}

func TestAttributesLimits(t *testing.T) {
	now := time.Now()
	var a domain.DeviceAttributes
	_ = a.Apply(domain.AttributesMerge, map[string]string{"keep": "1"}, now)
	big := map[string]string{}
	for i := range domain.MaxAttributes {
		big[strings.Repeat("k", i+1)] = "v"
	}
	for name, data := range map[string]map[string]string{
		"too many":      big,
		"empty key":     {"": "v"},
		"long key":      {strings.Repeat("k", domain.MaxAttributeKeyLen+1): "v"},
		"long value":    {"k": strings.Repeat("v", domain.MaxAttributeValueLen+1)},
		"nul in value":  {"k": "a\x00b"},
		"invalid utf-8": {"k\xff": "v"},
	} {
		err := a.Apply(domain.AttributesMerge, data, now)
		if !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%s: got %v, want a validation error", name, err)
		}
		if got := strings.Join(a.Keys(), ","); got != "keep" {
			t.Errorf("%s: a refused report changed the attributes: %v", name, got)
		}
	}
	// Exactly at the limits is fine.
	exact := map[string]string{strings.Repeat("k", domain.MaxAttributeKeyLen): strings.Repeat("v", domain.MaxAttributeValueLen)}
	if err := a.Apply(domain.AttributesMerge, exact, now); err != nil {
		t.Fatal(err)
	}
}

func TestCancelNotice(t *testing.T) {
	now := time.Now()
	fw, err := domain.NewFirmware(idOf("11111111-1111-1111-1111-111111111111"), domain.FirmwareSpec{
		Model: "m", Version: "1.0.0", URL: "http://x/a.swu", SizeBytes: 1, SHA256: strings.Repeat("a", 64),
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	r, err := domain.NewRollout(idOf("22222222-2222-2222-2222-222222222222"), fw, domain.RolloutSpec{Percentage: 100}, now)
	if err != nil {
		t.Fatal(err)
	}
	task, err := domain.NewTask(asUUID("33333333-3333-3333-3333-333333333333"), asDeviceID("dev"), domain.Offer{Firmware: fw, Rollout: r}, 1, now)
	if err != nil {
		t.Fatal(err)
	}
	active := domain.RehydrateCancelNotice(task, time.Time{})
	if active.Pending() {
		t.Fatal("an active task has no cancel to announce")
	}
	if _, err := active.Confirm(now); !errors.Is(err, domain.ErrInvalidTransition) {
		t.Fatalf("confirming an active task: %v", err)
	}
	if err := task.Cancel(domain.CodeRolloutCancelled, "cancelled", now); err != nil {
		t.Fatal(err)
	}
	n := domain.RehydrateCancelNotice(task, time.Time{})
	if !n.Pending() {
		t.Fatal("a cancelled, unconfirmed task must be pending")
	}
	changed, err := n.Confirm(now)
	if err != nil || !changed || n.Pending() || n.ConfirmedAt().IsZero() {
		t.Fatalf("confirm: changed=%v err=%v pending=%v", changed, err, n.Pending())
	}
	if changed, err := n.Confirm(now.Add(time.Hour)); err != nil || changed {
		t.Fatalf("second confirm must be a no-op: changed=%v err=%v", changed, err)
	}

	if err := fw.CheckSHA1Deliverable(); !errors.Is(err, domain.ErrNotDeliverable) || !strings.Contains(err.Error(), "sha1") {
		t.Fatalf("firmware without sha1: %v", err)
	}
	withSHA1, _ := domain.NewFirmware(idOf("11111111-1111-1111-1111-111111111112"), domain.FirmwareSpec{
		Model: "m", Version: "1.0.1", URL: "http://x/a.swu", SizeBytes: 1, SHA256: strings.Repeat("a", 64), SHA1: strings.Repeat("b", 40),
	}, now)
	if err := withSHA1.CheckSHA1Deliverable(); err != nil {
		t.Fatal(err)
	}
}

// DeviceAttributes is a value: Apply builds a new map, so a copy taken
// before (a store's) never changes with it.
func TestApplyLeavesCopiesAlone(t *testing.T) {
	var a domain.DeviceAttributes
	if err := a.Apply(domain.AttributesMerge, map[string]string{"hw": "1"}, time.Unix(10, 0)); err != nil {
		t.Fatal(err)
	}
	kept := a
	for _, mode := range []domain.AttributeMode{domain.AttributesMerge, domain.AttributesRemove} {
		if err := a.Apply(mode, map[string]string{"hw": "2", "sw": "x"}, time.Unix(20, 0)); err != nil {
			t.Fatal(err)
		}
		if got := kept.Values(); len(got) != 1 || got["hw"] != "1" {
			t.Fatalf("after a %v, the copy taken before holds %v", mode, got)
		}
	}
}

// TestSuccessAcknowledgesSkip: a success on a task its device reported no
// progress on, while the rollout's window is closed for the device, is
// the acknowledgement of update "skip", not an install; anything else is
// a success.
func TestSuccessAcknowledgesSkip(t *testing.T) {
	w, err := domain.ParseWindow("02:00-04:00", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	inside := time.Date(2026, 1, 5, 3, 0, 0, 0, time.UTC)
	outside := time.Date(2026, 1, 5, 4, 0, 30, 0, time.UTC)
	utc := domain.DeviceFacts{}
	// The window is read in the device's zone (UTC-5 in January): 07:30
	// UTC is 02:30 there, inside; 03:00 UTC is 22:00 there, outside.
	newYork := domain.DeviceFacts{Attributes: map[string]string{domain.TimezoneAttribute: "America/New_York"}}
	nyInside := time.Date(2026, 1, 5, 7, 30, 0, 0, time.UTC)
	tests := []struct {
		name   string
		status domain.TaskStatus
		w      *domain.Window
		facts  domain.DeviceFacts
		now    time.Time
		skip   bool
	}{
		{"pending, window closed", domain.TaskPending, &w, utc, outside, true},
		{"pending, window open", domain.TaskPending, &w, utc, inside, false},
		{"pending, no window", domain.TaskPending, nil, utc, outside, false},
		{"downloading, window closed: the device started", domain.TaskDownloading, &w, utc, outside, false},
		{"installing, window closed", domain.TaskInstalling, &w, utc, outside, false},
		{"pending, closed in UTC but open in the device's zone", domain.TaskPending, &w, newYork, nyInside, false},
		{"pending, open in UTC but closed in the device's zone", domain.TaskPending, &w, newYork, inside, true},
	}
	for _, tc := range tests {
		tk := taskIn(tc.status, 0)
		if got := tk.SuccessAcknowledgesSkip(tc.w, tc.facts, tc.now); got != tc.skip {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.skip)
		}
		if tk.Status() != tc.status {
			t.Errorf("%s: the judgement changed the task (%s)", tc.name, tk.Status())
		}
	}
}
