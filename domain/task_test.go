package domain_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

func TestTaskStatusPredicates(t *testing.T) {
	tests := []struct {
		st     domain.TaskStatus
		wire   string
		active bool
	}{
		{domain.TaskPending, "pending", true},
		{domain.TaskDownloading, "downloading", true},
		{domain.TaskDownloaded, "downloaded", true},
		{domain.TaskInstalling, "installing", true},
		{domain.TaskSucceeded, "succeeded", false},
		{domain.TaskFailed, "failed", false},
		{domain.TaskCancelled, "cancelled", false},
	}
	for _, tt := range tests {
		if tt.st.String() != tt.wire {
			t.Errorf("String() = %q, want %q", tt.st, tt.wire)
		}
		if tt.st.IsActive() != tt.active || tt.st.IsFinal() == tt.active {
			t.Errorf("%s: IsActive=%v IsFinal=%v", tt.st, tt.st.IsActive(), tt.st.IsFinal())
		}
		got, err := domain.ParseTaskStatus(tt.wire)
		if err != nil || got != tt.st {
			t.Errorf("ParseTaskStatus(%q) = %v, %v", tt.wire, got, err)
		}
	}
	var zero domain.TaskStatus
	if zero.IsActive() || zero.IsFinal() {
		t.Error("the zero status is neither active nor final")
	}
	for _, bad := range []string{"", "Pending", "done", "active"} {
		_, err := domain.ParseTaskStatus(bad)
		wantValidation(t, err, "status")
	}
	if len(domain.AllTaskStatuses) != 7 || len(domain.ActiveTaskStatuses) != 4 {
		t.Fatalf("status lists: %d all, %d active", len(domain.AllTaskStatuses), len(domain.ActiveTaskStatuses))
	}
	for _, st := range domain.ActiveTaskStatuses {
		if !st.IsActive() {
			t.Errorf("%s listed as active", st)
		}
	}
}

func TestNewTask(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100}, t0)
	tests := []struct {
		name    string
		device  string
		attempt int
		fw      domain.Firmware
		field   string
		err     error
	}{
		{"first attempt", "cam-0001", 1, fw, "", nil},
		{"third attempt", "cam-0001", 3, fw, "", nil},
		{"bad device id", "cam 1", 1, fw, "device_id", nil},
		{"empty device id", "", 1, fw, "device_id", nil},
		{"attempt 0", "cam-0001", 0, fw, "attempt", nil},
		{"attempt negative", "cam-0001", -1, fw, "attempt", nil},
		{"revoked firmware", "cam-0001", 1, revoked(fw), "", domain.ErrFirmwareRevoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task, err := domain.NewTask(asUUID(taskA), asDeviceID(tt.device), domain.Offer{Firmware: tt.fw, Rollout: r}, tt.attempt, t0)
			switch {
			case tt.field != "":
				wantValidation(t, err, tt.field)
				return
			case tt.err != nil:
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			case err != nil:
				t.Fatalf("NewTask: %v", err)
			}
			if task.ID().String() != taskA || task.DeviceID().String() != tt.device || task.FirmwareID() != idOf("fw-1") || task.RolloutID() != idOf(rolloutA) {
				t.Fatalf("ids: %+v", task.Record())
			}
			if task.Status() != domain.TaskPending || task.Progress() != 0 || task.Attempt() != tt.attempt {
				t.Fatalf("status/progress/attempt = %s/%d/%d", task.Status(), task.Progress(), task.Attempt())
			}
			if task.ErrorCode() != "" || task.ErrorMessage() != "" || task.ActionID() != 0 {
				t.Fatalf("new task carries error or action id: %+v", task.Record())
			}
			if !task.CreatedAt().Equal(t0) || task.CreatedAt().Location() != time.UTC || !task.UpdatedAt().Equal(t0) {
				t.Fatalf("timestamps %v %v", task.CreatedAt(), task.UpdatedAt())
			}
		})
	}
}

