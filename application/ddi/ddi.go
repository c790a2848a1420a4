// Package ddi holds the use cases of hawkBit's Direct Device Integration
// API (adapters/ddi speaks its HTTP): each DDI action translated onto the
// device use cases of package application, with the protocol's own words
// (Feedback, Poll, Deployment). It adds no rule of its own.
package ddi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// VersionAttribute names the configData attribute that carries a
// device's running version (OTA_DDI_VERSION_ATTRIBUTE, default sw_version).
type VersionAttribute string

// TaskActions finds tasks by the numeric action id device protocols use,
// and keeps the cancel notices of cancelled tasks (domain.CancelNotice).
// Not-found — including another device's task — is domain.ErrNotFound.
type TaskActions interface {
	// Cancel returns the notice of the device's task numbered actionID:
	// the task, with whether its cancel was confirmed.
	Cancel(ctx context.Context, deviceID domain.DeviceID, actionID int64) (domain.CancelNotice, error)
	// PendingCancel returns the device's most recently cancelled task whose
	// cancel the device has not confirmed, or nil.
	PendingCancel(ctx context.Context, deviceID domain.DeviceID) (*domain.CancelNotice, error)
	// UpdateCancel loads the notice of the device's task numbered actionID
	// locked, lets fn change it, and stores it if fn returns nil.
	UpdateCancel(ctx context.Context, deviceID domain.DeviceID, actionID int64, fn func(*domain.CancelNotice) error) (domain.CancelNotice, error)
}

// UseCases implements Service: hawkBit's Direct Device Integration
// actions translated onto the device use cases. It adds no rule: the poll
// is the check, feedback is a task event, and what DDI needs beyond them
// (attributes, cancel notices) is kept by the domain.
type UseCases struct {
	devices     ports.DeviceService
	repo        ports.DeviceRepository
	rollouts    ports.RolloutRepository
	attrs       ports.DeviceAttributes
	actions     TaskActions
	tasks       application.TaskTransactor
	metrics     ports.Metrics
	clock       ports.Clock
	poll        application.PollInterval
	versionAttr string
}

var _ Service = (*UseCases)(nil)

// New builds the DDI use cases over the device use cases and the ports
// they read (rollouts: for their maintenance windows and cancels; tasks:
// to stop a task whose firmware was revoked or rollout cancelled before
// its device began).
func New(devices ports.DeviceService, repo ports.DeviceRepository, rollouts ports.RolloutRepository, attrs ports.DeviceAttributes,
	actions TaskActions, tasks application.TaskTransactor, metrics ports.Metrics, clock ports.Clock, poll application.PollInterval, versionAttr VersionAttribute) (*UseCases, error) {
	if devices == nil || repo == nil || rollouts == nil || attrs == nil || actions == nil || tasks == nil || metrics == nil || clock == nil {
		return nil, errors.New("ddi: every dependency is required")
	}
	if poll <= 0 || versionAttr == "" {
		return nil, errors.New("ddi: the use cases need a poll interval and a version attribute")
	}
	return &UseCases{devices: devices, repo: repo, rollouts: rollouts, attrs: attrs, actions: actions, tasks: tasks, metrics: metrics, clock: clock, poll: poll, versionAttr: string(versionAttr)}, nil
}

// AuthenticateTarget admits the device's own token only, and returns the
// device with its task state (one round trip): the poll that follows
// reads nothing more.
func (s *UseCases) AuthenticateTarget(ctx context.Context, token string, deviceID domain.DeviceID) (ports.AuthenticatedDevice, error) {
	dev, err := s.devices.AuthenticateDevice(ctx, token)
	if err != nil {
		return ports.AuthenticatedDevice{}, err
	}
	if dev.ID() != deviceID {
		return ports.AuthenticatedDevice{}, domain.ErrForbidden
	}
	return dev, nil
}

// KnownDevice loads a registered device with its task state, or is
// domain.ErrNotFound.
func (s *UseCases) KnownDevice(ctx context.Context, deviceID domain.DeviceID) (ports.AuthenticatedDevice, error) {
	return s.devices.IdentifyDevice(ctx, deviceID)
}

// withTasks returns dev with its task state, reading it only when the edge
// authenticated the device without it.
func (s *UseCases) withTasks(ctx context.Context, dev ports.AuthenticatedDevice) (ports.AuthenticatedDevice, error) {
	if dev.Tasks != nil {
		return dev, nil
	}
	return s.devices.IdentifyDevice(ctx, dev.ID())
}

