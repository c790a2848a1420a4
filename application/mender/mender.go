// Package mender holds the use cases of Mender's device API (adapters/mender
// speaks its HTTP): authentication by signed requests and session tokens,
// admission of pending devices, and the deployment and status calls
// translated onto the device use cases of package application, with the
// protocol's own words (Auth, Provides). It adds no rule of its own.
package mender

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Config tunes the Mender device API's use cases.
type Config struct {
	// IDKey names the id_data key that carries the device id
	// (OTA_MENDER_ID_KEY, default device_id).
	IDKey string
	// AcceptPending records devices that authenticate with a key nobody
	// registered, for an operator to accept or reject
	// (OTA_MENDER_ACCEPT_PENDING). Off: only preauthorized devices get in.
	AcceptPending bool
	// TokenTTL is how long a session token is valid.
	TokenTTL time.Duration
	// Secret signs session tokens (OTA_MENDER_TOKEN_SECRET).
	Secret domain.SessionSecret
	// RequestTTL is how long an auth request is kept after its last change
	// (OTA_MENDER_AUTH_REQUEST_TTL, default domain.DefaultAuthRequestTTL).
	RequestTTL time.Duration
	// MaxPending bounds the pending auth requests (default
	// MaxPendingAuthRequests).
	MaxPending int
	// AuthLimiter is the budget of authentication requests per source
	// address (OTA_MENDER_AUTH_RATE_LIMIT, OTA_MENDER_AUTH_RATE_BURST),
	// spent before any parsing or signature work; nil is unlimited.
	AuthLimiter ports.RateLimiter
}

// DefaultTokenTTL bounds how long a revoked device keeps working on
// a token it already holds; devices authenticate again on their own.
const DefaultTokenTTL = time.Hour

// MaxPendingAuthRequests bounds the pending requests unadmitted devices
// can make the service store (anyone can send one; each needs a valid
// signature by the key it presents, which proves nothing about the
// sender). Requests expire (Config.RequestTTL), operators delete
// them, and each source address has a budget (Config.AuthLimiter),
// so a flood cannot keep a real device off the list for good.
const MaxPendingAuthRequests = 10000

// DeviceAdmissions stores the public keys devices authenticate with
// (domain.DeviceAdmission) and admits registered devices' keys.
// Registering a device with its key is the operators'
// (application.KeyedAdmissions). Not-found is domain.ErrNotFound.
type DeviceAdmissions interface {
	// Get returns the device's admission.
	Get(ctx context.Context, deviceID domain.DeviceID) (domain.DeviceAdmission, error)
	// Generation returns the device's current session token generation
	// (domain.DeviceAdmission.Generation) without its key: what every call
	// a session token admits checks, so it must be cheap.
	Generation(ctx context.Context, deviceID domain.DeviceID) (int64, error)
	// Admit stores a registered device's admission, replacing any key it
	// had (create==true when it had none); domain.ErrNotFound if the
	// device is not registered.
	// rec, the operator's record of the change (the zero record: none), is
	// stored with it.
	Admit(ctx context.Context, deviceID domain.DeviceID, fn func(current *domain.DeviceAdmission) (domain.DeviceAdmission, error),
		rec domain.AuditRecord) (domain.DeviceAdmission, error)
	// Registered returns those of the devices that are registered, with
	// their admissions, in one read (the pending list flags requests for
	// registered devices).
	Registered(ctx context.Context, deviceIDs []domain.DeviceID) (map[domain.DeviceID]ports.RegisteredDevice, error)
}

