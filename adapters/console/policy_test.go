package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

func (e *env) startSpec(fw domain.Firmware, spec domain.RolloutSpec) domain.Rollout {
	e.t.Helper()
	r, err := e.admin.StartRollout(context.Background(), testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: spec})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// succeed walks a device's task to succeeded, as a device reports it.
func (e *env) succeed(deviceID, taskID string) {
	e.t.Helper()
	for i, st := range []string{"downloading", "downloaded", "installing", "succeeded"} {
		if _, err := e.devices.ReportEvent(context.Background(), asDeviceID(deviceID), asUUID(taskID), ports.EventRequest{
			EventID: fmt.Sprintf("ok-%s-%d", taskID, i), Status: st}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// rowOf is the rollout list's row of rollout id.
func rowOf(t *testing.T, body, id string) string {
	t.Helper()
	row := regexp.MustCompile(`(?s)<tr id="rollout-` + regexp.QuoteMeta(id) + `"[^>]*>.*?</tr>`).FindString(body)
	if row == "" {
		t.Fatalf("no row for rollout %s:\n%s", id, body)
	}
	return row
}

// A staged rollout whose first stage's gate held shows stage 2 of 3 as
// current, since when, the first as done with why it ended, and the gate
// it now waits for with the stage's counts.
func TestRolloutPageShowsCurrentStage(t *testing.T) {
	e := newEnv(t)
	fw := e.publish("cam", "2.0.0")
	r := e.startSpec(fw, domain.RolloutSpec{Stages: []domain.StageRequest{
		{Percentage: new(50), MinFinished: new(1), SuccessPercent: new(50)},
		{Percentage: new(80), MinFinished: new(5), SuccessPercent: new(90), Soak: 90 * time.Minute},
		{Percentage: new(100), MinFinished: new(1), SuccessPercent: new(95)},
	}})
	dev := ""
	for i := 0; dev == ""; i++ {
		if id := fmt.Sprintf("dev-%d", i); domain.Bucket(r.ID().String(), id) < 50 {
			dev = id
		}
	}
	task := e.deviceWithTask(dev, "cam", "1.0.0")
	if task == nil {
		t.Fatalf("%s got no task from the first stage", dev)
	}
	e.clock.advance(time.Minute)
	e.succeed(dev, task.Task.ID().String())
	if got := e.rollout(r.ID().String()); got.Stage() != 1 || got.Percentage() != 80 {
		t.Fatalf("after the first stage's gate held: stage %d at %d%%, want stage 1 at 80%%", got.Stage(), got.Percentage())
	}
	since := e.rollout(r.ID().String()).StageSince().UTC().Format("2006-01-02 15:04:05 UTC")

	e.mustSignIn()
	page := e.get("/console/rollouts/" + r.ID().String())
	wantStatus(t, "detail", page, http.StatusOK)
	wantBody(t, "detail", page, `<tr id="stage-2" class="stage current" aria-current="step">`,
		`<tr id="stage-1" class="stage done">`, `<tr id="stage-3" class="stage next">`,
		"stage 2 of 3 current, since "+since, "at least 5 finished, 90% succeeded", "1h30m", "every device of the model")
	text := html.UnescapeString(page.body)
	for _, want := range []string{
		"gate held: 1 of 1 finished tasks succeeded",
		"Waits for:</b> Stage 2's gate: at least 5 finished tasks, 90% of them succeeded — so far 0 finished, 0 succeeded.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the page lacks %q\n%s", want, page.body)
		}
	}
	if strings.Count(page.body, `aria-current="step"`) != 1 {
		t.Error("more than one stage is marked current")
	}
	row := rowOf(t, e.get("/console/rollouts").body, r.ID().String())
	if !strings.Contains(row, "stage 2 of 3") || !strings.Contains(row, "stage 2 gate not met yet") {
		t.Errorf("the list's row gives no stage hint:\n%s", row)
	}
}

// The selector reads as words with its values escaped, the schedule and
// the limits are shown, and a rollout whose start is ahead says it waits
// for it — on its page and, briefly, in the list.
func TestRolloutPageShowsSelectorAndWaitingStart(t *testing.T) {
	e := newEnv(t)
	fw := e.publish("cam", "2.0.0")
	startsAt := e.clock.Now().Add(3 * time.Hour).Truncate(time.Second)
	timeout := 2 * time.Hour
	r := e.startSpec(fw, domain.RolloutSpec{Percentage: 25,
		Selector: domain.SelectorSpec{TagsAll: []string{"lab", "beta"}, TagsAny: []string{"eu-west"},
			Attributes: map[string]string{"hw_rev": `<script>alert("x")</script>&`}, Versions: ">=1.0.0 <2.0.0"},
		StartsAt: &startsAt, Window: &domain.WindowSpec{Daily: "02:00-04:00", TimeZone: "Europe/Berlin"},
		TaskTimeout: &timeout, AllowDowngrade: true,
	})
	plain := e.startRollout(e.publish("cam", "2.1.0"), 10, nil)
	e.mustSignIn()
	page := e.get("/console/rollouts/" + r.ID().String())
	wantStatus(t, "detail", page, http.StatusOK)
	wantBody(t, "detail", page,
		`<span class="muted">Tags, all of:</span> <code>beta</code>, <code>lab</code>`,
		`<span class="muted">Tags, any of:</span> <code>eu-west</code>`,
		`<code>hw_rev = &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;</code>`,
		`<code>&gt;=1.0.0 &lt;2.0.0</code>`,
		`class="waits wait-start"`,
		"02:00-04:00 Europe/Berlin", "2h without an event", "allowed: devices above this version",
		"No stages: a plain percentage rollout.")
	if strings.Contains(page.body, "<script>alert") {
		t.Error("an attribute value reached the page unescaped")
	}
	want := "Waits for:</b> Its start at " + startsAt.UTC().Format("2006-01-02 15:04 UTC") + ", in 3 h: nothing is offered before."
	if !strings.Contains(html.UnescapeString(page.body), want) {
		t.Errorf("the page does not say it waits for its start (%q)\n%s", want, page.body)
	}

	list := e.get("/console/rollouts").body
	row := rowOf(t, list, r.ID().String())
	for _, want := range []string{"tags beta + lab", "any of eu-west", "1 attribute", "starts " + startsAt.UTC().Format("2006-01-02 15:04 UTC")} {
		if !strings.Contains(html.UnescapeString(row), want) {
			t.Errorf("the list's row lacks %q:\n%s", want, row)
		}
	}
	if strings.Contains(rowOf(t, list, plain.ID().String()), `class="hint"`) {
		t.Error("a plain rollout that waits for nothing has a hint")
	}
	wantBody(t, "plain detail", e.get("/console/rollouts/"+plain.ID().String()), "every device of the model", "at once",
		"none: any time of day", "24h without an event", "not allowed", "Waits for:</b> Nothing: it admits its share of the fleet.")

	// Once the start has passed, it waits for its window instead.
	e.clock.advance(3*time.Hour + time.Minute)
	w := e.rollout(r.ID().String()).WaitingFor(e.clock.Now(), fw, nil)
	page = e.get("/console/rollouts/" + r.ID().String())
	if w.Kind == domain.WaitWindow {
		wantBody(t, "after the start", page, `class="waits wait-window"`, w.Until.UTC().Format("2006-01-02 15:04 UTC"))
	} else {
		wantBody(t, "after the start, in the window", page, `class="waits wait-nothing"`)
	}
}

// The start form takes a selector, stages and a schedule, hands them to
// the same use case as the API, and shows the domain's refusals beside
// the fields.
func TestStartStagedRolloutFromTheForm(t *testing.T) {
	e := newEnv(t)
	fw := e.publish("cam", "2.0.0")
	e.mustSignIn()
	token := e.csrf("/console/rollouts")
	form := func(extra url.Values) url.Values {
		f := url.Values{"csrf": {token}, "firmware_id": {fw.ID().String()}, "tags_all": {"beta, lab"}, "tags_any": {"eu-west eu-north"},
			"attributes": {"hw_rev=B\r\nregion = eu\r\n"}, "versions": {">=1.0.0"},
			"stage_percentage": {"5", "", "50", "100"}, "stage_min_finished": {"10", "", "", ""},
			"stage_success_percent": {"", "", "90", ""}, "stage_soak": {"2h", "", "", ""},
			"window": {"01:00-05:00"}, "time_zone": {"Europe/Berlin"}, "task_timeout": {"6h"}, "starts_at": {"2030-01-02T03:04"}}
		for k, v := range extra {
			f[k] = v
		}
		return f
	}
	for _, c := range []struct {
		name   string
		extra  url.Values
		field  string
		reason string
	}{
		{"stages not increasing", url.Values{"stage_percentage": {"5", "", "5", "100"}}, "stages", "stages[1].percentage: must be greater than the previous stage's"},
		{"bad soak", url.Values{"stage_soak": {"a while", "", "", ""}}, "stages", "stages[0].soak: must be a duration such as 30m, 2h or 1h30m"},
		{"percentage beside a plan", url.Values{"percentage": {"10"}}, "percentage", "percentage: must be omitted or equal the first stage's percentage"},
		{"bad tag", url.Values{"tags_all": {"beta lab<x>"}}, "tags_all", "selector.tags_all: tag"},
		{"attribute without a value", url.Values{"attributes": {"hw_rev"}}, "attributes", "selector.attributes: one name=value a line"},
		{"bad window", url.Values{"window": {"1-5"}}, "window", "window.daily: must be HH:MM-HH:MM"},
		{"unknown zone", url.Values{"time_zone": {"Mars/Olympus"}}, "time_zone", "window.time_zone: is not a known IANA time zone"},
		{"bad start", url.Values{"starts_at": {"soon"}}, "starts_at", "starts_at: must be a UTC time such as 2026-01-02T03:04"},
		{"bad timeout", url.Values{"task_timeout": {"1s"}}, "task_timeout", "task_timeout_seconds: must be between 60 and 2592000"},
		{"downgrade without a range", url.Values{"versions": {""}, "allow_downgrade": {"1"}}, "allow_downgrade", "allow_downgrade: needs selector.versions"},
	} {
		res := e.post("/console/rollouts", form(c.extra))
		wantStatus(t, c.name, res, http.StatusBadRequest)
		text := html.UnescapeString(res.body)
		if !strings.Contains(text, `id="`+c.field+`-error">`+c.reason) {
			t.Errorf("%s: no %q beside %s:\n%s", c.name, c.reason, c.field, res.body)
		}
		// What was typed stays, stage rows included.
		if !strings.Contains(res.body, `value="beta, lab"`) && c.field != "tags_all" {
			t.Errorf("%s: the tags typed were lost", c.name)
		}
		if !strings.Contains(res.body, `id="stage-3-percentage" inputmode="numeric" value="`) {
			t.Errorf("%s: the stage rows are gone", c.name)
		}
	}
	if list, err := e.admin.ListFirmwares(context.Background(), "cam"); err != nil || len(list) != 1 {
		t.Fatalf("firmwares: %v %v", list, err)
	}
	if page := e.get("/console/rollouts"); !strings.Contains(page.body, "No rollouts yet.") {
		t.Fatal("a refused form started a rollout")
	}

	res := e.post("/console/rollouts", form(nil))
	wantStatus(t, "start a staged rollout", res, http.StatusSeeOther)
	id := strings.TrimSuffix(strings.TrimPrefix(res.header.Get("Location"), "/console/rollouts/"), "?done=started")
	r := e.rollout(id)
	rec := r.Record()
	wantStages := []domain.StageSpec{{Percentage: 5, MinFinished: 10, SuccessPercent: 95, Soak: 2 * time.Hour},
		{Percentage: 50, MinFinished: 1, SuccessPercent: 90}, {Percentage: 100, MinFinished: 1, SuccessPercent: 95}}
	if fmt.Sprint(rec.Stages) != fmt.Sprint(wantStages) || r.Percentage() != 5 {
		t.Errorf("stages %+v at %d%%, want %+v at 5%%", rec.Stages, r.Percentage(), wantStages)
	}
	if fmt.Sprint(rec.Selector.TagsAll, rec.Selector.TagsAny, rec.Selector.Attributes) != "[beta lab] [eu-north eu-west] map[hw_rev:B region:eu]" ||
		rec.Selector.Versions != ">=1.0.0" {
		t.Errorf("selector %+v", rec.Selector)
	}
	if rec.Window == nil || *rec.Window != (domain.WindowSpec{Daily: "01:00-05:00", TimeZone: "Europe/Berlin"}) || r.TaskTimeout() != 6*time.Hour {
		t.Errorf("window %+v, timeout %s", rec.Window, r.TaskTimeout())
	}
	if want := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC); !r.StartsAt().Equal(want) {
		t.Errorf("starts at %s, want %s", r.StartsAt(), want)
	}
	page := e.get(res.header.Get("Location"))
	wantBody(t, "the new rollout", page, "Rollout started.", `class="waits wait-start"`, "2030-01-02 03:04:00 UTC", `<tr id="stage-1" class="stage current" aria-current="step">`,
		"stage 1 of 3 current", "<code>region = eu</code>", "6h without an event")
}