func TestTaskRecordRoundTrip(t *testing.T) {
	rec := domain.TaskRecord{
		ID: "t", ActionID: 42, DeviceID: "d", FirmwareID: "f", RolloutID: "r", Status: domain.TaskFailed,
		Progress: 12, Attempt: 2, ErrorCode: "E", ErrorMessage: "m", CreatedAt: t0, UpdatedAt: t1,
	}
	want := rec
	want.CreatedAt, want.UpdatedAt = t0.UTC(), t1.UTC() // the same instants, in UTC
	if got := domain.RehydrateTask(rec).Record(); got != want {
		t.Fatalf("round trip: %+v", got)
	}
}

// Rehydrating keeps times as every constructor does, in UTC at
// microseconds: no domain value holds a finer time, so no store truncates.
func TestRehydrateKeepsMicroseconds(t *testing.T) {
	fine := t0.Add(1234 * time.Nanosecond)
	us := t0.Add(time.Microsecond).UTC()
	task := domain.RehydrateTask(domain.TaskRecord{ID: "t", CreatedAt: fine, UpdatedAt: fine})
	dev := domain.RehydrateDevice("d", "m", domain.Version{}, domain.TokenHash{}, fine, fine)
	ro := domain.RehydrateRollout(domain.RolloutRecord{CreatedAt: fine, UpdatedAt: fine, GateMetAt: fine, StartsAt: fine})
	fw, err := domain.RehydrateFirmware("f", domain.FirmwareSpec{Model: "m", Version: "1.0.0"}, domain.FirmwareReleased, fine, fine)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]time.Time{
		"task created": task.CreatedAt(), "task updated": task.UpdatedAt(), "device seen": dev.LastSeenAt(), "device created": dev.CreatedAt(),
		"rollout created": ro.CreatedAt(), "rollout updated": ro.UpdatedAt(), "rollout gate": ro.Record().GateMetAt, "rollout start": ro.Record().StartsAt,
		"firmware created": fw.CreatedAt(), "firmware updated": fw.UpdatedAt(),
		"attributes": domain.RehydrateDeviceAttributes(nil, fine).UpdatedAt(), "log": domain.RehydrateTaskLog("t", nil, fine).UpdatedAt(),
		"cancel": domain.RehydrateCancelNotice(task, fine).ConfirmedAt(), "artifact": domain.RehydrateArtifact("a", "f", domain.ArtifactDigest{}, domain.ArtifactMeta{}, fine).CreatedAt(),
	} {
		if got != us {
			t.Errorf("%s: %v (%v), want %v in UTC", name, got, got.Location(), us)
		}
	}
	if z := domain.RehydrateDevice("d", "m", domain.Version{}, domain.TokenHash{}, time.Time{}, fine).LastSeenAt(); !z.IsZero() {
		t.Errorf("never seen became %v", z)
	}
}

func TestTaskCancel(t *testing.T) {
	for _, st := range domain.AllTaskStatuses {
		t.Run(st.String(), func(t *testing.T) {
			task := taskIn(st, 0)
			before := task.Record()
			err := task.Cancel(domain.CodeSuperseded, "a newer firmware is available", t1)
			if st == domain.TaskPending {
				if err != nil {
					t.Fatalf("Cancel pending: %v", err)
				}
				if task.Status() != domain.TaskCancelled || task.ErrorCode() != "SUPERSEDED" ||
					task.ErrorMessage() != "a newer firmware is available" || !task.UpdatedAt().Equal(t1) {
					t.Fatalf("after Cancel: %+v", task.Record())
				}
				return
			}
			if !errors.Is(err, domain.ErrInvalidTransition) {
				t.Fatalf("Cancel %s = %v, want ErrInvalidTransition", st, err)
			}
			if task.Record() != before {
				t.Fatalf("refused Cancel modified the task: %+v", task.Record())
			}
		})
	}
}

func TestTaskSucceed(t *testing.T) {
	for _, st := range domain.AllTaskStatuses {
		t.Run(st.String(), func(t *testing.T) {
			task := taskIn(st, 35)
			before := task.Record()
			err := task.Succeed(t1)
			if st.IsActive() {
				if err != nil {
					t.Fatalf("Succeed from %s: %v", st, err)
				}
				if task.Status() != domain.TaskSucceeded || task.Progress() != 100 || !task.UpdatedAt().Equal(t1) {
					t.Fatalf("after Succeed: %+v", task.Record())
				}
				return
			}
			if !errors.Is(err, domain.ErrTaskFinished) {
				t.Fatalf("Succeed from %s = %v, want ErrTaskFinished", st, err)
			}
			if task.Record() != before {
				t.Fatal("refused Succeed modified the task")
			}
		})
	}
}

