package testenv

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Linearizability: a History records the calls and returns of device checks,
// device events and rollout changes made against otad processes, with
// wall-clock times, and CheckLinearizable checks it against a sequential
// model of the service with porcupine. The model is per device (the
// history is partitioned by device; rollout changes belong to every
// device's part) and covers firmware versions rolled out to the whole
// fleet (each above the devices' reported version):
//
//   - check: the target is the highest version whose rollout is active and
//     for which the device has failed fewer than its max_attempts tasks. The
//     device's active task is handed out unchanged (same id, firmware,
//     status, progress) when it is for the target, or when it has started,
//     or when there is no target; a pending task for another firmware is
//     cancelled (superseded) and a new pending task for the target, with an
//     id never seen before, handed out; with no active task, one is created
//     for the target, else "no update";
//   - event: applied at most once per (task, event id): a repeat answers
//     the task as it is now, the id with another body IDEMPOTENCY_CONFLICT; status moves forward only (pending, downloading,
//     downloaded, installing, succeeded; failed from any active status),
//     progress never goes down within a status (else INVALID_TRANSITION);
//     on a cancelled task, or another status on a finished one,
//     TASK_FINISHED; the same final status again: 200, nothing changes;
//   - rollout change: starts, pauses or resumes a version's rollout;
//   - a check after the device's last task succeeded (the workloads'
//     devices report the version they started on, below every rollout's)
//     contradicts that success, which is re-marked failed (an attempt)
//     before the check decides, unless the check was called before the
//     success had returned: then its read may predate the success, and it
//     may instead answer as the success left the device (nothing at or
//     below the success's version);
//   - a task handed out carries its attempt: the device's failed tasks of
//     its firmware, plus one, when it was created.
//
// An operation answered 503 SERVICE_BUSY, or not answered at all (timeout,
// connection reset, killed process), may or may not have taken effect: the
// model allows both, and an unanswered one may take effect at any time
// after its call. Anything else (a 500, an unexpected code) is illegal.
//
// A rollout change reaches the other replicas through their catalog caches
// (within about a second): callers keep device operations away from that
// window, so the model can treat the change as atomic.

// LinMaxAttempts is a rollout's max_attempts when its start does not say
// (the product's default).
const LinMaxAttempts = 3

// LinInput is one operation as called.
type LinInput struct {
	Kind     string // "check", "event" or "rollout"
	Call     int64  // when it was called (History.Record sets it)
	Device   string // "" for a rollout change
	TaskID   string // event
	EventID  string // event
	Status   string // event: the reported status; rollout: "active" or "paused"
	Progress int    // event
	Firmware string // rollout: the version rolled out
	// MaxAttempts is a rollout start's max_attempts (0: LinMaxAttempts).
	MaxAttempts int
}

// LinOutput is how an operation returned.
type LinOutput struct {
	// Outcome: "ok" (200 with a task, or the rollout), "none" (200 without
	// an update), "error" (a 4xx with Code), "busy" (503 SERVICE_BUSY),
	// "unknown" (no answer), "bad" (anything else: always illegal).
	Outcome  string
	Code     string
	TaskID   string
	Firmware string // check: the version of the task handed out
	Status   string
	Progress int
	Attempt  int    // check: the attempt of the task handed out (0: not known)
	Detail   string // for the visualisation: what came back
	// Returned is when it returned, or the history's end for no answer:
	// by then it had taken effect, if it did (History sets it).
	Returned int64
}

// History is a concurrent recorder of operations.
type History struct {
	mu  sync.Mutex
	ops []porcupine.Operation
}

// Record runs op as client and records its call and return times.
func (h *History) Record(client int, in LinInput, op func() LinOutput) LinOutput {
	call := time.Now().UnixNano()
	out := op()
	ret := time.Now().UnixNano()
	in.Call, out.Returned = call, ret
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
	return out
}

// Len is the number of operations recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// operations returns the history with every unanswered operation open until
// the end: it may have taken effect at any time after its call.
func (h *History) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := slices.Clone(h.ops)
	end := int64(0)
	for _, op := range ops {
		end = max(end, op.Return)
	}
	for i := range ops {
		if out := ops[i].Output.(LinOutput); out.Outcome == "unknown" {
			ops[i].Return = end + 1
			out.Returned = end + 1
			ops[i].Output = out
		}
	}
	return ops
}

