package console_test

import (
	"bytes"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// apiStart posts a start-rollout body to the API and returns the status,
// the rollout id (on success) and the error's code and message.
func apiStart(t *testing.T, e *env, body string) (status int, id, code, message string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/api/v1/admin/rollouts", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		ID    string `json:"id"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	code, message = out.Error.Code, out.Error.Message
	if code == "" {
		code, message = out.Code, out.Message
	}
	return res.StatusCode, out.ID, code, message
}

// TestAPIAndConsoleStartTheSameRollout: the API's body and the console's
// form are only two spellings of one request, which the domain judges
// (NewRollout): the same policy stores the same rollout, and the same bad
// request gets the same refusal — status and message — from both.
func TestAPIAndConsoleStartTheSameRollout(t *testing.T) {
	e := newEnv(t)
	fw := e.publish("cam", "2.0.0")
	fwID := fw.ID().String()
	e.mustSignIn()
	token := e.csrf("/console/rollouts")
	form := func(kv ...string) url.Values {
		v := url.Values{"csrf": {token}, "firmware_id": {fwID}}
		for i := 0; i < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	body := func(fields string) string {
		if fields == "" {
			return `{"firmware_id":"` + fwID + `"}`
		}
		return `{"firmware_id":"` + fwID + `",` + fields + `}`
	}

	t.Run("same policy, same stored rollout", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			json string
			form url.Values
		}{
			{"the defaults", body(`"percentage":10`), form("percentage", "10")},
			{"a plan without a percentage, gate defaults and a given 0",
				body(`"stages":[{"percentage":5},{"percentage":50,"min_finished":3,"success_percent":0,"soak_seconds":3600}]`),
				form("stage_percentage", "5", "stage_min_finished", "", "stage_success_percent", "", "stage_soak", "",
					"stage_percentage", "50", "stage_min_finished", "3", "stage_success_percent", "0", "stage_soak", "1h")},
			{"every field",
				body(`"percentage":20,"max_attempts":5,"failure_threshold_percent":10,"min_sample":4,` +
					`"selector":{"tags_all":["eu","lab"],"tags_any":["a"],"attributes":{"hw":"rev2"},"versions":">=1.0.0 <2.0.0"},` +
					`"starts_at":"2026-01-02T03:04:00Z","window":{"daily":"22:00-02:00","time_zone":"Europe/Berlin"},` +
					`"task_timeout_seconds":7200,"allow_downgrade":true`),
				form("percentage", "20", "max_attempts", "5", "failure_threshold_percent", "10", "min_sample", "4",
					"tags_all", "eu, lab", "tags_any", "a", "attributes", "hw=rev2", "versions", ">=1.0.0 <2.0.0",
					"starts_at", "2026-01-02T03:04", "window", "22:00-02:00", "time_zone", "Europe/Berlin",
					"task_timeout", "2h", "allow_downgrade", "on")},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, apiID, code, msg := apiStart(t, e, tc.json)
				if status != http.StatusCreated {
					t.Fatalf("API: %d %s %s", status, code, msg)
				}
				res := e.post("/console/rollouts", tc.form)
				wantStatus(t, "console", res, http.StatusSeeOther)
				conID := strings.TrimSuffix(strings.TrimPrefix(res.header.Get("Location"), "/console/rollouts/"), "?done=started")
				api, con := e.rollout(apiID).Record(), e.rollout(conID).Record()
				// Started one after the other: only the ids and times differ.
				con.ID, con.CreatedAt, con.UpdatedAt = api.ID, api.CreatedAt, api.UpdatedAt
				for i := range min(len(con.History), len(api.History)) {
					con.History[i].StartedAt = api.History[i].StartedAt
				}
				if !api.Equal(con) {
					t.Fatalf("the API stored\n%+v\nthe console stored\n%+v", api, con)
				}
			})
		}
	})

	t.Run("same bad request, same refusal", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			json   string
			form   url.Values
			status int
			want   string // the API's message, also on the console's page
		}{
			{"no percentage and no plan", body(""), form(), http.StatusBadRequest, "percentage: is required"},
			{"a stage without a percentage", body(`"stages":[{"min_finished":3}]`),
				form("stage_percentage", "", "stage_min_finished", "3"), http.StatusBadRequest, "stages[0].percentage: is required"},
			{"a stage's min_finished given as 0", body(`"stages":[{"percentage":5,"min_finished":0}]`),
				form("stage_percentage", "5", "stage_min_finished", "0"), http.StatusBadRequest, "stages[0].min_finished: must be between 1 and"},
			{"a negative soak", body(`"stages":[{"percentage":5,"soak_seconds":-60}]`),
				form("stage_percentage", "5", "stage_soak", "-1m"), http.StatusBadRequest, "stages[0].soak_seconds: must be between 0 and"},
			{"a negative task timeout", body(`"percentage":1,"task_timeout_seconds":-60`),
				form("percentage", "1", "task_timeout", "-1m"), http.StatusBadRequest, "task_timeout_seconds: must be between 60 and"},
			{"a time zone without a window", body(`"percentage":1,"window":{"time_zone":"Europe/Berlin"}`),
				form("percentage", "1", "time_zone", "Europe/Berlin"), http.StatusBadRequest, "window.daily: is required"},
			{"no firmware id", `{"firmware_id":"","percentage":1}`,
				url.Values{"csrf": {token}, "firmware_id": {""}, "percentage": {"1"}}, http.StatusBadRequest, "firmware_id: is required"},
			{"a malformed firmware id", `{"firmware_id":"not-a-firmware","percentage":1}`,
				url.Values{"csrf": {token}, "firmware_id": {"not-a-firmware"}, "percentage": {"1"}}, http.StatusNotFound, "resource not found"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, _, code, msg := apiStart(t, e, tc.json)
				if status != tc.status || !strings.HasPrefix(msg, tc.want) {
					t.Fatalf("API: %d %s %q, want %d %q", status, code, msg, tc.status, tc.want)
				}
				res := e.post("/console/rollouts", tc.form)
				wantStatus(t, "console", res, tc.status)
				if page := html.UnescapeString(res.body); !strings.Contains(strings.ToLower(page), strings.ToLower(msg)) {
					t.Fatalf("the console does not say %q", msg)
				}
			})
		}
	})
}
