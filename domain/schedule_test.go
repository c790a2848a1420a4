package domain_test

import (
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

func TestParseWindow(t *testing.T) {
	for _, bad := range []string{"", "2:00-4:00", "02:00-02:00", "25:00-01:00", "02:60-03:00", "02:00-04:00x", "02:00 04:00", "+1:00-04:00", "02:00-24:30", "0a:00-04:00"} {
		_, err := domain.ParseWindow(bad, "")
		wantValidation(t, err, "window.daily")
	}
	// Every digit and the largest hour and minute are read.
	for _, good := range []string{"09:59-19:59", "23:59-24:00", "00:00-23:59"} {
		if w, err := domain.ParseWindow(good, ""); err != nil || w.Daily() != good {
			t.Errorf("%s: %q %v", good, w.Daily(), err)
		}
	}
	_, err := domain.ParseWindow("02:00-04:00", "Mars/Olympus")
	wantValidation(t, err, "window.time_zone")
	w, err := domain.ParseWindow("22:00-24:00", "Europe/Berlin")
	if err != nil || w.Daily() != "22:00-24:00" || w.Zone() != "Europe/Berlin" {
		t.Fatalf("got %q %q %v", w.Daily(), w.Zone(), err)
	}
}

func TestWindowOpen(t *testing.T) {
	day := func(h, m int) time.Time { return time.Date(2025, 6, 10, h, m, 0, 0, time.UTC) }
	berlin := domain.DeviceFacts{Attributes: map[string]string{"timezone": "Europe/Berlin"}} // UTC+2 in June
	tests := []struct {
		name     string
		daily    string
		facts    domain.DeviceFacts
		now      time.Time
		open     bool
		nextOpen time.Time
	}{
		{"inside", "02:00-04:00", domain.DeviceFacts{}, day(3, 0), true, time.Time{}},
		{"start is inside", "02:00-04:00", domain.DeviceFacts{}, day(2, 0), true, time.Time{}},
		{"end is outside", "02:00-04:00", domain.DeviceFacts{}, day(4, 0), false, day(2, 0).Add(24 * time.Hour)},
		{"before, opens today", "02:00-04:00", domain.DeviceFacts{}, day(1, 30), false, day(2, 0)},
		{"across midnight, late", "22:00-02:00", domain.DeviceFacts{}, day(23, 0), true, time.Time{}},
		{"across midnight, early", "22:00-02:00", domain.DeviceFacts{}, day(1, 0), true, time.Time{}},
		{"across midnight, outside", "22:00-02:00", domain.DeviceFacts{}, day(12, 0), false, day(22, 0)},
		{"device time zone", "02:00-04:00", berlin, day(1, 0), true, time.Time{}},
		{"device time zone, outside", "02:00-04:00", berlin, day(3, 0), false, day(0, 0).Add(24 * time.Hour)},
		{"unknown device zone falls back", "02:00-04:00", domain.DeviceFacts{Attributes: map[string]string{"timezone": "Nowhere/Else"}}, day(3, 0), true, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := domain.ParseWindow(tt.daily, "")
			if err != nil {
				t.Fatal(err)
			}
			open, next := w.Open(tt.now, tt.facts)
			if open != tt.open || !next.Equal(tt.nextOpen) {
				t.Fatalf("Open = %v, %s; want %v, %s", open, next, tt.open, tt.nextOpen)
			}
		})
	}
}