// AuthRequests stores the requests of devices waiting to be admitted, one
// per device and key. Not-found is domain.ErrNotFound, also for the zero
// request id (one the edge could not parse).
type AuthRequests interface {
	// Ask serialises every Ask (so that the bound on pending requests
	// holds under concurrent requests), loads the request of the device
	// with key (nil if none) and, when there is none, the number of
	// pending requests (0 otherwise), and stores what fn returns; fn
	// returning nil stores nothing.
	Ask(ctx context.Context, deviceID domain.DeviceID, key domain.DeviceKey,
		fn func(current *domain.AuthRequest, pending int) (*domain.AuthRequest, error)) error
	// Get returns a request by id.
	Get(ctx context.Context, id domain.UUID) (domain.AuthRequest, error)
	// List returns the requests with the given status, oldest first, at
	// most limit.
	List(ctx context.Context, status domain.AuthRequestStatus, limit int) ([]domain.AuthRequest, error)
	// Update loads a request locked, lets fn change it, and stores it
	// with rec (the zero record: none).
	Update(ctx context.Context, id domain.UUID, fn func(*domain.AuthRequest) error, rec domain.AuditRecord) (domain.AuthRequest, error)
	// Accept registers the request's device when it is not registered
	// (dev), stores the admission admit makes of the device's current one
	// (nil if none) and deletes the request, atomically; domain.ErrNotFound
	// if the request is gone or no longer pending.
	// rec is the operator's record of the acceptance, stored with it.
	Accept(ctx context.Context, id domain.UUID, dev *domain.Device,
		admit func(current *domain.DeviceAdmission) (domain.DeviceAdmission, error), rec domain.AuditRecord) error
	// Delete deletes a request, pending or rejected, with the operator's
	// record of it.
	Delete(ctx context.Context, id domain.UUID, rec domain.AuditRecord) error
	// DeleteExpired deletes every request last changed before cutoff
	// (domain.AuthRequest.ExpiredBy) and returns how many.
	DeleteExpired(ctx context.Context, cutoff time.Time) (int, error)
}

// ArtifactCatalog finds firmware by the artifact name Mender devices
// report.
type ArtifactCatalog interface {
	// ByArtifactName returns the firmware of model published under name,
	// or domain.ErrNotFound.
	ByArtifactName(ctx context.Context, model, name string) (domain.Firmware, error)
}

// TaskLogs keeps the logs devices upload about their tasks.
type TaskLogs interface {
	// Put stores a task's log, replacing the previous one.
	Put(ctx context.Context, l domain.TaskLog) error
	// Get returns a task's log, or domain.ErrNotFound if none was uploaded.
	Get(ctx context.Context, taskID domain.UUID) (domain.TaskLog, error)
}

// Ports are the ports the Mender use cases run on. Every field is
// required.
type Ports struct {
	// Devices is the device use cases: the check and events.
	Devices    ports.DeviceService
	Repo       ports.DeviceRepository
	Rollouts   ports.RolloutRepository
	Tasks      application.TaskTransactor
	Attributes ports.DeviceAttributes
	Admissions DeviceAdmissions
	Requests   AuthRequests
	Catalog    ArtifactCatalog
	Logs       TaskLogs
	Clock      ports.Clock
	IDs        ports.IDGenerator
	Metrics    ports.Metrics
	// QueueObserver hears of requests dropped because the pending queue
	// is full.
	QueueObserver AuthQueueObserver
}

// UseCases implements Service and AdmissionService:
// Mender's device API translated onto the device use cases. Admission and
// session tokens are domain rules (domain.DeviceAdmission,
// domain.IssueSessionToken); the deployment is the check, a status report
// is a task event.
type UseCases struct {
	p   Ports
	cfg Config
}

var (
	_ Service          = (*UseCases)(nil)
	_ AdmissionService = (*UseCases)(nil)
)

// New builds the Mender use cases.
func New(p Ports, cfg Config) (*UseCases, error) {
	if p.Devices == nil || p.Repo == nil || p.Rollouts == nil || p.Tasks == nil || p.Attributes == nil || p.Admissions == nil ||
		p.Requests == nil || p.Catalog == nil || p.Logs == nil || p.Clock == nil || p.IDs == nil || p.Metrics == nil || p.QueueObserver == nil {
		return nil, errors.New("mender: every dependency is required")
	}
	if cfg.IDKey == "" || len(cfg.Secret) < domain.MinSessionSecretLen {
		return nil, errors.New("mender: the use cases need an id_data key and a session secret of at least 32 bytes")
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = DefaultTokenTTL
	}
	if cfg.RequestTTL <= 0 {
		cfg.RequestTTL = domain.DefaultAuthRequestTTL
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = MaxPendingAuthRequests
	}
	if cfg.AuthLimiter == nil {
		cfg.AuthLimiter = ports.Unlimited{}
	}
	return &UseCases{p: p, cfg: cfg}, nil
}

