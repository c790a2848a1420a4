package domain_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

func newTaskFor(t *testing.T) (domain.Task, domain.Rollout) {
	t.Helper()
	fw := mustFirmware(t, "fw", "cam-x1", "1.2.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100}, t0)
	task, err := domain.NewTask(idOf("task"), asDeviceID("cam-1"), domain.Offer{Firmware: fw, Rollout: r}, 1, t0)
	if err != nil {
		t.Fatal(err)
	}
	return task, r
}

func payloadOf(t *testing.T, a domain.Announcement) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.Payload(), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A task's end is announced once, with its type; a change that does not
// end it announces nothing.
func TestTaskAnnouncement(t *testing.T) {
	pending, _ := newTaskFor(t)
	if _, ok, err := domain.TaskAnnouncement(pending, pending); ok || err != nil {
		t.Errorf("an unchanged task announced: %v %v", ok, err)
	}
	cases := map[domain.EventType]func(*domain.Task) error{
		domain.EventTaskSucceeded: func(x *domain.Task) error { return x.Succeed(t1) },
		domain.EventTaskCancelled: func(x *domain.Task) error { return x.Cancel("ROLLOUT_CANCELLED", "cancelled", t1) },
		domain.EventTaskFailed: func(x *domain.Task) error {
			_, err := x.ApplyEvent(mustEvent(t, "e1", "failed", nil, "DOWNLOAD_FAILED", "no space"), nil, t1)
			return err
		},
	}
	for want, change := range cases {
		ended := pending
		if err := change(&ended); err != nil {
			t.Fatal(err)
		}
		a, ok, err := domain.TaskAnnouncement(pending, ended)
		if err != nil || !ok || a.Type() != want {
			t.Errorf("%s: announced %v %q %v", want, ok, a.Type(), err)
			continue
		}
		p := payloadOf(t, a)
		if p["task_id"] != ended.ID().String() || p["device_id"] != "cam-1" || p["rollout_id"] != ended.RolloutID().String() ||
			p["firmware_id"] != ended.FirmwareID().String() || p["attempt"] != float64(1) {
			t.Errorf("%s: payload %v", want, p)
		}
		if (want == domain.EventTaskSucceeded) == (p["error_code"] != nil) {
			t.Errorf("%s: error_code %v", want, p["error_code"])
		}
		if _, again, _ := domain.TaskAnnouncement(ended, ended); again {
			t.Errorf("%s announced a second time", want)
		}
	}
}

// A task failed by its rollout's timeout is announced as timed out.
func TestTaskTimeOutAnnounced(t *testing.T) {
	pending, r := newTaskFor(t)
	ended := pending
	if !ended.Settle(domain.Version{}, domain.Firmware{}, r, domain.DeviceFacts{}, t0.Add(domain.DefaultTaskTimeout+time.Hour)) {
		t.Fatal("the task did not time out")
	}
	a, ok, err := domain.TaskAnnouncement(pending, ended)
	if err != nil || !ok || a.Type() != domain.EventTaskTimedOut || payloadOf(t, a)["error_code"] != domain.CodeTimedOut {
		t.Errorf("timed out: %v %q %v", ok, a.Type(), err)
	}
}

// An operator's pause, a resume, a cancel and the last stage are each
// announced; a percentage change below 100 % is not.
func TestRolloutAnnouncements(t *testing.T) {
	fw := mustFirmware(t, "fw", "cam-x1", "1.2.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 10}, t0)
	types := func(before, after domain.Rollout) []domain.EventType {
		t.Helper()
		as, err := domain.RolloutAnnouncements(before, after, t1)
		if err != nil {
			t.Fatal(err)
		}
		var out []domain.EventType
		for _, a := range as {
			out = append(out, a.Type())
		}
		return out
	}
	wider := r
	if err := wider.SetPercentage(50, t1); err != nil {
		t.Fatal(err)
	}
	if got := types(r, wider); len(got) != 0 {
		t.Errorf("widening to 50%% announced %v", got)
	}
	paused := r
	if err := paused.ChangeStatus(domain.RolloutPaused, fw, t1); err != nil {
		t.Fatal(err)
	}
	if got := types(r, paused); len(got) != 1 || got[0] != domain.EventRolloutPaused {
		t.Errorf("pause announced %v", got)
	}
	as, _ := domain.RolloutAnnouncements(r, paused, t1)
	if reason := payloadOf(t, as[0])["reason"]; reason != "operator" {
		t.Errorf("an operator's pause says reason %v", reason)
	}
	resumed := paused
	if err := resumed.ChangeStatus(domain.RolloutActive, fw, t1); err != nil {
		t.Fatal(err)
	}
	if got := types(paused, resumed); len(got) != 1 || got[0] != domain.EventRolloutResumed {
		t.Errorf("resume announced %v", got)
	}
	full := r
	if err := full.SetPercentage(100, t1); err != nil {
		t.Fatal(err)
	}
	if got := types(r, full); len(got) != 1 || got[0] != domain.EventRolloutCompleted {
		t.Errorf("reaching 100%% announced %v", got)
	}
	cancelled := r
	if err := cancelled.ChangeStatus(domain.RolloutCancelled, fw, t1); err != nil {
		t.Fatal(err)
	}
	if got := types(r, cancelled); len(got) != 1 || got[0] != domain.EventRolloutCancelled {
		t.Errorf("cancel announced %v", got)
	}
}

func TestParseEventType(t *testing.T) {
	for _, et := range append(domain.EventTypes(), domain.EventTest) {
		if got, err := domain.ParseEventType(string(et)); err != nil || got != et {
			t.Errorf("%s: %v %v", et, got, err)
		}
	}
	if _, err := domain.ParseEventType("task.exploded"); err == nil {
		t.Error("an unknown type parsed")
	}
}

// A staged rollout announces each stage it advances to, and completes
// when it reaches its last stage, not before.
func TestStagedRolloutAnnouncesCompletion(t *testing.T) {
	fw := mustFirmware(t, "fw", "cam-x1", "1.2.0", "")
	gate := func(p int) domain.StageRequest {
		return domain.StageRequest{Percentage: intp(p), MinFinished: intp(1), SuccessPercent: intp(0)}
	}
	r := mustRollout(t, rolloutC, fw, domain.RolloutSpec{Stages: []domain.StageRequest{gate(10), gate(50), {Percentage: intp(100)}}}, t0)
	want := [][]domain.EventType{
		{domain.EventRolloutStageAdvanced},
		{domain.EventRolloutStageAdvanced, domain.EventRolloutCompleted},
	}
	at := t1
	for i, w := range want {
		before := r
		for r.Stage() == before.Stage() {
			if !r.Evaluate(domain.TaskStats{}, domain.TaskStats{Succeeded: 1}, at) {
				t.Fatalf("stage %d: the gate holds and nothing changed", r.Stage())
			}
			at = at.Add(time.Second)
		}
		as, err := domain.RolloutAnnouncements(before, r, at)
		if err != nil {
			t.Fatal(err)
		}
		var got []domain.EventType
		for _, a := range as {
			got = append(got, a.Type())
		}
		if !slices.Equal(got, w) {
			t.Errorf("advance %d to stage %d announced %v, want %v", i+1, r.Stage(), got, w)
		}
	}
}
