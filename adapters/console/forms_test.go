package console_test

import (
	"regexp"
	"strings"
	"testing"
)

// The start form's optional fields are empty until typed in: what empty
// means (the domain's default) is help text beside the field, never a
// placeholder that reads as a value already filled in.
func TestStartFormShowsDefaultsAsHelpNotPlaceholders(t *testing.T) {
	e := newEnv(t)
	e.publish("cam", "2.0.0")
	e.mustSignIn()
	page := e.get("/console/rollouts")
	if strings.Contains(page.body, "placeholder=") {
		t.Errorf("the start form still has placeholders:\n%s", page.body)
	}
	for field, help := range map[string]string{
		"max_attempts":              "default 3",
		"min_sample":                "default 20",
		"failure_threshold_percent": "empty: never pauses itself",
		"task_timeout":              "default 24h",
		"time_zone":                 "default UTC",
		"window":                    "empty: any time of day",
	} {
		block := fieldBlock(page.body, field)
		if block == "" {
			t.Errorf("no field %s", field)
			continue
		}
		want := `<small class="help" id="` + field + `-help">` + help
		if !strings.Contains(block, want) || !strings.Contains(block, `aria-describedby="`+field+`-help"`) {
			t.Errorf("field %s lacks its help %q:\n%s", field, help, block)
		}
		if m := regexp.MustCompile(`<input id="` + field + `"[^>]*value="([^"]*)"`).FindStringSubmatch(block); m == nil || m[1] != "" {
			t.Errorf("field %s is not empty: %q", field, m)
		}
	}
	wantBody(t, "stage gate defaults", page, `id="stage-min-finished-help">default 1</small>`,
		`id="stage-success-help">default 95</small>`, `id="stage-soak-help">default none`)
}
