package console

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ai-device/ota/domain"
)

// The rollout policy as the pages show it: the selector in words, the
// plan's stages with the current one marked, and what the rollout waits
// for. What it waits for is the domain's answer (Rollout.WaitingFor); this
// file only puts it into words.

// selectorPart is one clause of a selector ("all of these tags": a, b).
type selectorPart struct {
	Label  string
	Values []string
}

// stageRow is one stage of a plan, as the stage table shows it.
type stageRow struct {
	N              int // 1-based
	Percentage     int
	MinFinished    int
	SuccessPercent int
	Soak           string
	Last           bool      // the last stage has no gate to pass
	State          string    // done, current or next
	StartedAt      time.Time // the current stage's (re)start; a done stage's last start
	EndedAt        time.Time // a done stage's end
	Reason         string    // why a done stage ended
}

// policyView is a rollout's policy on its page.
type policyView struct {
	Everyone       bool // the selector selects the whole model
	Selector       []selectorPart
	Stages         []stageRow
	Current        int // 1-based; 0 without a plan
	StageSince     time.Time
	StartsAt       time.Time
	Window         string // "02:00-04:00 Europe/Berlin", "" without one
	TaskTimeout    string
	AllowDowngrade bool
	Wait           string // what the rollout waits for, in words
	WaitKind       string
}

func selectorParts(s domain.SelectorSpec) []selectorPart {
	var parts []selectorPart
	if len(s.TagsAll) > 0 {
		parts = append(parts, selectorPart{Label: "Tags, all of", Values: s.TagsAll})
	}
	if len(s.TagsAny) > 0 {
		parts = append(parts, selectorPart{Label: "Tags, any of", Values: s.TagsAny})
	}
	if len(s.Attributes) > 0 {
		var attrs []string
		for _, k := range slices.Sorted(maps.Keys(s.Attributes)) {
			attrs = append(attrs, k+" = "+s.Attributes[k])
		}
		parts = append(parts, selectorPart{Label: "Attributes", Values: attrs})
	}
	if s.Versions != "" {
		parts = append(parts, selectorPart{Label: "Current version", Values: []string{s.Versions}})
	}
	return parts
}

// selectorHint is the selector in one short line, for the rollout list.
func selectorHint(s domain.SelectorSpec) string {
	var parts []string
	if len(s.TagsAll) > 0 {
		parts = append(parts, "tags "+strings.Join(s.TagsAll, " + "))
	}
	if len(s.TagsAny) > 0 {
		parts = append(parts, "any of "+strings.Join(s.TagsAny, ", "))
	}
	if n := len(s.Attributes); n == 1 {
		parts = append(parts, "1 attribute")
	} else if n > 1 {
		parts = append(parts, strconv.Itoa(n)+" attributes")
	}
	if s.Versions != "" {
		parts = append(parts, "from "+s.Versions)
	}
	return strings.Join(parts, " · ")
}

func newPolicyView(r domain.Rollout, fw domain.Firmware, stage *domain.TaskStats, now time.Time) policyView {
	rec := r.Record()
	v := policyView{
		Selector: selectorParts(rec.Selector), StartsAt: rec.StartsAt,
		TaskTimeout: duration(r.TaskTimeout()), AllowDowngrade: rec.AllowDowngrade,
	}
	v.Everyone = len(v.Selector) == 0
	if w := rec.Window; w != nil {
		v.Window = w.Daily + " " + w.TimeZone
	}
	if len(rec.Stages) > 0 {
		v.Current, v.StageSince = rec.Stage+1, r.StageSince()
		for i, s := range rec.Stages {
			row := stageRow{N: i + 1, Percentage: s.Percentage, MinFinished: s.MinFinished, SuccessPercent: s.SuccessPercent,
				Soak: duration(s.Soak), State: "next", Last: i == len(rec.Stages)-1}
			switch {
			case i < rec.Stage:
				row.State = "done"
			case i == rec.Stage:
				row.State, row.StartedAt = "current", v.StageSince
			}
			// The history says when a stage last began and how it ended.
			for _, h := range rec.History {
				if h.Stage == i && i < rec.Stage {
					row.StartedAt, row.EndedAt, row.Reason = h.StartedAt, h.EndedAt, h.Reason
				}
			}
			v.Stages = append(v.Stages, row)
		}
	}
	w := r.WaitingFor(now, fw, stage)
	v.WaitKind, v.Wait = w.Kind.String(), waitText(w, now)
	return v
}

