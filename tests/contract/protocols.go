package contract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/application/ddi"
	"github.com/ai-device/ota/application/mender"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// ProtocolRepos is one adapter's every store the device protocols (DDI,
// Mender) run on.
type ProtocolRepos struct {
	Repos
	Attributes ports.DeviceAttributes
	Directory  application.DeviceDirectory
	Actions    ddi.TaskActions
	Admissions AdmissionStore
	Requests   mender.AuthRequests
	Catalog    mender.ArtifactCatalog
	Logs       mender.TaskLogs
	// Locker, Clock and IDs complete the use cases' ports (in-process
	// ones will do: the stores are what is under test).
	Locker ports.Locker
	Clock  ports.Clock
	IDs    ports.IDGenerator
}

// RunProtocols runs the device protocols' use cases (ddi.UseCases and
// mender.UseCases over the device and admin use cases) on the stores
// newRepos returns: what a hawkBit or Mender device sees must not depend
// on the store. Each case names its own model and devices, so newRepos may
// share one store between them.
func RunProtocols(t *testing.T, newRepos func(t *testing.T) ProtocolRepos) {
	for _, c := range protocolCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newProtocolEnv(t, newRepos(t)))
		})
	}
}

// ignoredQueue hears of a full pending queue and does nothing: these cases
// never fill it (the Mender contract counts what it drops).
type ignoredQueue struct{}

func (ignoredQueue) AuthQueueFull(domain.DeviceID, int) {}

var protocolCases = []struct {
	name string
	run  func(t *testing.T, e *protocolEnv)
}{
	{"DDIDeploymentOfCancelledTaskIsNotFound", ddiDeploymentOfCancelledTaskIsNotFound},
	{"DDIFeedbackOnCancelledTaskChangesNothing", ddiFeedbackOnCancelledTaskChangesNothing},
	{"DDIDeploymentOfRevokedTaskStopsIt", ddiDeploymentOfRevokedTaskStopsIt},
	{"DDIProgressOnRevokedTaskFinishes", ddiProgressOnRevokedTaskFinishes},
	{"DDIProgressWhileInstallingKeepsInstalling", ddiProgressWhileInstallingKeepsInstalling},
	{"EachProtocolIsOfferedTheBestFirmwareItCanDeliver", eachProtocolIsOfferedTheBestFirmwareItCanDeliver},
	{"DDIPollCancelsAPendingTaskItCannotDeliver", ddiPollCancelsAPendingTaskItCannotDeliver},
	{"MenderAlreadyInstalledIsRecordedAsSuch", menderAlreadyInstalledIsRecordedAsSuch},
	{"AdminReadsATaskStatusHistory", adminReadsATaskStatusHistory},
	{"RevertedSuccessIsCaughtFromAnotherRollout", revertedSuccessIsCaughtFromAnotherRollout},
	{"DDIAsksForConfigDataUntilItKnowsTheVersion", ddiAsksForConfigDataUntilItKnowsTheVersion},
	{"RESTEventOnAnotherDevicesTaskIsNotFound", restEventOnAnotherDevicesTaskIsNotFound},
	{"RESTProgressEventsRacingOnOneTask", restProgressEventsRacingOnOneTask},
	{"RESTEventResentIsAReplay", restEventResentIsAReplay},
}

// protocolEnv is the application over one adapter's stores.
type protocolEnv struct {
	t       *testing.T
	ctx     context.Context
	model   string
	devices *application.Devices
	admin   *application.Admin
	ddi     *ddi.UseCases
	mender  *mender.UseCases
	tasks   application.TaskStore
}