// Poll runs the check with the device's last-known version (a DDI poll
// carries none; configData provides it), on the device and task state its
// authentication read: the check reads nothing again. A device whose
// version or attributes are not known yet is asked for its configData, and
// gets no deployment while its version is unknown; the check offers only
// firmware with the sha1 hawkBit agents verify (domain.DeliverWithSHA1). A cancel the device has
// not confirmed is looked up after the check, which may itself have
// cancelled a pending task.
func (s *UseCases) Poll(ctx context.Context, dev ports.AuthenticatedDevice) (Poll, error) {
	dev, err := s.withTasks(ctx, dev)
	if err != nil {
		return Poll{}, err
	}
	version := dev.Device.CurrentVersion()
	// The check view carries the attributes exactly when the device has
	// reported some (DeviceAttributes.Known).
	known := dev.Tasks.Facts.Attributes != nil
	res := Poll{PollAfter: time.Duration(s.poll), WantConfigData: !known || version.IsZero()}
	if !version.IsZero() {
		c, err := s.check(ctx, dev, version)
		if err != nil {
			return Poll{}, err
		}
		res.Deployment = c.Task
		if c.PollAfter > 0 && c.PollAfter < res.PollAfter {
			res.PollAfter = c.PollAfter // a rollout's window or start is near (schedule rule S3)
		}
	}
	n, err := s.actions.PendingCancel(ctx, dev.ID())
	if err != nil {
		return Poll{}, fmt.Errorf("loading pending cancel: %w", err)
	}
	if n != nil {
		t := n.Task()
		res.Cancel = &t
	}
	return res, nil
}

// task loads the device's task numbered actionID with its firmware.
func (s *UseCases) task(ctx context.Context, deviceID domain.DeviceID, actionID int64) (ports.TaskView, error) {
	n, err := s.actions.Cancel(ctx, deviceID, actionID)
	if err != nil {
		return ports.TaskView{}, fmt.Errorf("loading action %d: %w", actionID, err)
	}
	return s.devices.GetTask(ctx, deviceID, n.Task().ID())
}

// Deployment returns the action's task, refusing a firmware without sha1,
// with the state of its rollout's maintenance window for the device
// (judged on the attributes its authentication read). A cancelled task
// (superseded, revoked, rollout cancelled) is not found, as hawkBit
// answers for a cancelled action: the device learns of the cancel from
// its next poll (cancelAction). A task still pending whose firmware was
// revoked or rollout cancelled is stopped here first
// (domain.Task.StopBeforeStart): handing it out would install what the
// operator withdrew. A task the device reported progress on is handed
// back to finish: a DDI agent reports download and install alike, so it
// may be installing, or rebooting into the image and looking up its
// action to report the result.
func (s *UseCases) Deployment(ctx context.Context, dev ports.AuthenticatedDevice, actionID int64) (Deployment, error) {
	v, err := s.task(ctx, dev.ID(), actionID)
	if err != nil {
		return Deployment{}, err
	}
	r, err := s.rollouts.Get(ctx, v.Task.RolloutID())
	if err != nil {
		return Deployment{}, fmt.Errorf("loading the action's rollout: %w", err)
	}
	if v.Task, err = application.StopBeforeInstall(ctx, s.tasks, s.metrics, v, r, s.clock.Now(), (*domain.Task).StopBeforeStart); err != nil {
		return Deployment{}, err
	}
	if v.Task.Status() == domain.TaskCancelled {
		return Deployment{}, fmt.Errorf("action %d was cancelled (%s): %w", actionID, v.Task.ErrorCode(), domain.ErrNotFound)
	}
	if err := v.Firmware.CheckSHA1Deliverable(); err != nil {
		return Deployment{}, err
	}
	d := Deployment{TaskView: v}
	if w := r.Window(); w != nil {
		if dev, err = s.withTasks(ctx, dev); err != nil {
			return Deployment{}, err
		}
		d.Window = windowFor(*w, dev.Tasks.Facts, s.clock.Now())
	}
	return d, nil
}