// waitText puts what a rollout waits for into words.
func waitText(w domain.RolloutWait, now time.Time) string {
	with := func(s, reason string) string {
		if reason != "" {
			return s + " (" + reason + ")."
		}
		return s + "."
	}
	switch w.Kind {
	case domain.WaitCancelled:
		return "Nothing: the rollout is cancelled."
	case domain.WaitRevoked:
		return "Nothing: its firmware is revoked, so it admits no device and cannot be resumed. " +
			"Pending tasks are cancelled at each device's next check; started ones finish."
	case domain.WaitOperator:
		return "An operator to resume it: it was paused by hand."
	case domain.WaitAutoPaused:
		return with("An operator to resume it: it paused itself", w.Reason)
	case domain.WaitUnusable:
		return "A new rollout: its stored policy no longer reads (a time zone unknown here), so it admits no device."
	case domain.WaitStart:
		return "Its start at " + stamp(w.Until) + ", " + until(w.Until, now) + ": nothing is offered before."
	case domain.WaitWindow:
		return "Its daily window, which next opens at " + stamp(w.Until) + " (" + until(w.Until, now) +
			"); devices reporting a timezone attribute read the window in their own zone."
	case domain.WaitNoShare:
		return "A wider percentage: at 0% it admits no device."
	case domain.WaitGate:
		s := fmt.Sprintf("Stage %d's gate: at least %d finished tasks, %d%% of them succeeded", w.Stage+1, w.Gate.MinFinished, w.Gate.SuccessPercent)
		if w.Counted {
			s += fmt.Sprintf(" — so far %d finished, %d succeeded", w.Finished, w.Succeeded)
		}
		return s + "."
	case domain.WaitSoak:
		return fmt.Sprintf("Stage %d's gate held; the next stage starts when its soak ends at %s (%s).", w.Stage+1, stamp(w.Until), until(w.Until, now))
	case domain.WaitAdvance:
		return fmt.Sprintf("Nothing: stage %d's soak is over, the next stage's share is admitted and is recorded at the next finished task.", w.Stage+1)
	}
	return "Nothing: it admits its share of the fleet."
}