// Schedule rules S1–S3 at the check: before starts_at and outside the
// window nothing is offered and the plan says when to come back; a task
// already handed out is kept when the window closes.
func TestPlanCheckSchedule(t *testing.T) {
	now := time.Date(2025, 6, 10, 12, 0, 0, 0, time.UTC)
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	d := mustDevice(t, "cam-0001", "cam-x1", "1.0.0")
	later := now.Add(time.Hour)
	tests := []struct {
		name  string
		spec  domain.RolloutSpec
		want  domain.CheckAction
		retry time.Time
	}{
		{"no schedule", domain.RolloutSpec{Percentage: 100}, domain.CheckCreate, time.Time{}},
		{"not started", domain.RolloutSpec{Percentage: 100, StartsAt: &later}, domain.CheckNoUpdate, later},
		{"started", domain.RolloutSpec{Percentage: 100, StartsAt: &now}, domain.CheckCreate, time.Time{}},
		{"window closed", domain.RolloutSpec{Percentage: 100, Window: &domain.WindowSpec{Daily: "14:00-15:00"}}, domain.CheckNoUpdate, now.Add(2 * time.Hour)},
		{"window open", domain.RolloutSpec{Percentage: 100, Window: &domain.WindowSpec{Daily: "11:30-12:30"}}, domain.CheckCreate, time.Time{}},
		{"window in the rollout's zone", domain.RolloutSpec{Percentage: 100, Window: &domain.WindowSpec{Daily: "14:00-15:00", TimeZone: "Europe/Berlin"}}, domain.CheckCreate, time.Time{}},
		{"outside the bucket, no retry", domain.RolloutSpec{Percentage: 0, Window: &domain.WindowSpec{Daily: "14:00-15:00"}}, domain.CheckNoUpdate, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRollout(t, rolloutA, fw, tt.spec, now.Add(-time.Hour))
			p := domain.PlanCheck(domain.CheckInput{Device: d, Reported: domain.MustParseVersion("1.0.0"), Offers: []domain.Offer{{Firmware: fw, Rollout: r}}, Now: now})
			if p.Action != tt.want || !p.RetryAt.Equal(tt.retry) {
				t.Fatalf("plan %s retry %s, want %s retry %s", p.Action, p.RetryAt, tt.want, tt.retry)
			}
			wantHint := 3 * time.Hour
			if !tt.retry.IsZero() {
				wantHint = tt.retry.Sub(now)
			}
			if got := p.PollAfter(now, 3*time.Hour); got != wantHint {
				t.Fatalf("poll hint %s, want %s", got, wantHint)
			}
			if got := p.PollAfter(now, 30*time.Minute); !tt.retry.IsZero() && got != 30*time.Minute {
				t.Fatalf("a sooner usual interval wins: %s", got)
			}
		})
	}
	// A task handed out in the window is kept when it closes.
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100, Window: &domain.WindowSpec{Daily: "11:00-12:00"}}, now.Add(-2*time.Hour))
	task, err := domain.NewTask(asUUID("5c0c6f3e-4a5b-4c53-9d3e-4f1d7f9e0a11"), asDeviceID("cam-0001"), domain.Offer{Firmware: fw, Rollout: r}, 1, now.Add(-30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	p := domain.PlanCheck(domain.CheckInput{Device: d, Reported: domain.MustParseVersion("1.0.0"),
		Active: &domain.ActiveTask{Task: task, Firmware: fw, Rollout: r}, Offers: []domain.Offer{{Firmware: fw, Rollout: r}}, Now: now})
	if p.Action != domain.CheckKeep || p.Ended != nil || p.PollAfter(now, time.Hour) != time.Hour {
		t.Fatalf("closed window: %s ended=%v, want keep", p.Action, p.Ended != nil)
	}
}

// Stuck-task rule K1: a task without an event for longer than the
// rollout's timeout fails TIMED_OUT at the check, counts as an attempt, and
// a late event on it is refused as finished.
func TestPlanCheckTimesOutStuckTasks(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	hour := time.Hour
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100, TaskTimeout: &hour, MaxAttempts: intp(2)}, t0)
	d := mustDevice(t, "cam-0001", "cam-x1", "1.0.0")
	offers := []domain.Offer{{Firmware: fw, Rollout: r}}
	for _, st := range []domain.TaskStatus{domain.TaskPending, domain.TaskDownloading, domain.TaskInstalling} {
		task := domain.RehydrateTask(domain.TaskRecord{ID: "5c0c6f3e-4a5b-4c53-9d3e-4f1d7f9e0a11", DeviceID: "cam-0001", FirmwareID: idOf("fw-2").String(),
			RolloutID: rolloutA, Status: st, Attempt: 1, CreatedAt: t0, UpdatedAt: t0})
		active := &domain.ActiveTask{Task: task, Firmware: fw, Rollout: r}
		for _, quiet := range []time.Duration{59 * time.Minute, hour} { // "longer than": not yet at exactly the timeout
			p := domain.PlanCheck(domain.CheckInput{Device: d, Reported: domain.MustParseVersion("1.0.0"), Active: active, Offers: offers, Now: t0.Add(quiet)})
			if p.Ended != nil || p.Action != domain.CheckReuse {
				t.Fatalf("%s %v after its last event: %s ended=%v", st, quiet, p.Action, p.Ended != nil)
			}
		}
		p := domain.PlanCheck(domain.CheckInput{Device: d, Reported: domain.MustParseVersion("1.0.0"), Active: active, Offers: offers, Now: t0.Add(61 * time.Minute)})
		if p.Ended == nil || p.Ended.Status() != domain.TaskFailed || p.Ended.ErrorCode() != domain.CodeTimedOut {
			t.Fatalf("%s after the timeout: %+v", st, p)
		}
		if p.Action != domain.CheckCreate || p.Attempt != 2 {
			t.Fatalf("%s: after the timeout want a second attempt, got %s attempt %d", st, p.Action, p.Attempt)
		}
		ended := *p.Ended
		if _, err := ended.ApplyEvent(mustEvent(t, "late", "downloading", nil, "", ""), nil, t0.Add(2*time.Hour)); err == nil {
			t.Fatalf("%s: a late event on a timed-out task was accepted", st)
		}
		// With max_attempts reached, the timeout still fails the task but no new one is made.
		p = domain.PlanCheck(domain.CheckInput{Device: d, Reported: domain.MustParseVersion("1.0.0"), Active: active, Offers: offers,
			Failed: byLabel(map[string]int{"fw-2": 1}), Now: t0.Add(61 * time.Minute)})
		if p.Ended == nil || p.Ended.ErrorCode() != domain.CodeTimedOut || p.Action != domain.CheckNoUpdate {
			t.Fatalf("%s at max attempts: %s, ended %+v", st, p.Action, p.Ended)
		}
	}
}