// windowFor judges a maintenance window for a device with the function
// the check admits it by (schedule rule S2: domain.Window.Open, in the
// device's timezone attribute when it names a known zone): a task created
// inside the window is still handed out after it closes, and hawkBit's
// agents then download it but wait to install.
func windowFor(w domain.Window, f domain.DeviceFacts, now time.Time) Window {
	if open, _ := w.Open(now, f); open {
		return WindowAvailable
	}
	return WindowUnavailable
}

// InstalledBase returns the action's task if it succeeded.
func (s *UseCases) InstalledBase(ctx context.Context, deviceID domain.DeviceID, actionID int64) (ports.TaskView, error) {
	v, err := s.task(ctx, deviceID, actionID)
	if err != nil {
		return ports.TaskView{}, err
	}
	if v.Task.Status() != domain.TaskSucceeded {
		return ports.TaskView{}, fmt.Errorf("action %d is not installed: %w", actionID, domain.ErrNotFound)
	}
	return v, nil
}

// DeploymentFeedback applies the feedback as a task event whose id is
// derived from the feedback itself, so a resent feedback is a replay.
// Intermediate feedback that would move the task backwards (a late
// progress report) is acknowledged without change: for hawkBit it is a log
// line, and refusing it would make the agent resend it forever. Progress
// is applied even when the task's firmware was revoked or rollout
// cancelled since: the device sending it has started, and a started task
// finishes (check rule 5; deploymentBase stopped it if it had not). A
// closed success records the firmware's version as the device's running
// version in the event's own transaction, as every success does
// (domain.Task.Installs): a DDI poll carries no version, and the next
// check must not offer the same image again — unless it acknowledges
// update "skip" (domain.Task.SuccessAcknowledgesSkip, judged on the
// window as deploymentBase judges it): then it is answered and applies
// nothing.
func (s *UseCases) DeploymentFeedback(ctx context.Context, deviceID domain.DeviceID, actionID int64, fb Feedback) (ports.TaskView, error) {
	before, err := s.task(ctx, deviceID, actionID)
	if err != nil {
		return ports.TaskView{}, err
	}
	ev, apply, err := Event(actionID, before.Task.Status(), fb)
	if err != nil || !apply {
		return before, err
	}
	if ev.Status == domain.TaskSucceeded.String() {
		skip, err := s.acknowledgesSkip(ctx, deviceID, before.Task)
		if err != nil || skip {
			return before, err
		}
	}
	final := application.EndsTask(ev.Status)
	v, err := s.devices.ReportEvent(ctx, deviceID, before.Task.ID(), ev)
	if err != nil {
		if !final && errors.Is(err, domain.ErrInvalidTransition) {
			return s.devices.GetTask(ctx, deviceID, before.Task.ID())
		}
		return ports.TaskView{}, err
	}
	return v, nil
}

// acknowledgesSkip gathers what domain.Task.SuccessAcknowledgesSkip
// judges a success on t by: its rollout's window and the device's facts
// (read only when there is a window), now.
func (s *UseCases) acknowledgesSkip(ctx context.Context, deviceID domain.DeviceID, t domain.Task) (bool, error) {
	r, err := s.rollouts.Get(ctx, t.RolloutID())
	if err != nil {
		return false, fmt.Errorf("loading the action's rollout: %w", err)
	}
	w := r.Window()
	var facts domain.DeviceFacts
	if w != nil {
		dev, err := s.devices.IdentifyDevice(ctx, deviceID)
		if err != nil {
			return false, err
		}
		facts = dev.Tasks.Facts
	}
	return t.SuccessAcknowledgesSkip(w, facts, s.clock.Now()), nil
}

// CancelAction returns the notice of a cancelled task.
func (s *UseCases) CancelAction(ctx context.Context, deviceID domain.DeviceID, actionID int64) (domain.CancelNotice, error) {
	n, err := s.actions.Cancel(ctx, deviceID, actionID)
	if err != nil {
		return domain.CancelNotice{}, fmt.Errorf("loading cancel %d: %w", actionID, err)
	}
	if n.Task().Status() != domain.TaskCancelled {
		return domain.CancelNotice{}, fmt.Errorf("action %d is not cancelled: %w", actionID, domain.ErrNotFound)
	}
	return n, nil
}