func newProtocolEnv(t *testing.T, r ProtocolRepos) *protocolEnv {
	t.Helper()
	deps := application.Deps{
		Devices: r.Devices, Firmwares: r.Firmwares, Rollouts: r.Rollouts, Tasks: r.Tasks,
		Locker: r.Locker, Clock: r.Clock, IDs: r.IDs,
		Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{}, Attributes: r.Attributes, Directory: r.Directory,
	}
	devices, err := application.NewDevices(deps, application.PollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := application.NewAdmin(deps)
	if err != nil {
		t.Fatal(err)
	}
	dd, err := ddi.New(devices, deps.Devices, deps.Rollouts, r.Attributes, r.Actions, deps.Tasks, deps.Metrics,
		deps.Clock, application.PollInterval(time.Hour), "sw_version")
	if err != nil {
		t.Fatal(err)
	}
	md, err := mender.New(mender.Ports{
		Devices: devices, Repo: deps.Devices, Rollouts: deps.Rollouts, Tasks: deps.Tasks, Attributes: r.Attributes,
		Admissions: r.Admissions, Requests: r.Requests, Catalog: r.Catalog, Logs: r.Logs,
		Clock: deps.Clock, IDs: deps.IDs, Metrics: deps.Metrics, QueueObserver: ignoredQueue{},
	}, mender.Config{IDKey: "device_id", Secret: domain.SessionSecret(strings.Repeat("s", domain.MinSessionSecretLen))})
	if err != nil {
		t.Fatal(err)
	}
	return &protocolEnv{t: t, ctx: t.Context(), model: repoName("proto"), devices: devices, admin: admin, ddi: dd, mender: md, tasks: deps.Tasks}
}

// device registers a device of the case's model running version, which it
// has also reported as a hawkBit device does (configData).
func (e *protocolEnv) device(version string) domain.DeviceID {
	e.t.Helper()
	c, err := e.admin.RegisterDevice(e.ctx, testActor, ports.RegisterDevice{DeviceID: repoName("dev"), Model: e.model, CurrentVersion: version})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.ddi.ConfigData(e.ctx, c.Device.ID(), "merge", map[string]string{"sw_version": version}); err != nil {
		e.t.Fatal(err)
	}
	return c.Device.ID()
}

// release publishes version of the case's model (spec changed by mutate)
// and rolls it out to every device.
func (e *protocolEnv) release(version string, mutate ...func(*domain.FirmwareSpec)) domain.Firmware {
	e.t.Helper()
	spec := domain.FirmwareSpec{Model: e.model, Version: version, URL: "https://files.example/" + version + ".swu",
		SizeBytes: 1024, SHA256: strings.Repeat("a", 64), SHA1: strings.Repeat("b", 40), ArtifactName: "release-" + version}
	for _, m := range mutate {
		m(&spec)
	}
	fw, err := e.admin.PublishFirmware(e.ctx, testActor, spec)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.admin.StartRollout(e.ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: domain.RolloutSpec{Percentage: 100}}); err != nil {
		e.t.Fatal(err)
	}
	return fw
}