// A withdrawn pending task is cancelled, not timed out, however old: a
// cancel is no attempt.
func TestSettleCancelsBeforeTimingOut(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100}, t0)
	if err := r.ChangeStatus(domain.RolloutCancelled, fw, t0); err != nil {
		t.Fatal(err)
	}
	task := domain.RehydrateTask(domain.TaskRecord{ID: "5c0c6f3e-4a5b-4c53-9d3e-4f1d7f9e0a11", DeviceID: "cam-0001", FirmwareID: idOf("fw-2").String(),
		RolloutID: rolloutA, Status: domain.TaskPending, Attempt: 1, CreatedAt: t0, UpdatedAt: t0})
	if !task.Settle(domain.MustParseVersion("1.0.0"), fw, r, domain.DeviceFacts{}, t0.Add(48*time.Hour)) || task.Status() != domain.TaskCancelled || task.ErrorCode() != domain.CodeRolloutCancelled {
		t.Fatalf("got %s %s, want cancelled ROLLOUT_CANCELLED", task.Status(), task.ErrorCode())
	}
}

// Schedule rules S2–S3 on the days the clock changes: a window's day runs
// from the first instant the clock reads its start to the first it then
// reads its end. Spring forward: a start in the skipped hour opens at the
// jump, a window wholly inside it does not open that day. Fall back: a
// start in the repeated hour opens at its first reading and stays open
// through the repeat. Both Open and the next opening (the come-back hint)
// follow it, in the window's zone and in the device's.
func TestWindowOpenAcrossDSTChanges(t *testing.T) {
	utc := func(mo time.Month, d, h, m int) time.Time { return time.Date(2026, mo, d, h, m, 0, 0, time.UTC) }
	newYork := domain.DeviceFacts{Attributes: map[string]string{"timezone": "America/New_York"}}
	// Europe/Berlin 2026: 29 March 01:00 UTC 02:00 CET → 03:00 CEST;
	// 25 October 01:00 UTC 03:00 CEST → 02:00 CET.
	// America/New_York 2026: 8 March 07:00 UTC 02:00 EST → 03:00 EDT;
	// 1 November 06:00 UTC 02:00 EDT → 01:00 EST.
	tests := []struct {
		name, daily, zone string
		facts             domain.DeviceFacts
		now               time.Time
		open              bool
		next              time.Time
	}{
		{"Berlin spring, start skipped, opens at the jump", "02:30-04:00", "Europe/Berlin", domain.DeviceFacts{}, utc(3, 29, 0, 0), false, utc(3, 29, 1, 0)},
		{"Berlin spring, start skipped, open after the jump", "02:30-04:00", "Europe/Berlin", domain.DeviceFacts{}, utc(3, 29, 1, 15), true, time.Time{}},
		{"Berlin spring, window wholly skipped", "02:00-03:00", "Europe/Berlin", domain.DeviceFacts{}, utc(3, 29, 0, 0), false, utc(3, 30, 0, 0)},
		{"Berlin spring, inside the skipped hour", "02:15-02:45", "Europe/Berlin", domain.DeviceFacts{}, utc(3, 29, 0, 30), false, utc(3, 30, 0, 15)},
		{"Berlin spring, end skipped, closes at the jump", "23:00-02:30", "Europe/Berlin", domain.DeviceFacts{}, utc(3, 29, 1, 0), false, utc(3, 29, 21, 0)},
		{"Berlin spring, end skipped, open before the jump", "23:00-02:30", "Europe/Berlin", domain.DeviceFacts{}, utc(3, 29, 0, 59), true, time.Time{}},
		{"Berlin fall, start repeated, first reading", "02:30-04:00", "Europe/Berlin", domain.DeviceFacts{}, utc(10, 24, 23, 0), false, utc(10, 25, 0, 30)},
		{"Berlin fall, open through the repeat", "02:30-04:00", "Europe/Berlin", domain.DeviceFacts{}, utc(10, 25, 1, 10), true, time.Time{}},
		{"Berlin fall, ended at the first reading of its end", "02:00-02:30", "Europe/Berlin", domain.DeviceFacts{}, utc(10, 25, 1, 15), false, utc(10, 26, 1, 0)},
		{"New York spring, start skipped, opens at the jump", "02:30-04:00", "", newYork, utc(3, 8, 5, 0), false, utc(3, 8, 7, 0)},
		{"New York spring, just before the jump", "02:30-04:00", "", newYork, utc(3, 8, 6, 45), false, utc(3, 8, 7, 0)},
		{"New York fall, start repeated, first reading", "01:30-03:00", "", newYork, utc(11, 1, 4, 0), false, utc(11, 1, 5, 30)},
		{"New York fall, open through the repeat", "01:30-03:00", "", newYork, utc(11, 1, 6, 10), true, time.Time{}},
		{"New York fall, closed after its end", "01:30-03:00", "", newYork, utc(11, 1, 8, 0), false, utc(11, 2, 6, 30)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := domain.ParseWindow(tt.daily, tt.zone)
			if err != nil {
				t.Fatal(err)
			}
			open, next := w.Open(tt.now, tt.facts)
			if open != tt.open || !next.Equal(tt.next) {
				t.Fatalf("Open(%s) = %v, %s; want %v, %s", tt.now, open, next, tt.open, tt.next)
			}
		})
	}
}

