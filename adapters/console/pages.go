package console

import (
	"crypto/rand"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// flashes are the messages a redirect after a change may show, by key: a
// fixed set, so a crafted link cannot put words on the page.
var flashes = map[string]string{
	"started":   "Rollout started.",
	"published": "Firmware published.",
	"revoked":   "Firmware revoked: it is no longer offered, and its pending tasks are cancelled at each device's next check.",
	"pause":     "Rollout paused.",
	"resume":    "Rollout resumed.",
	"cancel":    "Rollout cancelled.",
	"percent":   "Rollout percentage changed.",
}

func flash(r *http.Request) string { return flashes[r.URL.Query().Get("done")] }

// ---- sign-in ----

type signInData struct {
	Next  string
	Token string // the form's double-submit token
	Error string
	// Accounts: the form asks for a username and password too.
	Accounts bool
	Username string
	// SSO: the page offers single sign-on (WithOIDC).
	SSO bool
}

// safeNext keeps a post-sign-in redirect inside the console.
func safeNext(next string) string {
	if next == Prefix || strings.HasPrefix(next, Prefix+"/") && !strings.ContainsAny(next, "\\") && !strings.Contains(next, "//") {
		return next
	}
	return Prefix + "/"
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if _, err := c.readSession(r); err == nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	c.showSignIn(w, r, http.StatusOK, next, "", "")
}

func (c *Console) showSignIn(w http.ResponseWriter, r *http.Request, status int, next, username, msg string) {
	token, err := c.sessions.signInToken(w, r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, r, status, "signin", page{Title: "Sign in", Data: signInData{Next: next, Token: token, Error: msg,
		Accounts: c.accounts != nil, Username: username, SSO: c.oidc != nil}})
}

// allowSignIn spends one sign-in attempt (httpedge.SpendSignIn). Over
// budget the form answers 429 RATE_LIMITED with Retry-After
// (docs/ERRORS.md), before any password is checked.
func (c *Console) allowSignIn(w http.ResponseWriter, r *http.Request, next, username string) bool {
	var e *ports.RateLimitedError
	if !errors.As(httpedge.SpendSignIn(c.cfg.SignInLimiter, r, username), &e) {
		return true
	}
	w.Header().Set("Retry-After", httpedge.RetryAfterSeconds(e.RetryAfter()))
	c.logger.WarnContext(r.Context(), "console sign-in rate limited", "request_id", httpedge.RequestIDFrom(r.Context()))
	c.showSignIn(w, r, http.StatusTooManyRequests, next, username, "Too many sign-in attempts. Wait a moment and try again.")
	return false
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if !c.parseForm(w, r) {
		return
	}
	next := safeNext(r.PostFormValue("next"))
	if !validSignInToken(r, r.PostFormValue("csrf")) {
		c.showSignIn(w, r, http.StatusForbidden, next, "", "The sign-in form expired. Please try again.")
		return
	}
	username := r.PostFormValue("username")
	if !c.allowSignIn(w, r, next, username) {
		return
	}
	var account domain.AccountRef // the zero AccountRef: the admin token's session
	if username != "" && c.accounts != nil {
		p, err := c.accounts.SignIn(r.Context(), username, r.PostFormValue("password"))
		if errors.Is(err, domain.ErrUnauthorized) {
			c.logger.WarnContext(r.Context(), "console sign-in refused", "request_id", httpedge.RequestIDFrom(r.Context()))
			c.showSignIn(w, r, http.StatusUnauthorized, next, username, "The username or password is wrong.")
			return
		}
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		// The session is the very account the password was checked
		// against: if it is removed meanwhile and its name given to
		// another, the session is refused, not the new account's.
		account, _ = p.Account()
	} else if token := r.PostFormValue("token"); c.cfg.AdminToken == "" || !domain.SecretEqual(token, c.cfg.AdminToken) {
		c.logger.WarnContext(r.Context(), "console sign-in refused", "request_id", httpedge.RequestIDFrom(r.Context()))
		c.showSignIn(w, r, http.StatusUnauthorized, next, "", "That is not the admin token.")
		return
	}
	if _, err := c.sessions.start(w, r, account); err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signOut ends the session the cookie carries. It needs no account: a
// sign-out works while the accounts cannot be read (an outage), and the
// CSRF token, made from the cookie alone, is all it checks.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if !c.parseForm(w, r) {
		return
	}
	if s, ok := c.sessions.read(r); ok {
		if !c.sessions.validCSRF(s, r.PostFormValue("csrf")) {
			c.fail(w, r, http.StatusForbidden, "This form is out of date or did not come from this console. Reload the page and try again.")
			return
		}
		c.sessions.end(w, r, s)
	}
	http.Redirect(w, r, Prefix+"/sign-in", http.StatusSeeOther)
}