// authBody is Mender's authentication request.
type authBody struct {
	IDData      *string `json:"id_data"`
	Pubkey      *string `json:"pubkey"`
	TenantToken string  `json:"tenant_token"`
}

// Authenticate verifies the request's signature over its exact bytes and
// answers an admitted device (its registered key presented and verified)
// with a fresh session token. Anything else is domain.ErrUnauthorized; a
// request signed by the key it presents is recorded as pending when
// operators accept pending devices. Each source address has a budget of
// requests (anyone may send them, and each costs a signature check):
// over it, ports.RateLimitedError.
func (s *UseCases) Authenticate(ctx context.Context, req Auth) (string, error) {
	if ok, wait := s.cfg.AuthLimiter.Allow(req.Source); !ok {
		return "", &ports.RateLimitedError{Wait: wait}
	}
	var b authBody
	if err := json.Unmarshal(req.Body, &b); err != nil {
		return "", &domain.ValidationError{Field: "body", Reason: "must be Mender's authentication request: {id_data, pubkey, tenant_token}"}
	}
	if b.IDData == nil || b.Pubkey == nil {
		return "", &domain.ValidationError{Field: "body", Reason: "id_data and pubkey are required"}
	}
	key, err := domain.ParseDeviceKey("pubkey", *b.Pubkey)
	if err != nil {
		return "", err
	}
	deviceID, deviceType, err := s.identity(*b.IDData)
	if err != nil {
		return "", err
	}
	adm, err := s.p.Admissions.Get(ctx, deviceID)
	switch {
	case err == nil:
		if adm.Admits(key, req.Body, req.Signature) {
			return s.issue(adm)
		}
	case !errors.Is(err, domain.ErrNotFound):
		return "", fmt.Errorf("loading admission: %w", err)
	}
	if !s.cfg.AcceptPending || !key.Verify(req.Body, req.Signature) {
		return "", domain.ErrUnauthorized
	}
	if err := s.recordPending(ctx, deviceID, *b.IDData, key, deviceType); err != nil {
		return "", err
	}
	return "", domain.ErrUnauthorized
}

// identity reads the device id (the configured key) and device type from
// Mender's id_data, a JSON object encoded as a string.
// This is the Mender edge's one parse of the device id of a device that
// is not yet admitted.
func (s *UseCases) identity(idData string) (deviceID domain.DeviceID, deviceType string, err error) {
	if err := domain.ValidateText("id_data", idData, domain.MaxIdentityDataLen); err != nil {
		return domain.DeviceID{}, "", err
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(idData), &m); err != nil {
		return domain.DeviceID{}, "", &domain.ValidationError{Field: "id_data", Reason: "must be a JSON object encoded as a string"}
	}
	raw, _ := m[s.cfg.IDKey].(string)
	if raw == "" {
		return domain.DeviceID{}, "", &domain.ValidationError{Field: "id_data", Reason: fmt.Sprintf("must carry the device id as %q", s.cfg.IDKey)}
	}
	id, err := domain.ParseDeviceID(raw)
	if err != nil {
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			return domain.DeviceID{}, "", &domain.ValidationError{Field: "id_data." + s.cfg.IDKey, Reason: ve.Reason}
		}
		return domain.DeviceID{}, "", err
	}
	deviceType, _ = m["device_type"].(string)
	return id, deviceType, nil
}

func (s *UseCases) issue(adm domain.DeviceAdmission) (string, error) {
	now := s.p.Clock.Now()
	tok, err := domain.IssueSessionToken(s.cfg.Secret, domain.SessionClaims{
		DeviceID: adm.DeviceID(), Generation: adm.Generation(), Expires: now.Add(s.cfg.TokenTTL),
	}, now)
	if err != nil {
		return "", fmt.Errorf("issuing session token: %w", err)
	}
	return tok, nil
}