// ddiPoll polls as a hawkBit device (gateway-authenticated).
func (e *protocolEnv) ddiPoll(id domain.DeviceID) ddi.Poll {
	e.t.Helper()
	dev, err := e.ddi.KnownDevice(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := e.ddi.Poll(e.ctx, dev)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// ddiAction polls and returns the deployment the poll links to.
func (e *protocolEnv) ddiAction(id domain.DeviceID) domain.Task {
	e.t.Helper()
	p := e.ddiPoll(id)
	if p.Deployment == nil {
		e.t.Fatalf("poll of %s: no deployment", id)
	}
	return p.Deployment.Task
}

func (e *protocolEnv) deployment(id domain.DeviceID, action int64) (ddi.Deployment, error) {
	e.t.Helper()
	dev, err := e.ddi.KnownDevice(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.ddi.Deployment(e.ctx, dev, action)
}

func (e *protocolEnv) task(id domain.UUID) domain.Task {
	e.t.Helper()
	tk, err := e.tasks.Get(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return tk
}

var proceeding = ddi.Feedback{Execution: "proceeding", Finished: "none", Progress: &ddi.Progress{Cnt: 1, Of: 4}}

// A superseded task is cancelled: hawkBit answers its deploymentBase 404.
func ddiDeploymentOfCancelledTaskIsNotFound(t *testing.T, e *protocolEnv) {
	dev := e.device("1.0.0")
	e.release("2.0.0")
	old := e.ddiAction(dev)
	e.release("3.0.0")
	if p := e.ddiPoll(dev); p.Cancel == nil || p.Cancel.ID() != old.ID() {
		t.Fatalf("poll after a supersede: cancel %v, want the superseded action", p.Cancel)
	}
	if _, err := e.deployment(dev, old.ActionID()); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("deploymentBase of a cancelled action: %v, want ErrNotFound", err)
	}
}

// Feedback on a cancelled task is refused (TASK_FINISHED) and leaves it
// cancelled.
func ddiFeedbackOnCancelledTaskChangesNothing(t *testing.T, e *protocolEnv) {
	dev := e.device("1.0.0")
	e.release("2.0.0")
	old := e.ddiAction(dev)
	e.release("3.0.0")
	e.ddiPoll(dev)
	for _, fb := range []ddi.Feedback{proceeding, {Execution: "downloaded", Finished: "none"}} {
		if _, err := e.ddi.DeploymentFeedback(e.ctx, dev, old.ActionID(), fb); !errors.Is(err, domain.ErrTaskFinished) {
			t.Fatalf("feedback %s on a cancelled action: %v, want ErrTaskFinished", fb.Execution, err)
		}
		if got := e.task(old.ID()); got.Status() != domain.TaskCancelled || got.ErrorCode() != domain.CodeSuperseded {
			t.Fatalf("after feedback %s the cancelled task is %s (%s)", fb.Execution, got.Status(), got.ErrorCode())
		}
	}
}

// A pending task whose firmware was revoked after the poll that handed it
// out is stopped when the device asks for it, not delivered.
func ddiDeploymentOfRevokedTaskStopsIt(t *testing.T, e *protocolEnv) {
	dev := e.device("1.0.0")
	fw := e.release("2.0.0")
	a := e.ddiAction(dev)
	if _, err := e.admin.RevokeFirmware(e.ctx, testActor, fw.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.deployment(dev, a.ActionID()); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("deploymentBase of a revoked action: %v, want ErrNotFound", err)
	}
	if got := e.task(a.ID()); got.Status() != domain.TaskCancelled || got.ErrorCode() != domain.CodeFirmwareRevoked {
		t.Fatalf("the revoked task is %s (%s), want cancelled (FIRMWARE_REVOKED)", got.Status(), got.ErrorCode())
	}
	if p := e.ddiPoll(dev); p.Cancel == nil || p.Cancel.ID() != a.ID() {
		t.Fatalf("the next poll does not cancel the stopped action: %+v", p)
	}
}

// Progress on a task whose firmware was revoked is applied: a DDI agent
// reports download and install alike ("proceeding"), so a device sending
// progress has started, and a started task finishes (check rule 5). Its
// deploymentBase is still served (the device looks its action up again
// after the reboot) and its success is the device's.
func ddiProgressOnRevokedTaskFinishes(t *testing.T, e *protocolEnv) {
	dev := e.device("1.0.0")
	fw := e.release("2.0.0")
	a := e.ddiAction(dev)
	if _, err := e.admin.RevokeFirmware(e.ctx, testActor, fw.ID()); err != nil {
		t.Fatal(err)
	}
	v, err := e.ddi.DeploymentFeedback(e.ctx, dev, a.ActionID(), proceeding)
	if err != nil || v.Task.Status() != domain.TaskDownloading {
		t.Fatalf("progress on a revoked action: %v %v, want it applied (downloading)", v.Task.Status(), err)
	}
	if _, err := e.deployment(dev, a.ActionID()); err != nil {
		t.Fatalf("deploymentBase of a started revoked action: %v, want it served", err)
	}
	if got := e.task(a.ID()); got.Status() != domain.TaskDownloading {
		t.Fatalf("the started task is %s (%s), want downloading", got.Status(), got.ErrorCode())
	}
	v, err = e.ddi.DeploymentFeedback(e.ctx, dev, a.ActionID(), ddi.Feedback{Execution: "closed", Finished: "success"})
	if err != nil || v.Task.Status() != domain.TaskSucceeded {
		t.Fatalf("success of a started revoked action: %v %v, want succeeded", v.Task.Status(), err)
	}
}

// Progress reported while installing keeps the task installing and moves
// its progress on (it is not taken for a download, which would go back).
func ddiProgressWhileInstallingKeepsInstalling(t *testing.T, e *protocolEnv) {
	dev := e.device("1.0.0")
	e.release("2.0.0")
	a := e.ddiAction(dev)
	step := func(fb ddi.Feedback, status domain.TaskStatus, progress int) {
		t.Helper()
		v, err := e.ddi.DeploymentFeedback(e.ctx, dev, a.ActionID(), fb)
		if err != nil {
			t.Fatalf("feedback %s: %v", fb.Execution, err)
		}
		if got := e.task(a.ID()); got.Status() != status || got.Progress() != progress || v.Task.Status() != status {
			t.Fatalf("after feedback %s %+v: task %s %d%%, answered %s; want %s %d%%", fb.Execution, fb.Progress,
				got.Status(), got.Progress(), v.Task.Status(), status, progress)
		}
	}
	progress := func(cnt int) ddi.Feedback {
		return ddi.Feedback{Execution: "proceeding", Finished: "none", Progress: &ddi.Progress{Cnt: cnt, Of: 4}}
	}
	step(progress(2), domain.TaskDownloading, 50)
	step(ddi.Feedback{Execution: "downloaded", Finished: "none"}, domain.TaskDownloaded, 0)
	step(progress(1), domain.TaskInstalling, 25)
	step(progress(3), domain.TaskInstalling, 75)
}

// menderNext asks for the Mender device's next deployment as a device
// running an image no firmware names (the factory image).
func (e *protocolEnv) menderNext(id domain.DeviceID) *ports.TaskView {
	e.t.Helper()
	v, err := e.mender.Next(e.ctx, id, mender.Provides{DeviceType: e.model, ArtifactName: "factory"})
	if err != nil {
		e.t.Fatalf("mender next: %v", err)
	}
	return v
}

// restCheck checks as a REST device running version.
func (e *protocolEnv) restCheck(id domain.DeviceID, version string) *ports.TaskView {
	e.t.Helper()
	dev, err := e.devices.IdentifyDevice(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := e.devices.Check(e.ctx, ports.CheckRequest{Device: dev, Model: e.model, CurrentVersion: version})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Task
}

// restTask is a fresh device's REST task, from 1.0.0, for a fresh
// release of version.
func (e *protocolEnv) restTask(version string) (domain.DeviceID, ports.TaskView) {
	e.t.Helper()
	dev := e.device("1.0.0")
	e.release(version)
	tk := e.restCheck(dev, "1.0.0")
	if tk == nil {
		e.t.Fatalf("no task for the release of %s", version)
	}
	return dev, *tk
}

// Firmware a protocol cannot deliver gets no task over it: hawkBit agents
// get the best firmware with a sha1, Mender devices the best with an
// artifact name, REST devices the best of all.
func eachProtocolIsOfferedTheBestFirmwareItCanDeliver(t *testing.T, e *protocolEnv) {
	e.release("1.1.0")
	e.release("1.2.0", func(s *domain.FirmwareSpec) { s.SHA1 = "" })
	e.release("1.3.0", func(s *domain.FirmwareSpec) { s.ArtifactName = "" })
	e.release("1.4.0", func(s *domain.FirmwareSpec) { s.SHA1, s.ArtifactName = "", "" })

	if d := e.ddiAction(e.device("1.0.0")); e.firmwareOf(d) != "1.3.0" {
		t.Errorf("DDI device offered %s, want 1.3.0 (the best with a sha1)", e.firmwareOf(d))
	}
	if v := e.menderNext(e.device("1.0.0")); v == nil || v.Firmware.Version().String() != "1.2.0" {
		t.Errorf("Mender device offered %v, want 1.2.0 (the best with an artifact name)", v)
	}
	if v := e.restCheck(e.device("1.0.0"), "1.0.0"); v == nil || v.Firmware.Version().String() != "1.4.0" {
		t.Errorf("REST device offered %v, want 1.4.0", v)
	}
}

func (e *protocolEnv) firmwareOf(tk domain.Task) string {
	e.t.Helper()
	fw, err := e.admin.ListFirmwares(e.ctx, e.model)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range fw {
		if f.ID() == tk.FirmwareID() {
			return f.Version().String()
		}
	}
	return "?"
}

// A pending task of firmware without sha1 (handed to the device over REST,
// say) does not block a hawkBit device: its poll cancels it
// (NOT_DELIVERABLE, no attempt spent) and offers deliverable firmware.
func ddiPollCancelsAPendingTaskItCannotDeliver(t *testing.T, e *protocolEnv) {
	dev := e.device("1.0.0")
	e.release("1.1.0")
	e.release("1.2.0", func(s *domain.FirmwareSpec) { s.SHA1 = "" })
	stuck := e.restCheck(dev, "1.0.0")
	if stuck == nil || stuck.Firmware.Version().String() != "1.2.0" {
		t.Fatalf("REST check: %v, want a task of 1.2.0", stuck)
	}
	a := e.ddiAction(dev)
	if e.firmwareOf(a) != "1.1.0" || a.Attempt() != 1 {
		t.Fatalf("DDI poll handed out %s (attempt %d), want 1.1.0, attempt 1", e.firmwareOf(a), a.Attempt())
	}
	if got := e.task(stuck.Task.ID()); got.Status() != domain.TaskCancelled || got.ErrorCode() != domain.CodeNotDeliverable {
		t.Fatalf("the undeliverable task is %s (%s), want cancelled (NOT_DELIVERABLE)", got.Status(), got.ErrorCode())
	}
}

// A Mender device that already runs the deployed artifact finishes its
// task as succeeded with ALREADY_INSTALLED, told apart from one that
// downloaded and installed it (no code).
func menderAlreadyInstalledIsRecordedAsSuch(t *testing.T, e *protocolEnv) {
	e.release("2.0.0")
	for _, c := range []struct{ status, code string }{{"already-installed", domain.CodeAlreadyInstalled}, {"success", ""}} {
		dev := e.device("1.0.0")
		v := e.menderNext(dev)
		if v == nil {
			t.Fatal("no deployment")
		}
		if err := e.mender.Status(e.ctx, dev, v.Task.ID(), c.status); err != nil {
			t.Fatalf("status %s: %v", c.status, err)
		}
		if got := e.task(v.Task.ID()); got.Status() != domain.TaskSucceeded || got.ErrorCode() != c.code {
			t.Fatalf("after %s the task is %s (%q), want succeeded (%q)", c.status, got.Status(), got.ErrorCode(), c.code)
		}
	}
}

// Operators read a task's status history: the events stored with it,
// oldest first, each with what it said; a replay adds nothing.
func adminReadsATaskStatusHistory(t *testing.T, e *protocolEnv) {
	dev := e.device("1.0.0")
	e.release("2.0.0")
	a := e.ddiAction(dev)
	for _, fb := range []ddi.Feedback{
		proceeding, proceeding, // the second is a replay
		{Execution: "downloaded", Finished: "none"},
		{Execution: "closed", Finished: "failure", Details: []string{"flash full"}},
	} {
		if _, err := e.ddi.DeploymentFeedback(e.ctx, dev, a.ActionID(), fb); err != nil {
			t.Fatalf("feedback %s: %v", fb.Execution, err)
		}
	}
	evs, err := e.admin.TaskEvents(e.ctx, a.ID())
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		status, code, msg string
		progress          int
	}
	want := []entry{{"downloading", "", "", 25}, {"downloaded", "", "", -1}, {"failed", ddi.CodeFailure, "flash full", -1}}
	if len(evs) != len(want) {
		t.Fatalf("history has %d events, want %d: %+v", len(evs), len(want), evs)
	}
	for i, ev := range evs {
		p, ok := ev.Event.Progress()
		if !ok {
			p = -1
		}
		got := entry{ev.Event.Status().String(), ev.Event.ErrorCode(), ev.Event.ErrorMessage(), p}
		if got != want[i] || ev.Event.ID() == "" || ev.At.IsZero() || (i > 0 && ev.At.Before(evs[i-1].At)) {
			t.Errorf("event %d: %+v at %v, want %+v in time order", i, got, ev.At, want[i])
		}
	}
	if _, err := e.admin.TaskEvents(e.ctx, domain.UUIDOf([16]byte{1})); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("history of an unknown task: %v, want ErrNotFound", err)
	}
}

// A device that succeeded and then reports its old version reverted the
// install (event rule 7), also when its firmware is offered again by
// another rollout than the one it succeeded in: the check marks the
// success failed (INSTALL_REVERTED) and hands out the next attempt, never
// attempt 1 again. Only the check's transaction reads the success
// (domain.CheckPlan.Recheck): a store's one-statement creation, which
// finds no task of the device in the new rollout, must not be tried.
func revertedSuccessIsCaughtFromAnotherRollout(t *testing.T, e *protocolEnv) {
	dev := e.device("1.0.0")
	fw := e.release("2.0.0")
	first := e.restCheck(dev, "1.0.0")
	if first == nil {
		t.Fatal("no task for the release")
	}
	if _, err := e.devices.ReportEvent(e.ctx, dev, first.Task.ID(), ports.EventRequest{EventID: "done", Status: "succeeded"}); err != nil {
		t.Fatalf("success: %v", err)
	}
	cancelled := domain.RolloutCancelled.String()
	if _, err := e.admin.UpdateRollout(e.ctx, testActor, first.Task.RolloutID(), ports.RolloutChange{Status: &cancelled}); err != nil {
		t.Fatalf("cancel the first rollout: %v", err)
	}
	second, err := e.admin.StartRollout(e.ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: domain.RolloutSpec{Percentage: 100}})
	if err != nil {
		t.Fatalf("second rollout: %v", err)
	}
	next := e.restCheck(dev, "1.0.0") // the device fell back to the old slot
	if got := e.task(first.Task.ID()); got.Status() != domain.TaskFailed || got.ErrorCode() != domain.CodeInstallReverted {
		t.Errorf("the reverted success is %s (%q), want failed (%s)", got.Status(), got.ErrorCode(), domain.CodeInstallReverted)
	}
	if next == nil || next.Task.RolloutID() != second.ID() || next.Task.Attempt() != 2 {
		t.Fatalf("after the revert the device got %+v, want attempt 2 in the second rollout %s", next, second.ID())
	}
	if d, err := e.devices.IdentifyDevice(e.ctx, dev); err != nil || d.Device.CurrentVersion().String() != "1.0.0" {
		t.Errorf("after the revert the device runs %v (%v), want the version it reported, 1.0.0", d.Device.CurrentVersion(), err)
	}
}

// A hawkBit device registered without a version is asked for its
// configData (the poll's config link) until the service knows both its
// attributes and its version: attributes without the version attribute
// do not stop the asking, since its polls check with the version it
// reports there.
func ddiAsksForConfigDataUntilItKnowsTheVersion(t *testing.T, e *protocolEnv) {
	c, err := e.admin.RegisterDevice(e.ctx, testActor, ports.RegisterDevice{DeviceID: repoName("dev"), Model: e.model})
	if err != nil {
		t.Fatal(err)
	}
	dev := c.Device.ID()
	if !e.ddiPoll(dev).WantConfigData {
		t.Fatal("a device that reported nothing is not asked for its configData")
	}
	for _, tc := range []struct {
		data map[string]string
		want bool
	}{
		{map[string]string{"hw": "rev-b"}, true}, // attributes, but no version
		{map[string]string{"sw_version": "1.0.0"}, false},
	} {
		if _, err := e.ddi.ConfigData(e.ctx, dev, "merge", tc.data); err != nil {
			t.Fatal(err)
		}
		if got := e.ddiPoll(dev).WantConfigData; got != tc.want {
			t.Fatalf("after configData %v the poll asks for it: %v, want %v", tc.data, got, tc.want)
		}
	}
	// A removal names the attributes to drop; its values report nothing,
	// so the version it happens to carry is not the device's.
	if _, err := e.ddi.ConfigData(e.ctx, dev, "remove", map[string]string{"sw_version": "0.5.0"}); err != nil {
		t.Fatal(err)
	}
	if d, err := e.devices.IdentifyDevice(e.ctx, dev); err != nil || d.Device.CurrentVersion().String() != "1.0.0" {
		t.Fatalf("after removing the version attribute the device runs %v (%v), want 1.0.0 still", d.Device.CurrentVersion(), err)
	}
}

// A device's progress event on another device's task is not found and
// changes nothing, whichever path applies it (a store's one-statement
// progress event reads the task before anything else).
func restEventOnAnotherDevicesTaskIsNotFound(t *testing.T, e *protocolEnv) {
	owner, other := e.device("1.0.0"), e.device("1.0.0")
	e.release("2.0.0")
	tk := e.restCheck(owner, "1.0.0")
	if tk == nil {
		t.Fatal("no task for the release")
	}
	_, err := e.devices.ReportEvent(e.ctx, other, tk.Task.ID(), ports.EventRequest{EventID: "dl", Status: "downloading"})
	if !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("another device's event: %v, want ErrNotFound", err)
	}
	if got := e.task(tk.Task.ID()); got.Record() != tk.Task.Record() {
		t.Fatalf("the task after another device's event: %+v, want it as created", got.Record())
	}
	// The owner's event of that id is its first, not a replay.
	if v, err := e.devices.ReportEvent(e.ctx, owner, tk.Task.ID(), ports.EventRequest{EventID: "dl", Status: "downloading"}); err != nil ||
		v.Task.Status() != domain.TaskDownloading {
		t.Fatalf("the owner's event: %v, %v; want downloading", v.Task.Status(), err)
	}
}

