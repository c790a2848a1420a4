package postgres

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ai-device/ota/domain"
)

// policyDoc is the rollouts.policy jsonb document: what a hands-off rollout adds to
// a rollout, in storage form. Empty fields are left out, so a plain
// rollout stores '{}'.
type policyDoc struct {
	TagsAll        []string          `json:"tags_all,omitempty"`
	TagsAny        []string          `json:"tags_any,omitempty"`
	Attributes     map[string]string `json:"attributes,omitempty"`
	Versions       string            `json:"versions,omitempty"`
	Stages         []stageDoc        `json:"stages,omitempty"`
	Stage          int               `json:"stage,omitempty"`
	GateMetAt      *time.Time        `json:"gate_met_at,omitempty"`
	History        []stageEventDoc   `json:"history,omitempty"`
	StartsAt       *time.Time        `json:"starts_at,omitempty"`
	WindowDaily    string            `json:"window_daily,omitempty"`
	WindowZone     string            `json:"window_time_zone,omitempty"`
	TaskTimeoutSec int64             `json:"task_timeout_seconds,omitempty"`
	AllowDowngrade bool              `json:"allow_downgrade,omitempty"`
	FailedAtResume int               `json:"failed_at_resume,omitempty"`
}

type stageDoc struct {
	Percentage     int   `json:"percentage"`
	MinFinished    int   `json:"min_finished"`
	SuccessPercent int   `json:"success_percent"`
	SoakSeconds    int64 `json:"soak_seconds,omitempty"`
}

type stageEventDoc struct {
	Stage      int        `json:"stage"`
	Percentage int        `json:"percentage"`
	StartedAt  time.Time  `json:"started_at"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
	Reason     string     `json:"reason,omitempty"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := dbTime(t)
	return &u
}

func fromOpt(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// encodePolicy writes a rollout record's policy as the jsonb document.
func encodePolicy(rec domain.RolloutRecord) []byte {
	d := policyDoc{
		TagsAll: rec.Selector.TagsAll, TagsAny: rec.Selector.TagsAny, Attributes: rec.Selector.Attributes,
		Versions: rec.Selector.Versions, Stage: rec.Stage, GateMetAt: optTime(rec.GateMetAt), StartsAt: optTime(rec.StartsAt),
		AllowDowngrade: rec.AllowDowngrade, FailedAtResume: rec.FailedAtResume,
	}
	if rec.TaskTimeout != domain.DefaultTaskTimeout {
		d.TaskTimeoutSec = int64(rec.TaskTimeout / time.Second)
	}
	if rec.Window != nil {
		d.WindowDaily, d.WindowZone = rec.Window.Daily, rec.Window.TimeZone
	}
	for _, s := range rec.Stages {
		d.Stages = append(d.Stages, stageDoc{Percentage: s.Percentage, MinFinished: s.MinFinished,
			SuccessPercent: s.SuccessPercent, SoakSeconds: int64(s.Soak / time.Second)})
	}
	for _, e := range rec.History {
		d.History = append(d.History, stageEventDoc{Stage: e.Stage, Percentage: e.Percentage, StartedAt: dbTime(e.StartedAt),
			EndedAt: optTime(e.EndedAt), Outcome: e.Outcome.String(), Reason: e.Reason})
	}
	b, err := json.Marshal(d)
	if err != nil {
		panic(fmt.Sprintf("postgres: encoding a rollout policy: %v", err)) // not reached: plain data
	}
	return b
}

// decodePolicy reads the jsonb document into rec.
func decodePolicy(raw []byte, rec *domain.RolloutRecord) error {
	if len(raw) == 0 {
		return nil
	}
	var d policyDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("rollout %s has a corrupt policy: %w", rec.ID, err)
	}
	rec.Selector = domain.SelectorSpec{TagsAll: d.TagsAll, TagsAny: d.TagsAny, Attributes: d.Attributes, Versions: d.Versions}
	rec.Stage, rec.GateMetAt, rec.StartsAt = d.Stage, fromOpt(d.GateMetAt), fromOpt(d.StartsAt)
	rec.TaskTimeout = time.Duration(d.TaskTimeoutSec) * time.Second
	rec.AllowDowngrade, rec.FailedAtResume = d.AllowDowngrade, d.FailedAtResume
	if d.WindowDaily != "" {
		rec.Window = &domain.WindowSpec{Daily: d.WindowDaily, TimeZone: d.WindowZone}
	}
	for _, s := range d.Stages {
		rec.Stages = append(rec.Stages, domain.StageSpec{Percentage: s.Percentage, MinFinished: s.MinFinished,
			SuccessPercent: s.SuccessPercent, Soak: time.Duration(s.SoakSeconds) * time.Second})
	}
	for _, e := range d.History {
		o, err := domain.ParseStageOutcome(e.Outcome)
		if err != nil {
			return fmt.Errorf("rollout %s has a corrupt stage history: %w", rec.ID, err)
		}
		rec.History = append(rec.History, domain.StageEvent{Stage: e.Stage, Percentage: e.Percentage, StartedAt: e.StartedAt.UTC(),
			EndedAt: fromOpt(e.EndedAt), Outcome: o, Reason: e.Reason})
	}
	return nil
}