func TestTaskSettle(t *testing.T) {
	tests := []struct {
		name            string
		status          domain.TaskStatus
		fwVersion       string
		reported        string // "" is the zero version
		revoke          bool
		rollout         string // active, paused-manual, cancelled
		changed         bool
		wantStatus      domain.TaskStatus
		wantCode        string
		wantProgress100 bool
	}{
		{"rule 3: pending, device runs the version", domain.TaskPending, "1.2.0", "1.2.0", false, "active", true, domain.TaskSucceeded, "", true},
		{"rule 3: installing, device runs the version", domain.TaskInstalling, "1.2.0", "1.2.0", false, "active", true, domain.TaskSucceeded, "", true},
		{"rule 3: build metadata ignored", domain.TaskDownloaded, "1.2.0+b", "1.2.0+a", false, "active", true, domain.TaskSucceeded, "", true},
		{"rule 3: even if since revoked", domain.TaskInstalling, "1.2.0", "1.2.0", true, "cancelled", true, domain.TaskSucceeded, "", true},
		{"rule 3: prerelease is not the release", domain.TaskDownloading, "1.2.0", "1.2.0-rc.1", false, "active", false, domain.TaskDownloading, "", false},
		{"older version reported: unchanged", domain.TaskDownloading, "1.2.0", "1.1.0", false, "active", false, domain.TaskDownloading, "", false},
		{"no version reported: unchanged", domain.TaskPending, "1.2.0", "", false, "active", false, domain.TaskPending, "", false},
		{"pending + revoked", domain.TaskPending, "1.2.0", "1.1.0", true, "active", true, domain.TaskCancelled, "FIRMWARE_REVOKED", false},
		{"pending + rollout cancelled", domain.TaskPending, "1.2.0", "1.1.0", false, "cancelled", true, domain.TaskCancelled, "ROLLOUT_CANCELLED", false},
		{"pending + rollout paused: unchanged", domain.TaskPending, "1.2.0", "1.1.0", false, "paused-manual", false, domain.TaskPending, "", false},
		{"downloading + revoked: untouched", domain.TaskDownloading, "1.2.0", "1.1.0", true, "active", false, domain.TaskDownloading, "", false},
		{"downloaded + revoked: untouched", domain.TaskDownloaded, "1.2.0", "1.1.0", true, "active", false, domain.TaskDownloaded, "", false},
		{"installing + rollout cancelled: untouched", domain.TaskInstalling, "1.2.0", "1.1.0", false, "cancelled", false, domain.TaskInstalling, "", false},
		{"downloading + revoked + cancelled: untouched", domain.TaskDownloading, "1.2.0", "1.1.0", true, "cancelled", false, domain.TaskDownloading, "", false},
		{"succeeded stays", domain.TaskSucceeded, "1.2.0", "1.2.0", true, "cancelled", false, domain.TaskSucceeded, "", false},
		{"failed stays", domain.TaskFailed, "1.2.0", "1.2.0", false, "active", false, domain.TaskFailed, "", false},
		{"cancelled stays", domain.TaskCancelled, "1.2.0", "1.2.0", true, "cancelled", false, domain.TaskCancelled, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fw := mustFirmware(t, "fw-1", "cam-x1", tt.fwVersion, "")
			r := rolloutIn(t, tt.rollout, fw)
			if tt.revoke {
				fw = revoked(fw)
			}
			var reported domain.Version
			if tt.reported != "" {
				reported = domain.MustParseVersion(tt.reported)
			}
			task := taskIn(tt.status, 30)
			before := task.Record()
			changed := task.Settle(reported, fw, r, domain.DeviceFacts{}, t1)
			if changed != tt.changed {
				t.Fatalf("Settle changed = %v, want %v (task %+v)", changed, tt.changed, task.Record())
			}
			if !changed {
				if task.Record() != before {
					t.Fatalf("Settle reported no change but modified the task: %+v", task.Record())
				}
				return
			}
			if task.Status() != tt.wantStatus || task.ErrorCode() != tt.wantCode {
				t.Fatalf("status/code = %s/%q, want %s/%q", task.Status(), task.ErrorCode(), tt.wantStatus, tt.wantCode)
			}
			if tt.wantProgress100 && task.Progress() != 100 {
				t.Fatalf("succeeded task progress = %d, want 100", task.Progress())
			}
			if !task.UpdatedAt().Equal(t1) {
				t.Fatalf("updatedAt = %v", task.UpdatedAt())
			}
		})
	}
}