// Progress events racing on one task, each with its own id and progress,
// are each applied once or refused as going back: the task ends at the
// highest progress applied, its history holds exactly the applied events,
// and the rollout counts the device once, downloading.
func restProgressEventsRacingOnOneTask(t *testing.T, e *protocolEnv) {
	dev, tk := e.restTask("2.0.0")
	const n = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied []int
	)
	for i := range n {
		wg.Go(func() {
			progress := (i + 1) * 5
			_, err := e.devices.ReportEvent(e.ctx, dev, tk.Task.ID(), ports.EventRequest{EventID: fmt.Sprintf("p%d", progress), Status: "downloading", Progress: &progress})
			switch {
			case err == nil:
				mu.Lock()
				applied = append(applied, progress)
				mu.Unlock()
			case !errors.Is(err, domain.ErrInvalidTransition):
				t.Errorf("progress %d: %v, want applied or refused as going back", progress, err)
			}
		})
	}
	wg.Wait()
	if len(applied) == 0 {
		t.Fatal("no event applied")
	}
	got := e.task(tk.Task.ID())
	if got.Status() != domain.TaskDownloading || got.Progress() != slices.Max(applied) {
		t.Errorf("the task is %s at %d%%, want downloading at %d%%, the highest applied of %v", got.Status(), got.Progress(), slices.Max(applied), applied)
	}
	evs, err := e.admin.TaskEvents(e.ctx, tk.Task.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(applied) {
		t.Errorf("the history holds %d events, want the %d applied (%v)", len(evs), len(applied), applied)
	}
	st, err := e.admin.GetRollout(e.ctx, tk.Task.RolloutID())
	if err != nil {
		t.Fatal(err)
	}
	if st.Stats != (domain.TaskStats{Downloading: 1}) {
		t.Errorf("the rollout counts %+v, want the device once, downloading", st.Stats)
	}
}