// waitHint is what a rollout waits for in a few words, for the list ("" for
// nothing worth a hint).
func waitHint(w domain.RolloutWait) string {
	switch w.Kind {
	case domain.WaitStart:
		return "starts " + stamp(w.Until)
	case domain.WaitWindow:
		return "window opens " + stamp(w.Until)
	case domain.WaitNoShare:
		return "0%: admits no device"
	case domain.WaitGate:
		return fmt.Sprintf("stage %d gate not met yet", w.Stage+1)
	case domain.WaitSoak:
		return fmt.Sprintf("stage %d soaking until %s", w.Stage+1, stamp(w.Until))
	case domain.WaitAdvance:
		return fmt.Sprintf("stage %d due", w.Stage+2)
	case domain.WaitUnusable:
		return "policy unusable"
	case domain.WaitRevoked:
		return "firmware revoked: admits no device"
	}
	return ""
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// until says how far ahead t is, rounded to the nearest whole unit.
func until(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d < time.Minute:
		return "in under a minute"
	case d < time.Hour:
		return fmt.Sprintf("in %d min", int(d.Round(time.Minute)/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("in %d h", int(d.Round(time.Hour)/time.Hour))
	}
	return fmt.Sprintf("in %d days", int(d.Round(24*time.Hour)/(24*time.Hour)))
}

// duration writes a duration as an operator would type it: "30m", "1h30m",
// "24h", "3 days"; "none" for zero.
func duration(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	if d >= 48*time.Hour && d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + " days"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ---- the start form's policy fields ----

// policyFields are the start form's policy inputs (stage rows are
// stage_percentage etc., repeated once per row).
var policyFields = []string{"tags_all", "tags_any", "attributes", "versions", "stages", "starts_at", "window", "time_zone",
	"task_timeout", "allow_downgrade"}

// stageColumns are the repeated inputs of the start form's stage rows.
var stageColumns = []string{"stage_percentage", "stage_min_finished", "stage_success_percent", "stage_soak"}

// formStageRows is how many stage rows the start form offers.
const formStageRows = 4

// formFieldOf names the form field a domain error's field belongs to, so
// the error is shown beside it ("selector.tags_all" → tags_all,
// "stages[1].percentage" → stages).
func formFieldOf(field string) string {
	switch {
	case strings.HasPrefix(field, "selector."):
		return strings.TrimPrefix(field, "selector.")
	case strings.HasPrefix(field, "stages"):
		return "stages"
	case field == "window.daily":
		return "window"
	case field == "window.time_zone":
		return "time_zone"
	case field == "task_timeout_seconds":
		return "task_timeout"
	}
	return field
}

// words splits a list typed with commas or spaces.
func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
}

// formDuration reads an optional duration such as 30m or 2h (nil: empty).
func formDuration(field, s string) (*time.Duration, error) {
	return optionalField(field, s, time.ParseDuration, "must be a duration such as 30m, 2h or 1h30m")
}

// readPolicy adds the start form's policy fields to spec. It only reads
// the form; the domain judges the values (NewRollout), as for the API.
func readPolicy(r *http.Request, spec *domain.RolloutSpec) error {
	v := func(name string) string { return strings.TrimSpace(r.PostFormValue(name)) }
	spec.Selector = domain.SelectorSpec{TagsAll: words(v("tags_all")), TagsAny: words(v("tags_any")), Versions: v("versions")}
	for line := range strings.Lines(r.PostFormValue("attributes")) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, val, ok := strings.Cut(line, "=")
		if !ok {
			return &domain.ValidationError{Field: "selector.attributes", Reason: "one name=value a line"}
		}
		if spec.Selector.Attributes == nil {
			spec.Selector.Attributes = map[string]string{}
		}
		spec.Selector.Attributes[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	cols := make([][]string, len(stageColumns))
	for i, c := range stageColumns {
		cols[i] = r.PostForm[c]
	}
	cell := func(col, row int) string {
		if row < len(cols[col]) {
			return strings.TrimSpace(cols[col][row])
		}
		return ""
	}
	for row := range len(cols[0]) {
		if cell(0, row) == "" && cell(1, row) == "" && cell(2, row) == "" && cell(3, row) == "" {
			continue // an unused row
		}
		n := len(spec.Stages)
		num := func(col int, name string) (*int, error) {
			return optionalField(fmt.Sprintf("stages[%d].%s", n, name), cell(col, row), strconv.Atoi, "must be a whole number")
		}
		var st domain.StageRequest
		var err error
		if st.Percentage, err = num(0, "percentage"); err != nil {
			return err
		}
		if st.MinFinished, err = num(1, "min_finished"); err != nil {
			return err
		}
		if st.SuccessPercent, err = num(2, "success_percent"); err != nil {
			return err
		}
		soak, err := formDuration(fmt.Sprintf("stages[%d].soak", n), cell(3, row))
		if err != nil {
			return err
		}
		if soak != nil {
			st.Soak = *soak
		}
		spec.Stages = append(spec.Stages, st)
	}
	if s := v("starts_at"); s != "" {
		// A datetime-local input sends minutes, or seconds when the
		// browser keeps them; read as UTC, as the label says.
		var t time.Time
		var err error
		for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339} {
			if t, err = time.Parse(layout, s); err == nil {
				break
			}
		}
		if err != nil {
			return &domain.ValidationError{Field: "starts_at", Reason: "must be a UTC time such as 2026-01-02T03:04"}
		}
		spec.StartsAt = &t
	}
	if d, tz := v("window"), v("time_zone"); d != "" || tz != "" {
		spec.Window = &domain.WindowSpec{Daily: d, TimeZone: tz}
	}
	var err error
	if spec.TaskTimeout, err = formDuration("task_timeout_seconds", v("task_timeout")); err != nil {
		return err
	}
	spec.AllowDowngrade = r.PostFormValue("allow_downgrade") != ""
	return nil
}