// Counts summarises the outcomes, for logs: "check ok=12 busy=3; event ...".
func (h *History) Counts() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	counts := map[string]int{}
	for _, op := range h.ops {
		o := op.Output.(LinOutput)
		k := op.Input.(LinInput).Kind + " " + o.Outcome
		if o.Firmware != "" {
			k += " " + o.Firmware
		}
		if o.Code != "" {
			k += " " + o.Code
		}
		counts[k]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%d", k, counts[k])
	}
	return b.String()
}

// CheckLinearizable checks h against the model and fails t when no
// sequential order of the operations, consistent with their real-time
// order, explains every answer. It then writes porcupine's visualisation to
// a file that outlives the test and prints its path. It returns the
// porcupine result.
func CheckLinearizable(t testing.TB, name string, h *History) porcupine.CheckResult {
	t.Helper()
	ops := h.operations()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(LinModel, ops, 20*time.Second)
	took := time.Since(start)
	switch res {
	case porcupine.Ok:
		t.Logf("linearizability %s: %d operations (%s) linearizable, checked in %v", name, len(ops), h.Counts(), took.Round(time.Millisecond))
	default:
		path := visualisationPath(name)
		if err := porcupine.VisualizePath(LinModel, info, path); err != nil {
			t.Errorf("linearizability %s: writing the visualisation: %v", name, err)
		}
		if res == porcupine.Illegal {
			t.Errorf("linearizability %s: %d operations (%s): NOT linearizable - no order of the operations explains every answer; visualisation: %s",
				name, len(ops), h.Counts(), path)
			logIllegalPartitions(t, ops)
		} else {
			t.Errorf("linearizability %s: the check of %d operations (%s) did not finish in %v; visualisation: %s", name, len(ops), h.Counts(), took, path)
		}
	}
	return res
}

// logIllegalPartitions logs, for each device whose history alone is not
// linearizable, its operations in call order (times in ms from the first
// call), so that a failure can be read from the test's output.
func logIllegalPartitions(t testing.TB, ops []porcupine.Operation) {
	t.Helper()
	for _, part := range LinModel.Partition(ops) {
		if porcupine.CheckOperations(LinModel, part) {
			continue
		}
		slices.SortFunc(part, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
		var b strings.Builder
		t0 := part[0].Call
		for _, op := range part {
			ret := fmt.Sprintf("%8.1f", float64(op.Return-t0)/1e6)
			if op.Output.(LinOutput).Outcome == "unknown" {
				ret = "       -"
			}
			fmt.Fprintf(&b, "  c%-3d %8.1f %s  %s\n", op.ClientId, float64(op.Call-t0)/1e6, ret,
				LinModel.DescribeOperation(op.Input, op.Output))
		}
		t.Logf("a device whose history is not linearizable (client, call ms, return ms, operation):\n%s", b.String())
	}
}

// visualisationPath is where a failing history's HTML goes: under
// $OTA_TEST_ARTIFACTS when set (CI keeps it), else the system's temp dir.
func visualisationPath(name string) string {
	dir := os.Getenv("OTA_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "ota-linearizability")
	}
	_ = os.MkdirAll(dir, 0o755)
	safe := regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString(name, "_")
	return filepath.Join(dir, fmt.Sprintf("%s-%d.html", safe, time.Now().UnixNano()))
}

// ---- the sequential model ----

// linTask is one task of the device in the model. An ID of "?" is a task
// created by an operation whose answer was lost: its id is learnt from the
// first check that hands it out.
type linTask struct {
	ID       string
	Fw       string
	Status   string
	Progress int
	Attempt  int
	Events   string // applied events as id:status:progress, sorted, ";"-separated
}

// linState is one device's state, plus the rollouts'; immutable. Rollouts
// and Failed are "version=value" lists sorted by version, so that states
// compare as strings.
type linState struct {
	Tasks    []linTask
	Rollouts string // version=active|paused
	Failed   string // version=failed tasks of the device
	Max      string // version=max_attempts, when not LinMaxAttempts
	// SucceededBy is when the last task's success had certainly taken
	// effect (its event's return; 0 while the last task is no success).
	SucceededBy int64
}

var statusOrder = map[string]int{"pending": 0, "downloading": 1, "downloaded": 2, "installing": 3, "succeeded": 4}

func isFinal(s string) bool { return s == "succeeded" || s == "failed" || s == "cancelled" }

func (s linState) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "r=%s f=%s m=%s s=%d", s.Rollouts, s.Failed, s.Max, s.SucceededBy)
	for _, t := range s.Tasks {
		fmt.Fprintf(&b, " [%s %s %s %d #%d %s]", t.ID, t.Fw, t.Status, t.Progress, t.Attempt, t.Events)
	}
	return b.String()
}