// recordPending records the device's request with key, once: the same key
// again changes nothing (a rejected key stays rejected until its request
// expires), another key is another request. Expired requests go first, and
// a new one is stored only while there is room (domain.PendingRoom).
func (s *UseCases) recordPending(ctx context.Context, deviceID domain.DeviceID, idData string, key domain.DeviceKey, deviceType string) error {
	now := s.p.Clock.Now()
	if err := s.deleteExpired(ctx, now); err != nil {
		return err
	}
	full := -1
	err := s.p.Requests.Ask(ctx, deviceID, key, func(cur *domain.AuthRequest, pending int) (*domain.AuthRequest, error) {
		if cur != nil {
			return nil, nil
		}
		if !domain.PendingRoom(pending, s.cfg.MaxPending) {
			full = pending
			return nil, nil
		}
		r, err := domain.NewAuthRequest(s.p.IDs.NewID(), deviceID, idData, key, deviceType, now)
		if err != nil {
			return nil, err
		}
		return &r, nil
	})
	if err != nil {
		return fmt.Errorf("recording auth request: %w", err)
	}
	if full >= 0 {
		s.p.QueueObserver.AuthQueueFull(deviceID, full)
	}
	return nil
}

// deleteExpired deletes the requests expired at now
// (domain.AuthRequest.ExpiredBy).
func (s *UseCases) deleteExpired(ctx context.Context, now time.Time) error {
	if _, err := s.p.Requests.DeleteExpired(ctx, domain.AuthRequestCutoff(now, s.cfg.RequestTTL)); err != nil {
		return fmt.Errorf("deleting expired auth requests: %w", err)
	}
	return nil
}

// Session verifies a session token's signature and expiry without the
// store, then that it is of the device's current token generation
// (domain.SessionClaims.Current): after an operator rotates a device's
// key, its older tokens are refused at its next call, and mender-client
// authenticates again (with the new key) on a 401. Every route a session
// admits reads the store for the device anyway; this is one more read, by
// primary key, of one column.
func (s *UseCases) Session(ctx context.Context, token string) (domain.DeviceID, error) {
	c, err := domain.VerifySessionToken(s.cfg.Secret, token, s.p.Clock.Now())
	if err != nil {
		return domain.DeviceID{}, err
	}
	gen, err := s.p.Admissions.Generation(ctx, c.DeviceID)
	if errors.Is(err, domain.ErrNotFound) {
		return domain.DeviceID{}, domain.ErrUnauthorized
	}
	if err != nil {
		return domain.DeviceID{}, fmt.Errorf("loading token generation: %w", err)
	}
	if !c.Current(gen) {
		return domain.DeviceID{}, domain.ErrUnauthorized
	}
	return c.DeviceID, nil
}

// Next runs the check with the version the device runs: that of the
// firmware of its device type published under the artifact name it
// reports (domain.RunningVersion). The check offers only firmware with an
// artifact name (domain.DeliverWithArtifactName); a task without one that
// the device had already started otherwise is still refused
// (domain.Firmware.CheckArtifactDeliverable).
func (s *UseCases) Next(ctx context.Context, deviceID domain.DeviceID, p Provides) (*ports.TaskView, error) {
	if err := domain.ValidateIdentifier("device_type", p.DeviceType); err != nil {
		return nil, err
	}
	// Required, as Mender's server requires it: an absent name would read
	// as an unknown image, and revert the device's last success (event
	// rule 7) on a client's omission.
	if p.ArtifactName == "" {
		return nil, &domain.ValidationError{Field: "artifact_name", Reason: "is required"}
	}
	if err := domain.ValidateText("artifact_name", p.ArtifactName, domain.MaxArtifactNameLen); err != nil {
		return nil, err
	}
	var named *domain.Firmware
	fw, err := s.p.Catalog.ByArtifactName(ctx, p.DeviceType, p.ArtifactName)
	switch {
	case err == nil:
		named = &fw
	case !errors.Is(err, domain.ErrNotFound):
		return nil, fmt.Errorf("looking up artifact %q: %w", p.ArtifactName, err)
	}
	dev, err := s.identify(ctx, deviceID)
	if err != nil {
		return nil, err
	}
	v, err := s.check(ctx, dev, p.DeviceType, domain.RunningVersion(named))
	if err != nil || v == nil {
		return nil, err
	}
	if err := v.Firmware.CheckArtifactDeliverable(); err != nil {
		return nil, err
	}
	return v, nil
}

