package testenv

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// op builds a recorded operation of client c over [call, ret], with the
// times History.Record gives it.
func op(c int, call, ret int64, in LinInput, out LinOutput) porcupine.Operation {
	in.Call, out.Returned = call, ret
	return porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret}
}

// nth is out with the attempt the service gives the task it hands out.
func nth(out LinOutput, attempt int) LinOutput {
	out.Attempt = attempt
	return out
}

func check(dev string) LinInput { return LinInput{Kind: "check", Device: dev} }

func event(dev, task, id, status string, progress int) LinInput {
	return LinInput{Kind: "event", Device: dev, TaskID: task, EventID: id, Status: status, Progress: progress}
}

func got(task, status string, progress int) LinOutput {
	return gotFw(task, "2.0.0", status, progress)
}

func gotFw(task, fw, status string, progress int) LinOutput {
	return LinOutput{Outcome: "ok", TaskID: task, Firmware: fw, Status: status, Progress: progress}
}

// rollout is version's rollout set to status by the operator (client 9).
func rollout(call, ret int64, version, status string) porcupine.Operation {
	return op(9, call, ret, LinInput{Kind: "rollout", Firmware: version, Status: status}, LinOutput{Outcome: "ok", Status: status})
}

// The model must reject the bugs the service guards against and accept
// what concurrency and lost answers allow: each case is a history a real
// run could record.
func TestLinModel(t *testing.T) {
	busy, unknown := LinOutput{Outcome: "busy"}, LinOutput{Outcome: "unknown"}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"a check after a success reverts it: tasks until max_attempts, then none", revertedInstalls(LinOutput{Outcome: "none"}), porcupine.Ok},
		{"a task past max_attempts of reverted installs", revertedInstalls(got("t4", "pending", 0)), porcupine.Illegal},
		{"a check read before a success contradicts nothing: no update", []porcupine.Operation{
			op(0, 0, 1, check("d"), got("t1", "pending", 0)),
			op(0, 2, 3, event("d", "t1", "e1", "succeeded", 100), got("t1", "succeeded", 100)),
			op(1, 1, 10, check("d"), LinOutput{Outcome: "none"}),
		}, porcupine.Ok},
		{"a check called after the success returned answers as if it had read before it", []porcupine.Operation{
			op(0, 0, 1, check("d"), got("t1", "pending", 0)),
			op(0, 2, 3, event("d", "t1", "e1", "succeeded", 100), got("t1", "succeeded", 100)),
			op(1, 4, 10, check("d"), LinOutput{Outcome: "none"}),
		}, porcupine.Illegal},
		{"a check whose success's answer was lost may have read before it", []porcupine.Operation{
			op(0, 0, 1, check("d"), got("t1", "pending", 0)),
			op(0, 2, 11, event("d", "t1", "e1", "succeeded", 100), unknown), // open to the end, as History.operations leaves it
			op(1, 4, 10, check("d"), LinOutput{Outcome: "none"}),
		}, porcupine.Ok},
		{"the retry of a reverted install is attempt 2", []porcupine.Operation{
			op(0, 0, 1, check("d"), nth(got("t1", "pending", 0), 1)),
			op(0, 2, 3, event("d", "t1", "e1", "succeeded", 100), got("t1", "succeeded", 100)),
			op(1, 4, 10, check("d"), nth(got("t2", "pending", 0), 2)),
			op(1, 11, 12, check("d"), nth(got("t2", "pending", 0), 2)),
		}, porcupine.Ok},
		{"the retry of a reverted install as attempt 1", []porcupine.Operation{
			op(0, 0, 1, check("d"), nth(got("t1", "pending", 0), 1)),
			op(0, 2, 3, event("d", "t1", "e1", "succeeded", 100), got("t1", "succeeded", 100)),
			op(1, 4, 10, check("d"), nth(got("t2", "pending", 0), 1)),
		}, porcupine.Illegal},
		{"a task handed out again with another attempt", []porcupine.Operation{
			op(0, 0, 1, check("d"), nth(got("t1", "pending", 0), 1)),
			op(1, 2, 3, check("d"), nth(got("t1", "pending", 0), 2)),
		}, porcupine.Illegal},
		{"a check after a success offers it again as a first attempt", []porcupine.Operation{
			op(0, 0, 1, check("d"), got("t1", "pending", 0)),
			op(0, 2, 3, event("d", "t1", "e1", "succeeded", 100), got("t1", "succeeded", 100)),
			op(1, 4, 10, check("d"), got("t2", "pending", 0)),
			op(0, 11, 12, event("d", "t2", "e2", "failed", 0), got("t2", "failed", 0)),
			op(0, 13, 14, check("d"), got("t3", "pending", 0)),
			op(0, 15, 16, event("d", "t3", "e3", "failed", 0), got("t3", "failed", 0)),
			op(0, 17, 18, check("d"), got("t4", "pending", 0)),
		}, porcupine.Illegal},
		{"concurrent checks share one new task", []porcupine.Operation{
			op(0, 0, 10, check("d"), got("t1", "pending", 0)),
			op(1, 1, 9, check("d"), got("t1", "pending", 0)),
		}, porcupine.Ok},
		{"a second task while the first is active (duplicate)", []porcupine.Operation{
			op(0, 0, 10, check("d"), got("t1", "pending", 0)),
			op(1, 11, 20, check("d"), got("t2", "pending", 0)),
		}, porcupine.Illegal},
		{"concurrent duplicates (two tasks handed out at once)", []porcupine.Operation{
			op(0, 0, 10, check("d"), got("t1", "pending", 0)),
			op(1, 0, 10, check("d"), got("t2", "pending", 0)),
		}, porcupine.Illegal},
		{"a busy check created the task the next one hands out", []porcupine.Operation{
			op(0, 0, 10, check("d"), busy),
			op(1, 11, 20, check("d"), got("t1", "pending", 0)),
			op(1, 21, 30, check("d"), got("t1", "pending", 0)),
		}, porcupine.Ok},
		{"a stale read after an acknowledged event", []porcupine.Operation{
			op(0, 0, 10, check("d"), got("t1", "pending", 0)),
			op(0, 11, 20, event("d", "t1", "e1", "downloading", 50), got("t1", "downloading", 50)),
			op(1, 21, 30, check("d"), got("t1", "pending", 0)),
		}, porcupine.Illegal},
		{"an event applied twice under one id", []porcupine.Operation{
			op(0, 0, 10, check("d"), got("t1", "pending", 0)),
			op(0, 11, 20, event("d", "t1", "e1", "downloading", 50), got("t1", "downloading", 50)),
			op(0, 21, 30, event("d", "t1", "e2", "downloaded", 100), got("t1", "downloaded", 100)),
			op(1, 31, 40, event("d", "t1", "e1", "downloading", 50), LinOutput{Outcome: "error", Code: "INVALID_TRANSITION"}),
		}, porcupine.Illegal},
		{"a repeated event answers the task as it is now", []porcupine.Operation{
			op(0, 0, 10, check("d"), got("t1", "pending", 0)),
			op(0, 11, 20, event("d", "t1", "e1", "downloading", 50), got("t1", "downloading", 50)),
			op(0, 21, 30, event("d", "t1", "e2", "downloaded", 100), got("t1", "downloaded", 100)),
			op(1, 31, 40, event("d", "t1", "e1", "downloading", 50), got("t1", "downloaded", 100)),
		}, porcupine.Ok},
		{"an unanswered event may land after later calls", []porcupine.Operation{
			op(0, 0, 10, check("d"), got("t1", "pending", 0)),
			op(0, 11, 99, event("d", "t1", "e1", "failed", 0), unknown), // open until the end, as History records it
			op(1, 20, 30, check("d"), got("t1", "pending", 0)),
			op(1, 40, 50, event("d", "t1", "e2", "downloading", 10), LinOutput{Outcome: "error", Code: "TASK_FINISHED"}),
		}, porcupine.Ok},
		{"no update while the rollout is active and nothing failed", []porcupine.Operation{
			op(0, 0, 10, check("d"), LinOutput{Outcome: "none"}),
		}, porcupine.Illegal},
		{"no update once paused, a task once resumed", []porcupine.Operation{
			rollout(0, 10, "2.0.0", "paused"),
			op(0, 11, 20, check("d"), LinOutput{Outcome: "none"}),
			rollout(21, 30, "2.0.0", "active"),
			op(0, 31, 40, check("d"), got("t1", "pending", 0)),
		}, porcupine.Ok},
		{"a task created after the pause returned", []porcupine.Operation{
			rollout(0, 10, "2.0.0", "paused"),
			op(0, 11, 20, check("d"), got("t1", "pending", 0)),
		}, porcupine.Illegal},
		{"an event id reused with another body", []porcupine.Operation{
			op(0, 0, 10, check("d"), got("t1", "pending", 0)),
			op(0, 11, 20, event("d", "t1", "e1", "downloading", 10), got("t1", "downloading", 10)),
			op(0, 21, 30, event("d", "t1", "e1", "downloading", 50), LinOutput{Outcome: "error", Code: "IDEMPOTENCY_CONFLICT"}),
		}, porcupine.Ok},
		{"an event id reused with another body, applied", []porcupine.Operation{
			op(0, 0, 10, check("d"), got("t1", "pending", 0)),
			op(0, 11, 20, event("d", "t1", "e1", "downloading", 10), got("t1", "downloading", 10)),
			op(0, 21, 30, event("d", "t1", "e1", "downloading", 50), got("t1", "downloading", 50)),
		}, porcupine.Illegal},
		{"a newer version supersedes a pending task", []porcupine.Operation{
			op(0, 0, 10, check("d"), got("t1", "pending", 0)),
			rollout(11, 20, "3.0.0", "active"),
			op(0, 21, 30, check("d"), gotFw("t2", "3.0.0", "pending", 0)),
			op(1, 31, 40, event("d", "t1", "e1", "downloading", 10), LinOutput{Outcome: "error", Code: "TASK_FINISHED"}),
		}, porcupine.Ok},
		{"a pending task kept although a newer version is out", []porcupine.Operation{
			op(0, 0, 10, check("d"), got("t1", "pending", 0)),
			rollout(11, 20, "3.0.0", "active"),
			op(0, 21, 30, check("d"), got("t1", "pending", 0)),
		}, porcupine.Illegal},
		{"a started task is kept when a newer version is out", []porcupine.Operation{
			op(0, 0, 10, check("d"), got("t1", "pending", 0)),
			op(0, 11, 20, event("d", "t1", "e1", "downloading", 10), got("t1", "downloading", 10)),
			rollout(21, 30, "3.0.0", "active"),
			op(0, 31, 40, check("d"), got("t1", "downloading", 10)),
		}, porcupine.Ok},
		{"a pending task kept when only a lower version is offered", []porcupine.Operation{
			rollout(0, 10, "3.0.0", "active"),
			op(0, 11, 20, check("d"), gotFw("t1", "3.0.0", "pending", 0)),
			rollout(21, 30, "3.0.0", "paused"),
			op(0, 31, 40, check("d"), gotFw("t1", "3.0.0", "pending", 0)),
		}, porcupine.Ok},
		{"a pending task is never superseded by a lower version", []porcupine.Operation{
			rollout(0, 10, "3.0.0", "active"),
			op(0, 11, 20, check("d"), gotFw("t1", "3.0.0", "pending", 0)),
			rollout(21, 30, "3.0.0", "paused"),
			op(0, 31, 40, check("d"), got("t2", "pending", 0)),
		}, porcupine.Illegal},
		{"the lower version offered while the higher one is out", []porcupine.Operation{
			rollout(0, 10, "3.0.0", "active"),
			op(0, 11, 20, check("d"), got("t1", "pending", 0)),
		}, porcupine.Illegal},
		{"a 500 is never explained", []porcupine.Operation{
			op(0, 0, 10, check("d"), LinOutput{Outcome: "bad", Detail: "500 INTERNAL"}),
		}, porcupine.Illegal},
		{"a rollout's own max_attempts", []porcupine.Operation{
			op(9, -4, -3, LinInput{Kind: "rollout", Firmware: "2.0.0", Status: "active", MaxAttempts: 1}, LinOutput{Outcome: "ok", Status: "active"}),
			op(0, 0, 1, check("d"), got("t1", "pending", 0)),
			op(0, 2, 3, event("d", "t1", "e1", "failed", 0), got("t1", "failed", 0)),
			op(0, 4, 5, check("d"), LinOutput{Outcome: "none"}),
		}, porcupine.Ok},
		{"after three failures, no task", []porcupine.Operation{
			op(0, 0, 1, check("d"), got("t1", "pending", 0)),
			op(0, 2, 3, event("d", "t1", "e1", "failed", 0), got("t1", "failed", 0)),
			op(0, 4, 5, check("d"), got("t2", "pending", 0)),
			op(0, 6, 7, event("d", "t2", "e1", "failed", 0), got("t2", "failed", 0)),
			op(0, 8, 9, check("d"), got("t3", "pending", 0)),
			op(0, 10, 11, event("d", "t3", "e1", "failed", 0), got("t3", "failed", 0)),
			op(0, 12, 13, check("d"), got("t4", "pending", 0)),
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := append([]porcupine.Operation{rollout(-10, -5, "2.0.0", "active")}, tc.ops...)
			if res := porcupine.CheckOperationsTimeout(LinModel, ops, 0); res != tc.want {
				t.Fatalf("check = %v, want %v", res, tc.want)
			}
		})
	}
}