type outcome int

const (
	ok   outcome = iota // applied: status moves to the event's
	back                // ErrInvalidTransition
	fin                 // ErrTaskFinished
	same                // nil error, nothing changes
)

func TestApplyEventTransitionMatrix(t *testing.T) {
	to := []string{"downloading", "downloaded", "installing", "succeeded", "failed"}
	// docs/DOMAIN.md event rules 2 and 3, written out for every pair.
	grid := []struct {
		from domain.TaskStatus
		want [5]outcome
	}{
		{domain.TaskPending, [5]outcome{ok, ok, ok, ok, ok}},
		{domain.TaskDownloading, [5]outcome{ok, ok, ok, ok, ok}},
		{domain.TaskDownloaded, [5]outcome{back, ok, ok, ok, ok}},
		{domain.TaskInstalling, [5]outcome{back, back, ok, ok, ok}},
		{domain.TaskSucceeded, [5]outcome{fin, fin, fin, same, fin}},
		{domain.TaskFailed, [5]outcome{fin, fin, fin, fin, same}},
		{domain.TaskCancelled, [5]outcome{fin, fin, fin, fin, fin}},
	}
	for _, row := range grid {
		for i, status := range to {
			want := row.want[i]
			t.Run(row.from.String()+"_to_"+status, func(t *testing.T) {
				task := taskIn(row.from, 40)
				if row.from == domain.TaskSucceeded {
					task = taskIn(row.from, 100)
				}
				before := task.Record()
				ev := mustEvent(t, "ev-new", status, intp(50), "E_CODE", "device said so")
				changed, err := task.ApplyEvent(ev, nil, t1)
				switch want {
				case ok:
					if err != nil || !changed {
						t.Fatalf("ApplyEvent = %v, %v; want applied", changed, err)
					}
					if task.Status().String() != status {
						t.Fatalf("status = %s, want %s", task.Status(), status)
					}
					wantProgress := 50
					if status == "succeeded" {
						wantProgress = 100
					}
					if status != "failed" && task.Progress() != wantProgress {
						t.Fatalf("progress = %d, want %d", task.Progress(), wantProgress)
					}
					if status == "failed" && (task.ErrorCode() != "E_CODE" || task.ErrorMessage() != "device said so") {
						t.Fatalf("failed task error = %q/%q", task.ErrorCode(), task.ErrorMessage())
					}
					if !task.UpdatedAt().Equal(t1) || task.UpdatedAt().Location() != time.UTC {
						t.Fatalf("updatedAt = %v", task.UpdatedAt())
					}
					return
				case back:
					if !errors.Is(err, domain.ErrInvalidTransition) || errors.Is(err, domain.ErrTaskFinished) {
						t.Fatalf("err = %v, want ErrInvalidTransition", err)
					}
				case fin:
					if !errors.Is(err, domain.ErrTaskFinished) || errors.Is(err, domain.ErrInvalidTransition) {
						t.Fatalf("err = %v, want ErrTaskFinished", err)
					}
				case same:
					if err != nil {
						t.Fatalf("repeated final status: err = %v, want nil", err)
					}
				}
				if changed {
					t.Fatal("changed = true on a refused or no-op event")
				}
				if task.Record() != before {
					t.Fatalf("task modified: %+v", task.Record())
				}
			})
		}
	}
}