// identify loads the device a session token named, with its task state
// (the token proved who it is; the device may have been removed since).
func (s *UseCases) identify(ctx context.Context, deviceID domain.DeviceID) (ports.AuthenticatedDevice, error) {
	dev, err := s.p.Devices.IdentifyDevice(ctx, deviceID)
	if errors.Is(err, domain.ErrNotFound) {
		return ports.AuthenticatedDevice{}, domain.ErrUnauthorized
	}
	if err != nil {
		return ports.AuthenticatedDevice{}, fmt.Errorf("loading device: %w", err)
	}
	return dev, nil
}

// check is the one place the Mender translation calls the check use case.
func (s *UseCases) check(ctx context.Context, dev ports.AuthenticatedDevice, model string, running domain.Version) (*ports.TaskView, error) {
	res, err := s.p.Devices.Check(ctx, ports.CheckRequest{Device: dev, Model: model, CurrentVersion: running.String(),
		Delivery: domain.DeliverWithArtifactName})
	if err != nil {
		return nil, err
	}
	return res.Task, nil
}

// Mender deployment statuses (Mender's device API).
const (
	menderDownloading      = "downloading"
	menderInstalling       = "installing"
	menderRebooting        = "rebooting"
	menderSuccess          = "success"
	menderFailure          = "failure"
	menderAlreadyInstalled = "already-installed"
)

// Error code of a task a Mender device reports as failed.
const CodeFailure = "MENDER_FAILURE"

// Event translates a Mender deployment status into a task event, or
// reports that it carries no change (apply false: the pause_before_*
// statuses of update control maps). The translation:
//
//	downloading                 → downloading
//	installing, rebooting       → installing
//	success                     → succeeded
//	already-installed           → succeeded (ALREADY_INSTALLED: the device
//	                              ran the artifact already and downloaded
//	                              nothing)
//	failure                     → failed (MENDER_FAILURE)
//
// The event id is a digest of the task and the status it maps to (and the
// already-installed marker), so a repeated report (Mender sends
// downloading three times and installing twice) is a replay.
func Event(taskID, status string) (ports.EventRequest, bool, error) {
	var ev ports.EventRequest
	switch status {
	case menderDownloading:
		ev.Status = domain.TaskDownloading.String()
	case menderInstalling, menderRebooting:
		ev.Status = domain.TaskInstalling.String()
	case menderSuccess:
		ev.Status = domain.TaskSucceeded.String()
	case menderAlreadyInstalled:
		ev.Status, ev.ErrorCode = domain.TaskSucceeded.String(), domain.CodeAlreadyInstalled
	case menderFailure:
		ev.Status, ev.ErrorCode = domain.TaskFailed.String(), CodeFailure
		ev.ErrorMessage = "the device reported failure (see the task's log)"
	case "pause_before_installing", "pause_before_committing", "pause_before_rebooting":
		return ports.EventRequest{}, false, nil
	default:
		return ports.EventRequest{}, false, &domain.ValidationError{Field: "status",
			Reason: "must be one of downloading, installing, rebooting, success, failure, already-installed, pause_before_*"}
	}
	key := taskID + "\x00" + ev.Status
	if ev.ErrorCode == domain.CodeAlreadyInstalled {
		key += "\x00" + ev.ErrorCode
	}
	sum := sha256.Sum256([]byte(key))
	ev.EventID = "mender-" + hex.EncodeToString(sum[:])[:40]
	return ev, true, nil
}