// base is the page frame of a signed-in operator.
func (c *Console) base(s session, title, nav string) page {
	return page{Title: title, Nav: nav, SignedIn: true, CSRF: c.sessions.csrf(s), Who: s.who, Webhooks: c.webhooks != nil}
}

// ---- fleet ----

func (c *Console) fleetPage(w http.ResponseWriter, r *http.Request, s session) {
	fleet, err := c.fleet.FleetOverview(r.Context(), "")
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	models := make([]modelView, 0, len(fleet))
	for _, m := range fleet {
		models = append(models, newModelView(m))
	}
	p := c.base(s, "Fleet", "fleet")
	p.Data = models
	c.render(w, r, http.StatusOK, "fleet", p)
}

// ---- rollouts ----

type startForm struct {
	Values map[string]string
	Errors map[string]string
	Error  string
	// Stages are the start form's stage rows as typed (always
	// formStageRows of them).
	Stages []stageInput
}

// postedForm is a form as posted, its fields' values kept to show it again
// with the errors beside them when the change is refused.
func postedForm(r *http.Request, fields []string) startForm {
	form := startForm{Values: map[string]string{}, Errors: map[string]string{}}
	for _, f := range fields {
		form.Values[f] = r.PostFormValue(f)
	}
	return form
}

// stageInput is one stage row of the start form, as typed.
type stageInput struct{ Percentage, MinFinished, SuccessPercent, Soak string }

// stageInputs reads the stage rows posted (or none), padded to formStageRows.
func stageInputs(r *http.Request) []stageInput {
	rows := make([]stageInput, formStageRows)
	if r.PostForm == nil {
		return rows
	}
	at := func(col string, i int) string {
		if vs := r.PostForm[col]; i < len(vs) {
			return vs[i]
		}
		return ""
	}
	for i := range rows {
		rows[i] = stageInput{at(stageColumns[0], i), at(stageColumns[1], i), at(stageColumns[2], i), at(stageColumns[3], i)}
	}
	return rows
}

type rolloutsData struct {
	Rows      []rolloutRow
	Firmwares []domain.Firmware // released, for the start form
	Form      startForm
	Defaults  policyDefaults
}

// policyDefaults are what the start form's empty fields mean, shown as
// help beside them (a placeholder would read as a value already typed).
// They are the domain's defaults, so the help cannot drift from them.
type policyDefaults struct {
	MaxAttempts, MinSample, MinFinished, SuccessPercent int
	TaskTimeout                                         string
}

var startDefaults = policyDefaults{
	MaxAttempts: domain.DefaultMaxAttempts, MinSample: domain.DefaultMinSample,
	MinFinished: domain.DefaultFinished, SuccessPercent: domain.DefaultSuccess,
	TaskTimeout: duration(domain.DefaultTaskTimeout),
}