func TestApplyEventProgress(t *testing.T) {
	tests := []struct {
		name         string
		from         domain.TaskStatus
		fromProgress int
		status       string
		progress     *int
		wantErr      error
		wantProgress int
	}{
		{"within status up", domain.TaskDownloading, 40, "downloading", intp(41), nil, 41},
		{"within status equal", domain.TaskDownloading, 40, "downloading", intp(40), nil, 40},
		{"within status down", domain.TaskDownloading, 40, "downloading", intp(39), domain.ErrInvalidTransition, 40},
		{"within status down to 0", domain.TaskInstalling, 90, "installing", intp(0), domain.ErrInvalidTransition, 90},
		{"within status to 100", domain.TaskDownloaded, 99, "downloaded", intp(100), nil, 100},
		{"within status nil keeps", domain.TaskDownloading, 40, "downloading", nil, nil, 40},
		{"forward nil restarts at 0", domain.TaskDownloading, 40, "downloaded", nil, nil, 0},
		{"forward from pending nil", domain.TaskPending, 0, "downloading", nil, nil, 0},
		{"forward may restart lower", domain.TaskDownloading, 100, "installing", intp(10), nil, 10},
		{"skip steps keeps event progress", domain.TaskPending, 0, "installing", intp(70), nil, 70},
		{"succeeded nil is 100", domain.TaskInstalling, 70, "succeeded", nil, nil, 100},
		{"succeeded 0 is 100", domain.TaskInstalling, 70, "succeeded", intp(0), nil, 100},
		{"succeeded from pending is 100", domain.TaskPending, 0, "succeeded", intp(20), nil, 100},
		{"backward even with higher progress", domain.TaskInstalling, 10, "downloading", intp(100), domain.ErrInvalidTransition, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := taskIn(tt.from, tt.fromProgress)
			ev := mustEvent(t, "ev", tt.status, tt.progress, "", "")
			changed, err := task.ApplyEvent(ev, nil, t1)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || changed {
					t.Fatalf("ApplyEvent = %v, %v; want %v", changed, err, tt.wantErr)
				}
				if task.Status() != tt.from {
					t.Fatalf("status moved to %s on refusal", task.Status())
				}
			} else if err != nil || !changed {
				t.Fatalf("ApplyEvent = %v, %v", changed, err)
			}
			if task.Progress() != tt.wantProgress {
				t.Fatalf("progress = %d, want %d", task.Progress(), tt.wantProgress)
			}
		})
	}
}

func TestApplyEventFailedRecordsDeviceError(t *testing.T) {
	for _, from := range domain.ActiveTaskStatuses {
		t.Run(from.String(), func(t *testing.T) {
			task := taskIn(from, 60)
			ev := mustEvent(t, "ev", "failed", nil, "E_VERIFY", "checksum mismatch")
			changed, err := task.ApplyEvent(ev, nil, t1)
			if err != nil || !changed {
				t.Fatalf("ApplyEvent = %v, %v", changed, err)
			}
			if task.Status() != domain.TaskFailed || task.ErrorCode() != "E_VERIFY" || task.ErrorMessage() != "checksum mismatch" {
				t.Fatalf("after failed: %+v", task.Record())
			}
			// The failed task is final: a later different status is refused.
			_, err = task.ApplyEvent(mustEvent(t, "ev2", "succeeded", nil, "", ""), nil, t1)
			if !errors.Is(err, domain.ErrTaskFinished) {
				t.Fatalf("event after failed = %v, want ErrTaskFinished", err)
			}
		})
	}
}