// Stuck-task rule K1 counts from the task's last change, not its
// creation: an event resets the clock.
func TestSettleTimesOutFromTheLastEventNotCreation(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	hour := time.Hour
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100, TaskTimeout: &hour}, t0)
	for _, tc := range []struct {
		at       time.Duration // after creation
		timedOut bool
	}{{61 * time.Minute, false}, {110 * time.Minute, false}, {111 * time.Minute, true}} {
		task := domain.RehydrateTask(domain.TaskRecord{ID: "5c0c6f3e-4a5b-4c53-9d3e-4f1d7f9e0a11", DeviceID: "cam-0001", FirmwareID: idOf("fw-2").String(),
			RolloutID: rolloutA, Status: domain.TaskDownloading, Attempt: 1, CreatedAt: t0, UpdatedAt: t0.Add(50 * time.Minute)})
		changed := task.Settle(domain.MustParseVersion("1.0.0"), fw, r, domain.DeviceFacts{}, t0.Add(tc.at))
		if got := changed && task.ErrorCode() == domain.CodeTimedOut; got != tc.timedOut {
			t.Fatalf("%s after creation, 50m after the last event: timed out %v, want %v", tc.at, got, tc.timedOut)
		}
	}
}

// Stuck-task rule K1 with a schedule: a task's time-out runs only while its
// rollout offers updates to the device — after starts_at, inside the window
// read in the device's zone. A device told to wait (DDI "skip" outside the
// window) is not idle, and must not be failed TIMED_OUT at its next poll.
func TestSettleTimeOutRunsOnlyWhileTheScheduleIsOpen(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	d := mustDevice(t, "cam-0001", "cam-x1", "1.0.0")
	hour := time.Hour
	day := func(dd, h, m int) time.Time { return time.Date(2026, 1, dd, h, m, 0, 0, time.UTC) }
	windowed := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100, TaskTimeout: &hour,
		Window: &domain.WindowSpec{Daily: "02:00-04:00"}}, day(1, 0, 0))
	later := day(5, 12, 0)
	starting := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100, TaskTimeout: &hour, StartsAt: &later}, day(1, 0, 0))
	newYork := domain.DeviceFacts{Attributes: map[string]string{"timezone": "America/New_York"}} // UTC-5 in January
	tests := []struct {
		name      string
		r         domain.Rollout
		facts     domain.DeviceFacts
		last, now time.Time
		timedOut  bool
	}{
		{"window closed since: 30m open", windowed, domain.DeviceFacts{}, day(5, 3, 30), day(5, 5, 0), false},
		{"next window, 50m open in all", windowed, domain.DeviceFacts{}, day(5, 3, 30), day(6, 2, 20), false},
		{"next window, 61m open in all", windowed, domain.DeviceFacts{}, day(5, 3, 30), day(6, 2, 31), true},
		{"days later, window closed", windowed, domain.DeviceFacts{}, day(5, 3, 30), day(6, 12, 0), true},
		{"in the device's zone, 50m open", windowed, newYork, day(5, 8, 30), day(6, 7, 20), false},
		{"in the device's zone, 65m open", windowed, newYork, day(5, 8, 30), day(6, 7, 35), true},
		{"before starts_at", starting, domain.DeviceFacts{}, day(5, 9, 0), day(5, 12, 30), false},
		{"an hour past starts_at", starting, domain.DeviceFacts{}, day(5, 9, 0), day(5, 13, 1), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := domain.RehydrateTask(domain.TaskRecord{ID: "5c0c6f3e-4a5b-4c53-9d3e-4f1d7f9e0a11", DeviceID: "cam-0001", FirmwareID: idOf("fw-2").String(),
				RolloutID: rolloutA, Status: domain.TaskPending, Attempt: 1, CreatedAt: tt.last, UpdatedAt: tt.last})
			// Through the check, so that the device's facts reach the rule.
			p := domain.PlanCheck(domain.CheckInput{Device: d, Reported: domain.MustParseVersion("1.0.0"), Facts: tt.facts,
				Active: &domain.ActiveTask{Task: task, Firmware: fw, Rollout: tt.r}, Now: tt.now})
			got := p.Ended != nil && p.Ended.ErrorCode() == domain.CodeTimedOut
			if got != tt.timedOut {
				t.Fatalf("timed out %v, want %v (plan %s)", got, tt.timedOut, p.Action)
			}
		})
	}
}