// CancelFeedback confirms the cancel on the device's final word about it
// (closed, canceled or rejected: our cancels only ever hit tasks the device
// had not started, so there is nothing to reject); other executions are
// acknowledged without change.
func (s *UseCases) CancelFeedback(ctx context.Context, deviceID domain.DeviceID, actionID int64, fb Feedback) (domain.CancelNotice, error) {
	if err := validateFeedback(fb); err != nil {
		return domain.CancelNotice{}, err
	}
	switch fb.Execution {
	case "closed", "canceled", "rejected":
	default:
		return s.CancelAction(ctx, deviceID, actionID)
	}
	now := s.clock.Now()
	n, err := s.actions.UpdateCancel(ctx, deviceID, actionID, func(n *domain.CancelNotice) error {
		_, err := n.Confirm(now)
		return err
	})
	if err != nil {
		return domain.CancelNotice{}, fmt.Errorf("confirming cancel %d: %w", actionID, err)
	}
	return n, nil
}

// ConfigData stores the device's attributes and, when they carry the
// version attribute, the device's running version. A version that is not
// Semantic Versioning refuses the whole report.
func (s *UseCases) ConfigData(ctx context.Context, deviceID domain.DeviceID, mode string, data map[string]string) (domain.DeviceAttributes, error) {
	m, err := domain.ParseAttributeMode(mode)
	if err != nil {
		return domain.DeviceAttributes{}, err
	}
	var version domain.Version
	if raw, ok := data[s.versionAttr]; ok && m != domain.AttributesRemove {
		if version, err = domain.ParseVersion("data."+s.versionAttr, raw); err != nil {
			return domain.DeviceAttributes{}, err
		}
	}
	now := s.clock.Now()
	attrs, err := s.attrs.Update(ctx, deviceID, func(a *domain.DeviceAttributes) error {
		return a.Apply(m, data, now)
	})
	if err != nil {
		return domain.DeviceAttributes{}, fmt.Errorf("storing device attributes: %w", err)
	}
	if !version.IsZero() {
		read, err := s.judgeReportedVersion(ctx, deviceID, version)
		if err != nil {
			return domain.DeviceAttributes{}, err
		}
		// Stored at once rather than written behind: the next poll checks
		// with it. Unless a success moved the version since the read, past
		// the report (above it; below it, a rollback's): the report was
		// made before the device knew better (event rule 7,
		// CheckInput.WithCommitted) and the success's version stands.
		if _, err := s.repo.Update(ctx, deviceID, func(d *domain.Device) error {
			in := domain.CheckInput{Device: read, Reported: version}.WithCommitted(d.CurrentVersion())
			d.Seen(in.Reported, now)
			return nil
		}, domain.AuditRecord{}); err != nil {
			return domain.DeviceAttributes{}, fmt.Errorf("recording the reported version: %w", err)
		}
	}
	return attrs, nil
}

// judgeReportedVersion runs the check with a version the device reports
// that may contradict a success: below its stored one, or above it, which
// contradicts a rollback's success (domain.Contradicts; the check, which
// has the offers and the last task, decides whether it does). A DDI
// device reports its version only here, and its polls check with the
// stored one: once this report is stored, no poll could tell that it
// contradicts a success (event rule 7, a reverted install), so the check
// that judges it runs first, on the device as stored. Any other report
// needs no check before the next poll. It returns the device as it read
// it.
func (s *UseCases) judgeReportedVersion(ctx context.Context, deviceID domain.DeviceID, version domain.Version) (domain.Device, error) {
	dev, err := s.devices.IdentifyDevice(ctx, deviceID)
	if err != nil {
		return domain.Device{}, err
	}
	if stored := dev.Device.CurrentVersion(); stored.IsZero() || !domain.Contradicts(stored, version, true) {
		return dev.Device, nil
	}
	if _, err := s.check(ctx, dev, version); err != nil {
		return domain.Device{}, fmt.Errorf("judging the reported version: %w", err)
	}
	return dev.Device, nil
}

// check is a DDI device's check, whichever call makes it (a poll, or
// configData reporting a version that may contradict a success): it offers only
// firmware with the sha1 hawkBit agents verify (domain.DeliverWithSHA1),
// so that no call creates a task the device's next poll cannot deliver.
func (s *UseCases) check(ctx context.Context, dev ports.AuthenticatedDevice, version domain.Version) (ports.CheckResult, error) {
	return s.devices.Check(ctx, ports.CheckRequest{Device: dev, Model: dev.Device.Model(), CurrentVersion: version.String(),
		Delivery: domain.DeliverWithSHA1})
}