// Status applies a deployment status to the device's task. A task whose
// rollout was cancelled or firmware revoked before the device began
// installing is stopped first (domain.Task.StopBeforeInstall), and every
// report on a cancelled or finished task is domain.ErrTaskFinished (Mender
// answers 409: the device aborts). A late intermediate status that would
// move the task backwards is acknowledged without change.
func (s *UseCases) Status(ctx context.Context, deviceID domain.DeviceID, taskID domain.UUID, status string) error {
	ev, apply, err := Event(taskID.String(), status)
	if err != nil {
		return err
	}
	v, err := s.p.Devices.GetTask(ctx, deviceID, taskID)
	if err != nil {
		return err
	}
	final := application.EndsTask(ev.Status)
	// A failure before installing is judged as the withdrawal it may
	// follow: a revoked image is refused mid-download (410), and the
	// client then reports failure — the service's doing, not a failed
	// attempt of the device's, to count against the rollout.
	if !final || ev.Status == domain.TaskFailed.String() {
		if v.Task, err = s.stopBeforeInstall(ctx, v); err != nil {
			return err
		}
	}
	if v.Task.Status() == domain.TaskCancelled {
		return &domain.TransitionError{Kind: domain.ErrTaskFinished, Detail: "the deployment was cancelled (" + v.Task.ErrorCode() + ")"}
	}
	if !apply {
		return nil
	}
	if _, err := s.p.Devices.ReportEvent(ctx, deviceID, taskID, ev); err != nil {
		if !final && errors.Is(err, domain.ErrInvalidTransition) {
			return nil
		}
		return err
	}
	return nil
}

// stopBeforeInstall stores domain.Task.StopBeforeInstall's decision.
func (s *UseCases) stopBeforeInstall(ctx context.Context, v ports.TaskView) (domain.Task, error) {
	r, err := s.p.Rollouts.Get(ctx, v.Task.RolloutID())
	if err != nil {
		return domain.Task{}, fmt.Errorf("loading rollout: %w", err)
	}
	return application.StopBeforeInstall(ctx, s.p.Tasks, s.p.Metrics, v, r, s.p.Clock.Now(), (*domain.Task).StopBeforeInstall)
}

// Log keeps the device's log on its task (bounded, see domain.NewTaskLog).
func (s *UseCases) Log(ctx context.Context, deviceID domain.DeviceID, taskID domain.UUID, lines []domain.LogLine) error {
	if _, err := s.p.Devices.GetTask(ctx, deviceID, taskID); err != nil {
		return err
	}
	if err := s.p.Logs.Put(ctx, domain.NewTaskLog(taskID, lines, s.p.Clock.Now())); err != nil {
		return fmt.Errorf("storing task log: %w", err)
	}
	return nil
}

// Inventory stores the device's inventory as its attributes
// (domain.FitInventory keeps an oversized report storable).
func (s *UseCases) Inventory(ctx context.Context, deviceID domain.DeviceID, items []domain.InventoryItem, replace bool) error {
	mode := domain.AttributesMerge
	if replace {
		mode = domain.AttributesReplace
	}
	data := domain.FitInventory(items)
	now := s.p.Clock.Now()
	if _, err := s.p.Attributes.Update(ctx, deviceID, func(a *domain.DeviceAttributes) error {
		if mode == domain.AttributesMerge && a.MergedLen(data) > domain.MaxAttributes {
			mode = domain.AttributesReplace
		}
		return a.Apply(mode, data, now)
	}); err != nil {
		return fmt.Errorf("storing inventory: %w", err)
	}
	return nil
}