func TestApplyEventRepeatedFinalStatusChangesNothing(t *testing.T) {
	tests := []struct {
		from domain.TaskStatus
		ev   func(*testing.T) domain.Event
	}{
		{domain.TaskSucceeded, func(t *testing.T) domain.Event { return mustEvent(t, "ev-9", "succeeded", intp(3), "", "") }},
		{domain.TaskFailed, func(t *testing.T) domain.Event {
			return mustEvent(t, "ev-9", "failed", intp(0), "OTHER_CODE", "other words")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.from.String(), func(t *testing.T) {
			task := domain.RehydrateTask(domain.TaskRecord{
				ID: "t", DeviceID: "d", FirmwareID: "f", Status: tt.from, Progress: 100, Attempt: 1,
				ErrorCode: "ORIG", ErrorMessage: "original", UpdatedAt: t0,
			})
			before := task.Record()
			changed, err := task.ApplyEvent(tt.ev(t), nil, t1)
			if err != nil || changed {
				t.Fatalf("ApplyEvent = %v, %v; want false, nil", changed, err)
			}
			if task.Record() != before {
				t.Fatalf("task changed: %+v", task.Record())
			}
		})
	}
}

func TestApplyEventIdempotency(t *testing.T) {
	type tc struct {
		name    string
		from    domain.TaskStatus
		prog    int
		prior   domain.Event
		ev      domain.Event
		wantErr error
	}
	e := func(id, status string, p *int, code, msg string) domain.Event {
		return mustEvent(t, id, status, p, code, msg)
	}
	dl10 := e("ev-1", "downloading", intp(10), "", "")
	tests := []tc{
		{"replay after task moved on", domain.TaskInstalling, 50, dl10, e("ev-1", "downloading", intp(10), "", ""), nil},
		{"replay of current state", domain.TaskDownloading, 10, dl10, e("ev-1", "downloading", intp(10), "", ""), nil},
		{"replay from stored fingerprint", domain.TaskDownloaded, 0, domain.RehydrateEvent("ev-1", dl10.Fingerprint()), e("ev-1", "downloading", intp(10), "", ""), nil},
		{"replay of final event", domain.TaskFailed, 0, e("ev-2", "failed", nil, "E", "m"), e("ev-2", "failed", nil, "E", "m"), nil},
		{"different progress", domain.TaskDownloading, 10, dl10, e("ev-1", "downloading", intp(11), "", ""), domain.ErrIdempotencyConflict},
		{"different status", domain.TaskDownloading, 10, dl10, e("ev-1", "downloaded", intp(10), "", ""), domain.ErrIdempotencyConflict},
		{"nil vs set progress", domain.TaskDownloading, 10, dl10, e("ev-1", "downloading", nil, "", ""), domain.ErrIdempotencyConflict},
		{"different message", domain.TaskFailed, 0, e("ev-2", "failed", nil, "E", "m"), e("ev-2", "failed", nil, "E", "n"), domain.ErrIdempotencyConflict},
		{"stored fingerprint, different body", domain.TaskDownloading, 10, domain.RehydrateEvent("ev-1", dl10.Fingerprint()), e("ev-1", "installing", nil, "", ""), domain.ErrIdempotencyConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := taskIn(tt.from, tt.prog)
			before := task.Record()
			prior := tt.prior
			changed, err := task.ApplyEvent(tt.ev, &prior, t1)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("replay err = %v", err)
			}
			if changed {
				t.Fatal("changed = true for an already-seen event id")
			}
			if task.Record() != before {
				t.Fatalf("task modified: %+v", task.Record())
			}
		})
	}
}

func TestApplyEventOnCancelledTaskNamesTheCode(t *testing.T) {
	task := domain.RehydrateTask(domain.TaskRecord{ID: "t", Status: domain.TaskCancelled, ErrorCode: domain.CodeSuperseded})
	_, err := task.ApplyEvent(mustEvent(t, "e", "downloading", nil, "", ""), nil, t1)
	var te *domain.TransitionError
	if !errors.As(err, &te) || !errors.Is(err, domain.ErrTaskFinished) {
		t.Fatalf("err = %v, want a TransitionError of kind ErrTaskFinished", err)
	}
	if want := fmt.Sprintf("(%s)", domain.CodeSuperseded); !strings.Contains(te.Detail, want) {
		t.Fatalf("detail %q does not say why the task ended", te.Detail)
	}
}