func (c *Console) rolloutRowsData(r *http.Request) ([]rolloutRow, error) {
	list, err := c.fleet.ListRollouts(r.Context(), ports.RolloutQuery{})
	if err != nil {
		return nil, err
	}
	// The listing names each rollout's firmware, not its status: a revoked
	// firmware's rollouts are marked from the firmware list.
	all, err := c.admin.ListFirmwares(r.Context(), "")
	if err != nil {
		return nil, err
	}
	firmwares := make(map[domain.UUID]domain.Firmware, len(all))
	for _, f := range all {
		firmwares[f.ID()] = f
	}
	rows := make([]rolloutRow, 0, len(list))
	now := c.clock.Now()
	for _, ro := range list {
		rows = append(rows, newRolloutRow(ro, firmwares[ro.Rollout.FirmwareID()], now))
	}
	return rows, nil
}

func (c *Console) rolloutsPage(w http.ResponseWriter, r *http.Request, s session) {
	form := startForm{Values: map[string]string{"firmware_id": r.URL.Query().Get("firmware"), "percentage": "10"},
		Stages: stageInputs(r)}
	c.showRollouts(w, r, s, http.StatusOK, form)
}

func (c *Console) showRollouts(w http.ResponseWriter, r *http.Request, s session, status int, form startForm) {
	rows, err := c.rolloutRowsData(r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	all, err := c.admin.ListFirmwares(r.Context(), "")
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	released := slices.DeleteFunc(all, func(f domain.Firmware) bool { return f.Revoked() })
	// The form's Idempotency-Key (docs/DOMAIN.md, Rollout): one per form
	// shown, and kept when the form is shown again after a refusal, so
	// that submitting it twice, or again after an answer that never came,
	// starts one rollout.
	if form.Values["idempotency_key"] == "" {
		form.Values["idempotency_key"] = rand.Text()
	}
	p := c.base(s, "Rollouts", "rollouts")
	p.Flash = flash(r)
	p.Data = rolloutsData{Rows: rows, Firmwares: released, Form: form, Defaults: startDefaults}
	c.render(w, r, status, "rollouts", p)
}

// rolloutRows is the live refresh of the rollout list. Counting a large
// rollout's tasks is an index scan of every task, so however many tabs
// poll, a replica counts at most once per refresh period and the tabs share
// the answer (which is then at most one period old, as the page already is).
func (c *Console) rolloutRows(w http.ResponseWriter, r *http.Request, _ session) {
	rows, err := c.rows.get(c.clock.Now(), c.cfg.RefreshEvery, func() ([]rolloutRow, error) { return c.rolloutRowsData(r) })
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.renderFragment(w, r, "rollouts", "rollout-rows", rows)
}

// formInt reads an optional integer field: nil when empty.
func formInt(r *http.Request, name string) (*int, error) {
	return optionalField(name, r.PostFormValue(name), strconv.Atoi, "must be a whole number")
}

// optionalField reads the value s of an optional form field with parse:
// nil when it is empty once trimmed, and a ValidationError naming field
// with reason when it does not parse. Every optional number and duration
// of the console's forms is read this way, so that an empty box always
// means "not given" and a bad one is always placed beside its field.
func optionalField[T any](field, s string, parse func(string) (T, error), reason string) (*T, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	v, err := parse(s)
	if err != nil {
		return nil, &domain.ValidationError{Field: field, Reason: reason}
	}
	return &v, nil
}

// fieldError places an error on a form: in errs beside its field when it
// names one of fields (with the API's message), or in general, above the
// form, otherwise; internal errors are logged. It returns the status to
// show the form again with.
func (c *Console) fieldError(r *http.Request, err error, errs map[string]string, general *string, fields ...string) int {
	d := httpedge.DescribeError(err)
	if d.Internal {
		c.logger.ErrorContext(r.Context(), "console form failed", "path", r.URL.Path,
			"request_id", httpedge.RequestIDFrom(r.Context()), "error", err.Error())
	}
	var ve *domain.ValidationError
	field := ""
	switch {
	case errors.As(err, &ve):
		field = formFieldOf(ve.Field)
	case errors.Is(err, domain.ErrArtifactNameTaken):
		field = "artifact_name"
	case errors.Is(err, domain.ErrFirmwareExists):
		field = "version"
	}
	if field != "" && slices.Contains(fields, field) {
		errs[field] = d.Message
	} else {
		*general = sentence(d.Message)
	}
	return d.Status
}

var startFields = append([]string{"firmware_id", "percentage", "max_attempts", "failure_threshold_percent", "min_sample",
	"idempotency_key"}, policyFields...)

func (c *Console) startRollout(w http.ResponseWriter, r *http.Request, s session) {
	form := postedForm(r, startFields)
	form.Stages = stageInputs(r)
	id, err := c.tryStart(r, s)
	if err != nil {
		status := c.fieldError(r, err, form.Errors, &form.Error, startFields...)
		if errors.Is(err, domain.ErrRequestKeyConflict) {
			// The form's first sending started a rollout (its answer was
			// lost) and it was changed since: say so, and give the form a
			// new key, so that a second rollout is started only on purpose.
			form.Values["idempotency_key"] = ""
			form.Error = "This form already started a rollout with other settings (see the list above). Sending it again starts another one."
		}
		c.showRollouts(w, r, s, status, form)
		return
	}
	http.Redirect(w, r, Prefix+"/rollouts/"+url.PathEscape(id)+"?done=started", http.StatusSeeOther)
}

// tryStart reads the start form into the same request as the API's body
// and hands it on: the use case reads the firmware id and the domain
// judges the policy (NewRollout).
func (c *Console) tryStart(r *http.Request, s session) (string, error) {
	req := ports.StartRollout{FirmwareID: r.PostFormValue("firmware_id"), RequestKey: r.PostFormValue("idempotency_key")}
	if err := readPolicy(r, &req.Spec); err != nil {
		return "", err
	}
	pct, err := formInt(r, "percentage")
	if err != nil {
		return "", err
	}
	req.Spec.NoPercentage = pct == nil
	if pct != nil {
		req.Spec.Percentage = *pct
	}
	if req.Spec.MaxAttempts, err = formInt(r, "max_attempts"); err != nil {
		return "", err
	}
	if req.Spec.FailureThresholdPercent, err = formInt(r, "failure_threshold_percent"); err != nil {
		return "", err
	}
	if req.Spec.MinSample, err = formInt(r, "min_sample"); err != nil {
		return "", err
	}
	ro, err := c.admin.StartRollout(r.Context(), s.actor, req)
	if err != nil {
		return "", err
	}
	return ro.ID().String(), nil
}

// rowsCache shares one rollout listing among concurrent refreshes.
type rowsCache struct {
	mu   sync.Mutex // held while loading, so concurrent callers wait and share
	at   time.Time
	rows []rolloutRow
}

// get returns the cached rows when younger than ttl, else loads them. A
// failed load is not cached.
func (rc *rowsCache) get(now time.Time, ttl time.Duration, load func() ([]rolloutRow, error)) ([]rolloutRow, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.rows != nil && now.Sub(rc.at) < ttl && !now.Before(rc.at) {
		return rc.rows, nil
	}
	rows, err := load()
	if err != nil {
		return nil, err
	}
	rc.rows, rc.at = rows, now
	return rows, nil
}

// ---- one rollout ----

type rolloutData struct {
	Rollout  domain.Rollout
	Status   string
	Auto     bool
	Firmware domain.Firmware
	Bar      barView
	Rate     failureRate
	Failures []ports.TaskView
	Policy   policyView
	Error    string
	Actions  []string // the buttons its status offers
}

// pathUUID parses the path value name as a UUID, once, at the edge. An id
// that is not a UUID names nothing: the zero UUID, which the stores answer
// with domain.ErrNotFound, as they answered the unparsed string before.
func pathUUID(r *http.Request, name string) domain.UUID {
	id, _ := domain.ParseUUID(name, r.PathValue(name))
	return id
}

// firmwareByID finds a firmware through the listing (the admin API has no
// single-firmware read).
func (c *Console) firmwareByID(r *http.Request, id domain.UUID) (domain.Firmware, error) {
	all, err := c.admin.ListFirmwares(r.Context(), "")
	if err != nil {
		return domain.Firmware{}, err
	}
	for _, f := range all {
		if f.ID() == id {
			return f, nil
		}
	}
	return domain.Firmware{}, domain.ErrNotFound
}

func (c *Console) rolloutPage(w http.ResponseWriter, r *http.Request, s session) {
	p := c.base(s, "Rollout", "rollouts")
	p.Flash = flash(r)
	c.showRollout(w, r, p, http.StatusOK, "")
}

func (c *Console) showRollout(w http.ResponseWriter, r *http.Request, p page, status int, errMsg string) {
	id := pathUUID(r, "id")
	v, err := c.admin.GetRollout(r.Context(), id)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	fw, err := c.firmwareByID(r, v.Rollout.FirmwareID())
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	failures, err := c.fleet.RecentFailures(r.Context(), id, "50")
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	var actions []string
	switch v.Rollout.Status() {
	case domain.RolloutActive:
		actions = []string{"pause", "cancel"}
	case domain.RolloutPaused:
		actions = []string{"resume", "cancel"}
	}
	p.Title = "Rollout of " + fw.Model() + " " + fw.Version().String()
	p.Data = rolloutData{
		Rollout: v.Rollout, Status: statusLabel(v.Rollout), Auto: v.Rollout.PausedReason() == domain.PausedAuto,
		Firmware: fw, Bar: newBar(v.Stats), Rate: newFailureRate(v.Rollout, v.Stats), Failures: failures,
		Policy: newPolicyView(v.Rollout, fw, v.StageStats, c.clock.Now()), Error: errMsg, Actions: actions,
	}
	c.render(w, r, status, "rollout", p)
}

func (c *Console) rolloutCounts(w http.ResponseWriter, r *http.Request, _ session) {
	v, err := c.admin.GetRollout(r.Context(), pathUUID(r, "id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.renderFragment(w, r, "rollout", "rollout-counts", newBar(v.Stats))
}

// confirmData is what a confirmation page asks and posts.
type confirmData struct {
	Question string
	Detail   string
	Action   string // the form's target
	Fields   map[string]string
	Button   string
	Danger   bool
	Back     string
}

// rolloutActions are the changes a rollout page offers: the button, the
// question, and what the change is.
var rolloutActions = map[string]struct {
	button, question, detail string
	status                   string
	danger                   bool
}{
	"pause":  {"Pause rollout", "Pause this rollout?", "Devices stop getting new tasks from it; tasks already started carry on.", "paused", false},
	"resume": {"Resume rollout", "Resume this rollout?", "Devices it admits get tasks again at their next check.", "active", false},
	"cancel": {"Cancel rollout", "Cancel this rollout for good?", "A cancelled rollout cannot be resumed. Pending tasks are cancelled at each device's next check.", "cancelled", true},
}

func (c *Console) confirmRollout(w http.ResponseWriter, r *http.Request, s session) {
	v, err := c.admin.GetRollout(r.Context(), pathUUID(r, "id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	action := r.URL.Query().Get("action")
	back := Prefix + "/rollouts/" + url.PathEscape(v.Rollout.ID().String())
	d := confirmData{Action: back, Back: back, Fields: map[string]string{"action": action}}
	if a, ok := rolloutActions[action]; ok {
		d.Question, d.Detail, d.Button, d.Danger = a.question, a.detail, a.button, a.danger
	} else if action == "percent" {
		pct := strings.TrimSpace(r.URL.Query().Get("percentage"))
		if _, err := strconv.Atoi(pct); err != nil {
			c.fail(w, r, http.StatusBadRequest, "percentage: must be a whole number.")
			return
		}
		d.Fields["percentage"] = pct
		d.Question = "Change this rollout from " + strconv.Itoa(v.Rollout.Percentage()) + "% to " + pct + "% of the fleet?"
		d.Detail = "Widening admits more devices at their next check; devices already admitted stay in. Narrowing keeps the tasks already created."
		d.Button = "Change to " + pct + "%"
	} else {
		c.fail(w, r, http.StatusBadRequest, "Unknown action.")
		return
	}
	p := c.base(s, "Confirm", "rollouts")
	p.Data = d
	c.render(w, r, http.StatusOK, "confirm", p)
}

func (c *Console) changeRollout(w http.ResponseWriter, r *http.Request, s session) {
	id := r.PathValue("id")
	action := r.PostFormValue("action")
	var change ports.RolloutChange
	if a, ok := rolloutActions[action]; ok {
		st := a.status
		change.Status = &st
	} else if action == "percent" {
		pct, err := formInt(r, "percentage")
		if err != nil || pct == nil {
			c.fail(w, r, http.StatusBadRequest, "percentage: must be a whole number.")
			return
		}
		change.Percentage = pct
	} else {
		c.fail(w, r, http.StatusBadRequest, "Unknown action.")
		return
	}
	if _, err := c.admin.UpdateRollout(r.Context(), s.actor, pathUUID(r, "id"), change); err != nil {
		if errors.Is(err, domain.ErrNotFound) {
			c.failErr(w, r, err)
			return
		}
		d := httpedge.DescribeError(err)
		if d.Internal {
			c.logger.ErrorContext(r.Context(), "console rollout change failed", "request_id",
				httpedge.RequestIDFrom(r.Context()), "error", err.Error())
		}
		p := c.base(s, "Rollout", "rollouts")
		c.showRollout(w, r, p, d.Status, sentence(d.Message))
		return
	}
	http.Redirect(w, r, Prefix+"/rollouts/"+url.PathEscape(id)+"?done="+action, http.StatusSeeOther)
}

// ---- firmware ----

type firmwareGroup struct {
	Model     string
	Firmwares []domain.Firmware
}

type firmwaresData struct {
	Model  string
	Models []string
	Groups []firmwareGroup
	Form   startForm
	// Uploads says the upload form is shown (the console has artifacts).
	Uploads bool
}

var publishFields = []string{"model", "version", "url", "size_bytes", "sha256", "sha1", "md5", "signature",
	"release_notes", "mandatory", "min_source_version"}

func (c *Console) firmwaresPage(w http.ResponseWriter, r *http.Request, s session) {
	form := startForm{Values: map[string]string{"model": r.URL.Query().Get("model")}}
	c.showFirmwares(w, r, s, http.StatusOK, form)
}

func (c *Console) showFirmwares(w http.ResponseWriter, r *http.Request, s session, status int, form startForm) {
	model := r.URL.Query().Get("model")
	all, err := c.admin.ListFirmwares(r.Context(), "")
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d := firmwaresData{Model: model, Form: form, Uploads: c.artifacts != nil}
	byModel := map[string]int{}
	for _, f := range all {
		if _, ok := byModel[f.Model()]; !ok {
			byModel[f.Model()] = -1
			d.Models = append(d.Models, f.Model())
		}
	}
	slices.Sort(d.Models)
	for _, m := range d.Models {
		if model != "" && m != model {
			continue
		}
		g := firmwareGroup{Model: m}
		for _, f := range all {
			if f.Model() == m {
				g.Firmwares = append(g.Firmwares, f)
			}
		}
		d.Groups = append(d.Groups, g)
	}
	p := c.base(s, "Firmware", "firmwares")
	p.Flash = flash(r)
	p.Data = d
	c.render(w, r, status, "firmwares", p)
}

func (c *Console) publishFirmware(w http.ResponseWriter, r *http.Request, s session) {
	form := postedForm(r, publishFields)
	fw, err := c.tryPublish(r, s)
	if err != nil {
		status := c.fieldError(r, err, form.Errors, &form.Error, publishFields...)
		c.showFirmwares(w, r, s, status, form)
		return
	}
	http.Redirect(w, r, Prefix+"/firmwares?model="+url.QueryEscape(fw.Model())+"&done=published", http.StatusSeeOther)
}

func (c *Console) tryPublish(r *http.Request, s session) (domain.Firmware, error) {
	v := func(name string) string { return strings.TrimSpace(r.PostFormValue(name)) }
	spec := domain.FirmwareSpec{
		Model: v("model"), Version: v("version"), URL: v("url"), SHA256: v("sha256"), SHA1: v("sha1"), MD5: v("md5"),
		Signature: v("signature"), ReleaseNotes: r.PostFormValue("release_notes"),
		Mandatory: r.PostFormValue("mandatory") != "", MinSourceVersion: v("min_source_version"),
	}
	size, err := optionalField("size_bytes", v("size_bytes"), func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) },
		"must be a whole number of bytes")
	if err != nil {
		return domain.Firmware{}, err
	}
	if size != nil {
		spec.SizeBytes = *size
	}
	return c.admin.PublishFirmware(r.Context(), s.actor, spec)
}

func (c *Console) confirmRevoke(w http.ResponseWriter, r *http.Request, s session) {
	fw, err := c.firmwareByID(r, pathUUID(r, "id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	back := Prefix + "/firmwares?model=" + url.QueryEscape(fw.Model())
	p := c.base(s, "Confirm", "firmwares")
	p.Data = confirmData{
		Question: "Revoke " + fw.Model() + " " + fw.Version().String() + "?",
		Detail:   "It is never offered again, its rollouts stop admitting devices, and its pending tasks are cancelled at each device's next check. This cannot be undone.",
		Action:   Prefix + "/firmwares/" + url.PathEscape(fw.ID().String()) + "/revoke", Fields: map[string]string{},
		Button: "Revoke firmware", Danger: true, Back: back,
	}
	c.render(w, r, http.StatusOK, "confirm", p)
}

func (c *Console) revokeFirmware(w http.ResponseWriter, r *http.Request, s session) {
	fw, err := c.admin.RevokeFirmware(r.Context(), s.actor, pathUUID(r, "id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/firmwares?model="+url.QueryEscape(fw.Model())+"&done=revoked", http.StatusSeeOther)
}

// ---- devices ----

type deviceData struct {
	Query   string
	Found   bool
	Error   string
	Device  ports.DeviceView
	History []ports.TaskView // newest first
	// List is the device list, shown when no id is looked up.
	List *deviceListData
}

// deviceHistoryLimit bounds the history shown: a device has a handful of
// tasks per release.
const deviceHistoryLimit = "500"

func (c *Console) devicePage(w http.ResponseWriter, r *http.Request, s session) {
	p := c.base(s, "Devices", "devices")
	d := deviceData{Query: strings.TrimSpace(r.URL.Query().Get("id"))}
	status := http.StatusOK
	if d.Query == "" {
		list, st, msg, err := c.deviceList(r)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		d.List, status, d.Error = &list, st, msg
	} else {
		// The searched id is parsed here, once: one that breaks the
		// device id rule names no device, and is answered so without
		// asking the service.
		var v ports.DeviceView
		id, err := domain.ParseDeviceID(d.Query)
		if err != nil {
			err = domain.ErrNotFound
		} else {
			v, err = c.admin.GetDevice(r.Context(), id)
		}
		switch {
		case errors.Is(err, domain.ErrNotFound):
			status, d.Error = http.StatusNotFound, "No device has the id "+strconv.Quote(d.Query)+"."
		case err != nil:
			var ve *domain.ValidationError
			if !errors.As(err, &ve) {
				c.failErr(w, r, err)
				return
			}
			status, d.Error = http.StatusBadRequest, sentence(httpedge.DescribeError(err).Message)
		default:
			page, err := c.admin.ListTasks(r.Context(), ports.TaskQuery{DeviceID: d.Query, Limit: deviceHistoryLimit})
			if err != nil {
				c.failErr(w, r, err)
				return
			}
			d.Found, d.Device, d.History = true, v, page.Items
			slices.Reverse(d.History)
		}
	}
	p.Data = d
	c.render(w, r, status, "device", p)
}