// Pending lists the devices waiting for an operator, oldest first, each
// flagged when the device it names is registered already
// (domain.AuthRequest.ConflictWith). Expired requests are deleted first.
func (s *UseCases) Pending(ctx context.Context) ([]PendingRequest, error) {
	if err := s.deleteExpired(ctx, s.p.Clock.Now()); err != nil {
		return nil, err
	}
	rs, err := s.p.Requests.List(ctx, domain.AuthRequestPending, s.cfg.MaxPending)
	if err != nil {
		return nil, err
	}
	ids := make([]domain.DeviceID, 0, len(rs))
	for _, r := range rs {
		ids = append(ids, r.DeviceID())
	}
	known, err := s.p.Admissions.Registered(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("loading registered devices: %w", err)
	}
	out := make([]PendingRequest, 0, len(rs))
	for _, r := range rs {
		k := known[r.DeviceID()]
		out = append(out, PendingRequest{Request: r, Conflict: r.ConflictWith(k.Model, k.Admission)})
	}
	return out, nil
}

// Accept admits the request's device with exactly the key the request
// names (a request's key never changes). A device not registered yet is
// registered with the model (or its device type); a registered one keeps
// its model and has its key replaced (its tokens' generation moves on),
// but only when the operator says ReplaceKey (domain.KeyConflict.CheckAccept).
// An expired request is gone.
func (s *UseCases) Accept(ctx context.Context, actor domain.Actor, requestID domain.UUID, req AcceptRequest) (domain.Device, error) {
	r, err := s.p.Requests.Get(ctx, requestID)
	if err != nil {
		return domain.Device{}, fmt.Errorf("loading auth request: %w", err)
	}
	now := s.p.Clock.Now()
	if r.ExpiredBy(domain.AuthRequestCutoff(now, s.cfg.RequestTTL)) {
		return domain.Device{}, fmt.Errorf("auth request %s expired: %w", requestID, domain.ErrNotFound)
	}
	if r.Status() != domain.AuthRequestPending {
		return domain.Device{}, &domain.TransitionError{Kind: domain.ErrInvalidTransition, Detail: "the request was rejected; the device must ask again with a new key"}
	}
	dev, err := s.p.Repo.Get(ctx, r.DeviceID())
	var newDev *domain.Device
	switch {
	case errors.Is(err, domain.ErrNotFound):
		m, err := r.AcceptModel(req.Model)
		if err != nil {
			return domain.Device{}, err
		}
		// Its token is never shown: a Mender device authenticates by key.
		creds, err := application.NewDeviceCredentials(r.DeviceID(), m, "", now)
		if err != nil {
			return domain.Device{}, err
		}
		dev = creds.Device
		newDev = &dev
	case err != nil:
		return domain.Device{}, fmt.Errorf("loading device: %w", err)
	default:
		var cur *domain.DeviceAdmission
		switch a, err := s.p.Admissions.Get(ctx, r.DeviceID()); {
		case err == nil:
			cur = &a
		case !errors.Is(err, domain.ErrNotFound):
			return domain.Device{}, fmt.Errorf("loading admission: %w", err)
		}
		if err := r.ConflictWith(dev.Model(), cur).CheckAccept(r.DeviceID(), req.ReplaceKey); err != nil {
			return domain.Device{}, err
		}
		if req.Model != "" && req.Model != dev.Model() {
			return domain.Device{}, domain.ErrModelMismatch
		}
	}
	admit := func(cur *domain.DeviceAdmission) (domain.DeviceAdmission, error) {
		return domain.AdmitKey(cur, r.DeviceID(), r.Key(), now)
	}
	rec, err := actor.Record(now, domain.AuditDeviceAccept, r.DeviceID().String(), nil,
		map[string]any{"request_id": requestID.String(), "model": dev.Model(), "public_key_fingerprint": r.Key().Fingerprint(),
			"registered": newDev != nil})
	if err != nil {
		return domain.Device{}, err
	}
	admitted := application.DeviceEvent(dev)
	admitted["public_key_fingerprint"] = r.Key().Fingerprint()
	events := []domain.EventType{domain.EventDeviceAdmitted}
	if newDev != nil {
		events = []domain.EventType{domain.EventDeviceRegistered, domain.EventDeviceAdmitted}
	}
	for _, typ := range events {
		a, err := domain.NewAnnouncement(typ, now, admitted)
		if err != nil {
			return domain.Device{}, err
		}
		rec = rec.Announcing(a)
	}
	if err := s.p.Requests.Accept(ctx, requestID, newDev, admit, rec); err != nil {
		return domain.Device{}, fmt.Errorf("accepting device: %w", err)
	}
	return dev, nil
}