func TestApplyEventFullHappyPath(t *testing.T) {
	task := taskIn(domain.TaskPending, 0)
	steps := []struct {
		status   string
		progress *int
		wantSt   domain.TaskStatus
		wantProg int
	}{
		{"downloading", intp(0), domain.TaskDownloading, 0},
		{"downloading", intp(60), domain.TaskDownloading, 60},
		{"downloading", nil, domain.TaskDownloading, 60},
		{"downloading", intp(100), domain.TaskDownloading, 100},
		{"downloaded", nil, domain.TaskDownloaded, 0},
		{"installing", intp(5), domain.TaskInstalling, 5},
		{"installing", intp(95), domain.TaskInstalling, 95},
		{"succeeded", nil, domain.TaskSucceeded, 100},
	}
	for i, s := range steps {
		changed, err := task.ApplyEvent(mustEvent(t, fmt.Sprintf("ev-%d", i), s.status, s.progress, "", ""), nil, t1)
		if err != nil || !changed {
			t.Fatalf("step %d (%s): %v, %v", i, s.status, changed, err)
		}
		if task.Status() != s.wantSt || task.Progress() != s.wantProg {
			t.Fatalf("step %d: %s/%d, want %s/%d", i, task.Status(), task.Progress(), s.wantSt, s.wantProg)
		}
	}
}

func TestSettleCancelsAPendingDowngrade(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100}, t0)
	for _, tc := range []struct {
		name     string
		started  bool
		reported string
		want     domain.TaskStatus
	}{
		{"pending, device above", false, "1.3.0", domain.TaskCancelled},
		{"pending, device below", false, "1.1.0", domain.TaskPending},
		{"started, device above", true, "1.3.0", domain.TaskDownloading},
	} {
		task, err := domain.NewTask(asUUID("7c9e6679-7425-40de-944b-e07fc1f90ae7"), asDeviceID("dev-1"), domain.Offer{Firmware: fw, Rollout: r}, 1, t0)
		if err != nil {
			t.Fatal(err)
		}
		if tc.started {
			ev, _ := domain.NewEvent("e1", "downloading", nil, "", "")
			if _, err := task.ApplyEvent(ev, nil, t0); err != nil {
				t.Fatal(err)
			}
		}
		task.Settle(domain.MustParseVersion(tc.reported), fw, r, domain.DeviceFacts{}, t0)
		if task.Status() != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, task.Status(), tc.want)
		}
	}
}

// A task's id is typed: the zero UUID (no id) is refused, as a zero device
// id is; a store never sees a task without one.
func TestNewTaskRefusesTheZeroID(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "2.0.0", "")
	r, err := domain.NewRollout(idOf(rolloutA), fw, domain.RolloutSpec{Percentage: 100}, t0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = domain.NewTask(domain.UUID{}, asDeviceID("cam-0001"), domain.Offer{Firmware: fw, Rollout: r}, 1, t0)
	wantValidation(t, err, "id")
}

// Firmware, rollout and auth request ids are typed too: each constructor
// refuses the zero UUID, so a store never sees a row without an id.
func TestNewEntitiesRefuseTheZeroID(t *testing.T) {
	_, err := domain.NewFirmware(domain.UUID{}, validSpec(), t0)
	wantValidation(t, err, "id")
	fw := mustFirmware(t, "fw-1", "cam-x1", "2.0.0", "")
	_, err = domain.NewRollout(domain.UUID{}, fw, domain.RolloutSpec{Percentage: 100}, t0)
	wantValidation(t, err, "id")
}

// A success carries no error code, except the mark that the device had the
// firmware already (which a device's other codes never become).
func TestSucceededKeepsOnlyTheAlreadyInstalledMark(t *testing.T) {
	for code, want := range map[string]string{"": "", "E_VENDOR": "", domain.CodeAlreadyInstalled: domain.CodeAlreadyInstalled} {
		t.Run("code "+code, func(t *testing.T) {
			task := taskIn(domain.TaskInstalling, 70)
			if changed, err := task.ApplyEvent(mustEvent(t, "ev", "succeeded", nil, code, ""), nil, t1); err != nil || !changed {
				t.Fatalf("ApplyEvent = %v, %v", changed, err)
			}
			if task.Status() != domain.TaskSucceeded || task.ErrorCode() != want {
				t.Fatalf("status %s, error code %q; want succeeded with %q", task.Status(), task.ErrorCode(), want)
			}
		})
	}
}