// An event resent as it was is a replay (the task as it stands, one
// event in the history, the device counted once); resent with another
// body under its id it is an idempotency conflict — also where the resend
// reaches a store's one-statement event first: a progress event at the
// task's own status, a success on the task it ended.
func restEventResentIsAReplay(t *testing.T, e *protocolEnv) {
	progress := func(p int) ports.EventRequest {
		return ports.EventRequest{EventID: "dl", Status: "downloading", Progress: &p}
	}
	for _, c := range []struct {
		version      string
		event, other ports.EventRequest
		counted      domain.TaskStats
	}{
		{"2.0.0", progress(40), progress(60), domain.TaskStats{Downloading: 1}},
		{"3.0.0", ports.EventRequest{EventID: "end", Status: "succeeded"}, ports.EventRequest{EventID: "end", Status: "failed", ErrorCode: "E"},
			domain.TaskStats{Succeeded: 1}},
	} {
		dev, tk := e.restTask(c.version)
		first, err := e.devices.ReportEvent(e.ctx, dev, tk.Task.ID(), c.event)
		if err != nil {
			t.Fatal(err)
		}
		again, err := e.devices.ReportEvent(e.ctx, dev, tk.Task.ID(), c.event)
		if err != nil || again.Task.Record() != first.Task.Record() {
			t.Fatalf("the resend of %s: %+v, %v; want the task as the first made it, %+v", c.event.Status, again.Task.Record(), err, first.Task.Record())
		}
		if _, err := e.devices.ReportEvent(e.ctx, dev, tk.Task.ID(), c.other); !errors.Is(err, domain.ErrIdempotencyConflict) {
			t.Fatalf("another body under the id of %s: %v, want ErrIdempotencyConflict", c.event.Status, err)
		}
		evs, err := e.admin.TaskEvents(e.ctx, tk.Task.ID())
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 {
			t.Errorf("%s: the history holds %d events, want the first alone", c.event.Status, len(evs))
		}
		st, err := e.admin.GetRollout(e.ctx, tk.Task.RolloutID())
		if err != nil {
			t.Fatal(err)
		}
		if st.Stats != c.counted {
			t.Errorf("%s: the rollout counts %+v, want %+v", c.event.Status, st.Stats, c.counted)
		}
	}
}