// Delete deletes a request, pending or rejected: the device, if it asks
// again, makes a new one.
func (s *UseCases) Delete(ctx context.Context, actor domain.Actor, requestID domain.UUID) error {
	if requestID.IsZero() {
		return fmt.Errorf("auth request: %w", domain.ErrNotFound)
	}
	rec, err := actor.Record(s.p.Clock.Now(), domain.AuditDeviceRequestDrop, requestID.String(), nil, nil)
	if err != nil {
		return err
	}
	if err := s.p.Requests.Delete(ctx, requestID, rec); err != nil {
		return fmt.Errorf("deleting auth request: %w", err)
	}
	return nil
}

// Reject refuses a pending device; it stays refused until it presents
// another key.
func (s *UseCases) Reject(ctx context.Context, actor domain.Actor, requestID domain.UUID) (domain.AuthRequest, error) {
	if requestID.IsZero() {
		return domain.AuthRequest{}, fmt.Errorf("auth request: %w", domain.ErrNotFound)
	}
	now := s.p.Clock.Now()
	// The request's device and key never change: read unlocked, for the
	// record and the event.
	q, err := s.p.Requests.Get(ctx, requestID)
	if err != nil {
		return domain.AuthRequest{}, fmt.Errorf("loading auth request: %w", err)
	}
	facts := map[string]any{"request_id": requestID.String(), "device_id": q.DeviceID().String(),
		"public_key_fingerprint": q.Key().Fingerprint()}
	rec, err := actor.Record(now, domain.AuditDeviceReject, requestID.String(), nil, facts)
	if err != nil {
		return domain.AuthRequest{}, err
	}
	a, err := domain.NewAnnouncement(domain.EventDeviceRejected, now, facts)
	if err != nil {
		return domain.AuthRequest{}, err
	}
	rec = rec.Announcing(a)
	r, err := s.p.Requests.Update(ctx, requestID, func(r *domain.AuthRequest) error {
		r.Reject(now)
		return nil
	}, rec)
	if err != nil {
		return domain.AuthRequest{}, fmt.Errorf("rejecting device: %w", err)
	}
	return r, nil
}

// TaskLog returns the log a device uploaded about a task.
func (s *UseCases) TaskLog(ctx context.Context, taskID domain.UUID) (domain.TaskLog, error) {
	if taskID.IsZero() {
		return domain.TaskLog{}, fmt.Errorf("task log: %w", domain.ErrNotFound)
	}
	l, err := s.p.Logs.Get(ctx, taskID)
	if err != nil {
		return domain.TaskLog{}, fmt.Errorf("loading task log: %w", err)
	}
	return l, nil
}

// SetKey admits a registered device with publicKey (preauthorizing a
// device registered without one, or rotating its key).
func (s *UseCases) SetKey(ctx context.Context, actor domain.Actor, deviceID domain.DeviceID, publicKey string) (domain.DeviceAdmission, error) {
	key, err := domain.ParseDeviceKey("public_key", publicKey)
	if err != nil {
		return domain.DeviceAdmission{}, err
	}
	if deviceID.IsZero() {
		return domain.DeviceAdmission{}, fmt.Errorf("device: %w", domain.ErrNotFound)
	}
	now := s.p.Clock.Now()
	rec, err := actor.Record(now, domain.AuditDeviceKeySet, deviceID.String(), nil,
		map[string]any{"public_key_fingerprint": key.Fingerprint()})
	if err != nil {
		return domain.DeviceAdmission{}, err
	}
	a, err := s.p.Admissions.Admit(ctx, deviceID, func(cur *domain.DeviceAdmission) (domain.DeviceAdmission, error) {
		return domain.AdmitKey(cur, deviceID, key, now)
	}, rec)
	if err != nil {
		return domain.DeviceAdmission{}, fmt.Errorf("setting device key: %w", err)
	}
	return a, nil
}