// An unanswered call may take effect at any time after it was made: the
// history keeps it open until the last return, so a later answer can be
// explained by it.
func TestUnansweredCallStaysOpen(t *testing.T) {
	h := &History{}
	LinRolloutStart(h, 9, "2.0.0", 0, func() error { return nil })
	h.Record(0, check("d"), func() LinOutput { return got("t1", "pending", 0) })
	h.Record(0, event("d", "t1", "e1", "failed", 0), func() LinOutput { return LinOutput{Outcome: "unknown"} })
	h.Record(1, check("d"), func() LinOutput { return got("t1", "pending", 0) })
	h.Record(1, event("d", "t1", "e2", "downloading", 10), func() LinOutput { return LinOutput{Outcome: "error", Code: "TASK_FINISHED"} })
	ops := h.operations()
	if ops[2].Return <= ops[4].Return {
		t.Fatalf("the unanswered call returns at %d, before the last answer (%d)", ops[2].Return, ops[4].Return)
	}
	if res := CheckLinearizable(t, "unanswered", h); res != porcupine.Ok {
		t.Fatalf("check = %v, want the unanswered failure explaining TASK_FINISHED", res)
	}
}

// revertedInstalls is a device that installs 2.0.0 three times, each time
// reporting 1.0.0 again at its next check (event rule 7: a reverted
// install, a failed attempt), then checks once more and gets last.
func revertedInstalls(last LinOutput) []porcupine.Operation {
	var ops []porcupine.Operation
	at := int64(0)
	for i, id := range []string{"t1", "t2", "t3"} {
		ops = append(ops,
			op(0, at, at+1, check("d"), got(id, "pending", 0)),
			op(0, at+2, at+3, event("d", id, "e"+id, "succeeded", 100), got(id, "succeeded", 100)))
		at += 10 * int64(i+1)
	}
	return append(ops, op(0, at, at+1, check("d"), last))
}