func (s linState) active() int {
	if n := len(s.Tasks); n > 0 && !isFinal(s.Tasks[n-1].Status) {
		return n - 1
	}
	return -1
}

func (s linState) fresh(id string) bool {
	if id == "" || id == "?" {
		return false
	}
	return !slices.ContainsFunc(s.Tasks, func(t linTask) bool { return t.ID == id })
}

// target is the version a check offers: the highest one above floor (""
// for none) whose rollout is active and which the device has failed fewer
// than max_attempts times.
func (s linState) target(floor string) string {
	best := ""
	failed, maxes := listMap(s.Failed), listMap(s.Max)
	for v, st := range listMap(s.Rollouts) {
		limit := LinMaxAttempts
		if m, ok := maxes[v]; ok {
			limit = atoi(m)
		}
		if st == "active" && atoi(failed[v]) < limit && (best == "" || versionLess(best, v)) && (floor == "" || versionLess(floor, v)) {
			best = v
		}
	}
	return best
}

// listMap reads a "k=v;k=v" list.
func listMap(list string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(list, ";") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// withKey returns list with k set to v, sorted.
func withKey(list, k, v string) string {
	m := listMap(list)
	m[k] = v
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, key := range keys {
		parts[i] = key + "=" + m[key]
	}
	return strings.Join(parts, ";")
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// versionLess compares dotted numeric versions ("2.0.0" < "10.0.0").
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x = atoi(as[i])
		}
		if i < len(bs) {
			y = atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func (s linState) withTask(i int, t linTask) linState {
	tasks := slices.Clone(s.Tasks)
	if i == len(tasks) {
		tasks = append(tasks, t)
	} else {
		tasks[i] = t
	}
	s.Tasks = tasks
	return s
}

// eventBody is how an applied event is remembered: id and body.
func eventBody(in LinInput) string {
	return fmt.Sprintf("%s:%s:%d", in.EventID, in.Status, in.Progress)
}

// priorEvent returns the body applied under in's event id, if any.
func priorEvent(events string, in LinInput) (string, bool) {
	for _, e := range strings.Split(events, ";") {
		if strings.HasPrefix(e, in.EventID+":") {
			return e, true
		}
	}
	return "", false
}

func addEvent(events, id string) string {
	list := strings.Split(events, ";")
	if events == "" {
		list = nil
	}
	list = append(list, id)
	slices.Sort(list)
	return strings.Join(list, ";")
}

// step returns every state the operation can lead to from s given its
// answer; none means the answer is impossible from s.
func step(s linState, in LinInput, out LinOutput) []linState {
	maybe := out.Outcome == "busy" || out.Outcome == "unknown"
	switch in.Kind {
	case "check":
		return stepCheck(s, in, out, maybe)
	case "event":
		return stepEvent(s, in, out, maybe)
	case "rollout":
		next := s
		next.Rollouts = withKey(s.Rollouts, in.Firmware, in.Status)
		if in.MaxAttempts > 0 {
			next.Max = withKey(s.Max, in.Firmware, fmt.Sprint(in.MaxAttempts))
		}
		if maybe {
			return []linState{s, next}
		}
		if out.Outcome == "ok" && out.Status == in.Status {
			return []linState{next}
		}
	}
	return nil
}

func stepCheck(s linState, in LinInput, out LinOutput, maybe bool) []linState {
	// The workloads' devices always report the version they started on,
	// below every rollout's: a check after a success contradicts it, a
	// reverted install (docs/DOMAIN.md event rule 7). The success is
	// re-marked failed, a failed attempt, before the check decides — in
	// a transaction of its own when the check then creates nothing, or
	// creates under another lock, so an answer lost may have stored it
	// alone. Or the check was read before the success (sent before the
	// device knew better; only a check called before the success had
	// returned can have been): it contradicts nothing and is decided with
	// the version the success stored, offering only what is above it.
	if n := len(s.Tasks); n > 0 && s.Tasks[n-1].Status == "succeeded" {
		t := s.Tasks[n-1]
		t.Status = "failed"
		reverted := s.withTask(n-1, t)
		reverted.SucceededBy = 0
		reverted.Failed = withKey(s.Failed, t.Fw, fmt.Sprint(atoi(listMap(s.Failed)[t.Fw])+1))
		next := decideCheck(reverted, out, maybe, "")
		if in.Call < s.SucceededBy {
			next = append(next, decideCheck(s, out, maybe, t.Fw)...)
		}
		if maybe {
			next = append(next, s)
		}
		return next
	}
	return decideCheck(s, out, maybe, "")
}

// decideCheck is a check's answer on s, offering only versions above floor
// ("" for any).
func decideCheck(s linState, out LinOutput, maybe bool, floor string) []linState {
	act, tgt := s.active(), s.target(floor)
	// What the check does: hand out the active task, create one, or
	// supersede a pending task for another version with one for the target.
	// A pending task is superseded only by a higher version (docs/DOMAIN.md
	// check rule 5): a stale catalog must never replace a task with a lower
	// one, so a lower target keeps the pending task.
	create, supersede := false, false
	switch {
	case act < 0:
		create = tgt != ""
	case tgt != "" && s.Tasks[act].Fw != tgt && s.Tasks[act].Status == "pending":
		supersede = versionLess(s.Tasks[act].Fw, tgt)
	}
	after := func(id string) linState {
		next := s
		if supersede {
			old := s.Tasks[act]
			old.Status = "cancelled"
			next = next.withTask(act, old)
		}
		return next.withTask(len(next.Tasks), linTask{ID: id, Fw: tgt, Status: "pending", Attempt: atoi(listMap(next.Failed)[tgt]) + 1})
	}
	if maybe {
		if create || supersede {
			return []linState{s, after("?")}
		}
		return []linState{s}
	}
	switch out.Outcome {
	case "ok":
		if create || supersede {
			if n := after(out.TaskID); s.fresh(out.TaskID) && out.Firmware == tgt && out.Status == "pending" && out.Progress == 0 &&
				attemptIs(out, n.Tasks[len(n.Tasks)-1]) {
				return []linState{n}
			}
			return nil
		}
		if act < 0 {
			return nil
		}
		t := s.Tasks[act]
		if t.ID == "?" && s.fresh(out.TaskID) {
			t.ID = out.TaskID
		}
		if t.ID == out.TaskID && t.Fw == out.Firmware && t.Status == out.Status && t.Progress == out.Progress && attemptIs(out, t) {
			return []linState{s.withTask(act, t)}
		}
	case "none":
		if act < 0 && !create {
			return []linState{s}
		}
	}
	return nil
}

func stepEvent(s linState, in LinInput, out LinOutput, maybe bool) []linState {
	i := slices.IndexFunc(s.Tasks, func(t linTask) bool { return t.ID == in.TaskID })
	if i < 0 {
		return nil // the client had the id from a check, which came first
	}
	t := s.Tasks[i]
	// What the service must do, and answer.
	next, want := s, LinOutput{Outcome: "ok", TaskID: t.ID, Status: t.Status, Progress: t.Progress}
	prior, repeated := priorEvent(t.Events, in)
	switch {
	case repeated && prior != eventBody(in):
		want = LinOutput{Outcome: "error", Code: "IDEMPOTENCY_CONFLICT"}
	case repeated:
		// A repeat: the task as it is now.
	case t.Status == "cancelled" || (isFinal(t.Status) && in.Status != t.Status):
		want = LinOutput{Outcome: "error", Code: "TASK_FINISHED"}
	case isFinal(t.Status):
		// The same final status again: nothing changes.
	case validTransition(t, in):
		u := t
		if in.Status != t.Status {
			u.Progress = 0
		}
		u.Status, u.Progress, u.Events = in.Status, max(u.Progress, in.Progress), addEvent(t.Events, eventBody(in))
		next = s.withTask(i, u)
		if in.Status == "succeeded" && i == len(s.Tasks)-1 {
			next.SucceededBy = out.Returned
		}
		if in.Status == "failed" {
			next.Failed = withKey(s.Failed, u.Fw, fmt.Sprint(atoi(listMap(s.Failed)[u.Fw])+1))
		}
		want = LinOutput{Outcome: "ok", TaskID: u.ID, Status: u.Status, Progress: u.Progress}
	default:
		want = LinOutput{Outcome: "error", Code: "INVALID_TRANSITION"}
	}
	if maybe {
		if next.key() != s.key() {
			return []linState{s, next}
		}
		return []linState{s}
	}
	if out.Outcome != want.Outcome || out.Code != want.Code {
		return nil
	}
	if want.Outcome == "ok" && (out.TaskID != want.TaskID || out.Status != want.Status ||
		(!isFinal(want.Status) && out.Progress != want.Progress)) {
		return nil
	}
	return []linState{next}
}

// attemptIs reports whether out, a check's answer, carries t's attempt
// (or none: the model's own tests may leave it out; the service always
// gives one, see linDecode).
func attemptIs(out LinOutput, t linTask) bool { return out.Attempt == 0 || out.Attempt == t.Attempt }

// validTransition is event rule 2 for an active task.
func validTransition(t linTask, in LinInput) bool {
	if in.Status == "failed" {
		return true
	}
	to, ok := statusOrder[in.Status]
	if !ok || to == 0 {
		return false
	}
	from := statusOrder[t.Status]
	return to > from || (to == from && in.Progress >= t.Progress)
}

// LinModel is the porcupine model of the service (see History).
var LinModel = linNondeterministic.ToModel()

var linNondeterministic = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		var admin []porcupine.Operation
		byDevice := map[string][]porcupine.Operation{}
		var devices []string
		for _, op := range history {
			d := op.Input.(LinInput).Device
			if d == "" {
				admin = append(admin, op)
				continue
			}
			if _, ok := byDevice[d]; !ok {
				devices = append(devices, d)
			}
			byDevice[d] = append(byDevice[d], op)
		}
		out := make([][]porcupine.Operation, 0, len(devices))
		for _, d := range devices {
			out = append(out, append(slices.Clone(admin), byDevice[d]...))
		}
		if len(out) == 0 && len(admin) > 0 {
			out = append(out, admin)
		}
		return out
	},
	Init: func() []any { return []any{linState{}} },
	Step: func(state, input, output any) []any {
		next := step(state.(linState), input.(LinInput), output.(LinOutput))
		out := make([]any, len(next))
		for i, s := range next {
			out[i] = s
		}
		return out
	},
	Equal: func(a, b any) bool { return a.(linState).key() == b.(linState).key() },
	Hash: func(s any) uint64 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(s.(linState).key()))
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(LinInput), output.(LinOutput)
		var call string
		switch in.Kind {
		case "check":
			call = "check"
		case "event":
			call = fmt.Sprintf("event %s %s %d on %s", in.EventID, in.Status, in.Progress, short(in.TaskID))
		default:
			call = "rollout " + in.Firmware + " " + in.Status
		}
		ret := out.Outcome
		switch out.Outcome {
		case "ok":
			ret = fmt.Sprintf("%s %s %s %d", short(out.TaskID), out.Firmware, out.Status, out.Progress)
		case "error":
			ret = out.Code
		case "bad":
			ret = "BAD " + out.Detail
		}
		return call + " -> " + ret
	},
	DescribeState: func(state any) string { return state.(linState).key() },
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// linUnanswered is a LinOutput for a call that got no answer.
var linUnanswered = LinOutput{Outcome: "unknown"}

// LinOutputOf turns an HTTP answer into the model's terms. body is the
// answer's JSON; err is the transport error, if any.
func LinOutputOf(kind string, status int, code string, body []byte, err error) LinOutput {
	switch {
	case err != nil || status == 0:
		o := linUnanswered
		if err != nil {
			o.Detail = err.Error()
		}
		return o
	case status == 503 && code == "SERVICE_BUSY":
		return LinOutput{Outcome: "busy"}
	case status >= 400 && status < 500 && code != "":
		return LinOutput{Outcome: "error", Code: code}
	case status != 200:
		return LinOutput{Outcome: "bad", Detail: fmt.Sprintf("%d %s %s", status, code, body)}
	}
	return linDecode(kind, body)
}