// Schedule rule S3 on the days the clock changes: the come-back hint of a
// check kept out by the window is the window's real next opening — at the
// jump when its start is skipped, at the first reading when repeated.
func TestPlanCheckComeBackHintAcrossDSTChanges(t *testing.T) {
	fw := mustFirmware(t, "fw-2", "cam-x1", "2.0.0", "")
	d := mustDevice(t, "cam-0001", "cam-x1", "1.0.0")
	berlin := domain.DeviceFacts{Attributes: map[string]string{"timezone": "Europe/Berlin"}}
	for _, tc := range []struct {
		name string
		now  time.Time
		hint time.Duration
	}{
		{"spring forward: 02:30 is skipped, opens at 03:00 CEST", time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), time.Hour},
		{"fall back: 02:30 CEST, the first reading", time.Date(2026, 10, 24, 23, 0, 0, 0, time.UTC), 90 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100, Window: &domain.WindowSpec{Daily: "02:30-04:00"}}, tc.now.Add(-time.Hour))
			p := domain.PlanCheck(domain.CheckInput{Device: d, Reported: domain.MustParseVersion("1.0.0"), Facts: berlin,
				Offers: []domain.Offer{{Firmware: fw, Rollout: r}}, Now: tc.now})
			if p.Action != domain.CheckNoUpdate || p.PollAfter(tc.now, 6*time.Hour) != tc.hint {
				t.Fatalf("plan %s, hint %s; want no update, come back in %s", p.Action, p.PollAfter(tc.now, 6*time.Hour), tc.hint)
			}
		})
	}
}