// DDI feedback vocabulary (hawkBit's DDI API, plus "download", which newer
// hawkBit versions send when a download starts).
var (
	executions = []string{"closed", "proceeding", "canceled", "scheduled", "rejected", "resumed", "downloaded", "download"}
	finishes   = []string{"success", "failure", "none"}
)

// Error codes the DDI translation writes on tasks a device ends.
const (
	CodeFailure  = "DDI_FAILURE"
	CodeCanceled = "DDI_CANCELED"
	CodeRejected = "DDI_REJECTED"
)

func validateFeedback(fb Feedback) error {
	if !oneOf(fb.Execution, executions) {
		return &domain.ValidationError{Field: "status.execution", Reason: "must be one of " + strings.Join(executions, ", ")}
	}
	if fb.Finished != "" && !oneOf(fb.Finished, finishes) {
		return &domain.ValidationError{Field: "status.result.finished", Reason: "must be one of " + strings.Join(finishes, ", ")}
	}
	return nil
}

func oneOf(s string, set []string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}

// Event translates a DDI feedback on an action into a task event, or
// reports that it carries no change (apply false: "scheduled"). The
// translation:
//
//	closed + success|none          → succeeded
//	closed + failure               → failed (DDI_FAILURE, the details as message)
//	canceled                       → failed (DDI_CANCELED)
//	rejected                       → failed (DDI_REJECTED)
//	downloaded                     → downloaded
//	proceeding|resumed|download    → downloading, or installing once the
//	                                 task is downloaded; progress cnt/of
//
// The event id is a digest of the action, the feedback and the status it
// maps to, so an identical feedback sent again is a replay.
func Event(actionID int64, current domain.TaskStatus, fb Feedback) (ports.EventRequest, bool, error) {
	if err := validateFeedback(fb); err != nil {
		return ports.EventRequest{}, false, err
	}
	var ev ports.EventRequest
	switch fb.Execution {
	case "scheduled":
		return ports.EventRequest{}, false, nil
	case "closed":
		ev.Status = domain.TaskSucceeded.String()
		if fb.Finished == "failure" {
			ev.Status, ev.ErrorCode = domain.TaskFailed.String(), CodeFailure
		}
	case "canceled":
		ev.Status, ev.ErrorCode = domain.TaskFailed.String(), CodeCanceled
	case "rejected":
		ev.Status, ev.ErrorCode = domain.TaskFailed.String(), CodeRejected
	case "downloaded":
		ev.Status = domain.TaskDownloaded.String()
	default:
		ev.Status = domain.TaskDownloading.String()
		if current == domain.TaskDownloaded || current == domain.TaskInstalling {
			ev.Status = domain.TaskInstalling.String()
		}
		if p := fb.Progress; p != nil && p.Of > 0 {
			pct := percent(p.Cnt, p.Of)
			ev.Progress = &pct
		}
	}
	if ev.Status == domain.TaskFailed.String() {
		ev.ErrorMessage = message(fb.Details)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%s\x00", actionID, ev.Status, fb.Execution, fb.Finished)
	if fb.Progress != nil {
		fmt.Fprintf(h, "%d/%d", fb.Progress.Cnt, fb.Progress.Of)
	}
	for _, d := range fb.Details {
		h.Write([]byte("\x00" + strconv.Quote(d)))
	}
	ev.EventID = "ddi-" + hex.EncodeToString(h.Sum(nil))[:40]
	return ev, true, nil
}

// percent is cnt of of (of > 0) as a percentage, 0–100, rounded down.
// The agent chooses both numbers: cnt*100 is computed in 128 bits, so a
// huge cnt cannot wrap into a wrong (or negative) percentage.
func percent(cnt, of int) int {
	switch {
	case cnt <= 0:
		return 0
	case cnt >= of:
		return 100
	}
	hi, lo := bits.Mul64(uint64(cnt), 100)
	q, _ := bits.Div64(hi, lo, uint64(of)) // cnt < of: the quotient is below 100
	return int(q)
}

// message joins a feedback's details into an error message the task can
// keep: valid UTF-8, no NUL, at most domain.MaxMessageLen bytes.
func message(details []string) string {
	msg := strings.Join(details, "; ")
	msg = strings.ReplaceAll(strings.ToValidUTF8(msg, "\uFFFD"), "\x00", " ")
	msg = strings.TrimSpace(msg)
	if len(msg) > domain.MaxMessageLen {
		cut := domain.MaxMessageLen
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	return msg
}
