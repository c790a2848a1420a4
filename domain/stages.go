package domain

import (
	"fmt"
	"time"
)

// Limits of a rollout plan.
const (
	MaxStages       = 10
	MaxSoak         = 30 * 24 * time.Hour
	maxMinFinished  = 1_000_000
	DefaultSuccess  = 95
	DefaultFinished = 1
)

// StageSpec is one stage of an operator's plan: the share of the selected
// fleet admitted, and the gate that must hold before the next stage
// starts: at least MinFinished tasks of the stage finished, at least
// SuccessPercent of them succeeded, for Soak (0: none) after the gate
// first held.
type StageSpec struct {
	Percentage     int
	MinFinished    int
	SuccessPercent int
	Soak           time.Duration
}

// StageRequest is one stage of a plan as an operator asks for it: nil
// gate fields take the defaults (DefaultFinished, DefaultSuccess);
// NewRollout judges it into a StageSpec (stage rule G1).
type StageRequest struct {
	Percentage     *int // required
	MinFinished    *int // nil: DefaultFinished; a given 0 is refused, not read as the default
	SuccessPercent *int // nil: DefaultSuccess
	Soak           time.Duration
}

// StageOutcome says how a stage ended.
type StageOutcome struct{ s string }

// Stage outcomes; the zero value is a stage still running.
var (
	StageAdvanced = StageOutcome{"advanced"}
	StagePaused   = StageOutcome{"paused"}
)

// ParseStageOutcome reads a stored outcome ("" is running).
func ParseStageOutcome(s string) (StageOutcome, error) {
	return namedOr("outcome", s, StageOutcome{}, StageAdvanced, StagePaused)
}

// String is the wire and storage form ("" while running).
func (o StageOutcome) String() string { return o.s }

// StageEvent is one entry of a rollout's stage history: a stage started at
// StartedAt and, once EndedAt is set, advanced or paused for Reason.
type StageEvent struct {
	Stage      int
	Percentage int
	StartedAt  time.Time
	EndedAt    time.Time
	Outcome    StageOutcome
	Reason     string
}

// validStages judges a requested plan (stage rule G1): 1–10 stages, each
// with a percentage, strictly increasing, each gate with min_finished ≥ 1
// and a success percentage 0–100 (defaults 1 and 95), soak 0–30 days.
func validStages(reqs []StageRequest) ([]StageSpec, error) {
	if len(reqs) > MaxStages {
		return nil, invalid("stages", "at most %d stages", MaxStages)
	}
	out := make([]StageSpec, len(reqs))
	for i, q := range reqs {
		field := fmt.Sprintf("stages[%d]", i)
		if q.Percentage == nil {
			return nil, invalid(field+".percentage", "is required")
		}
		s := StageSpec{Percentage: *q.Percentage, MinFinished: DefaultFinished, SuccessPercent: DefaultSuccess, Soak: q.Soak}
		if q.MinFinished != nil {
			s.MinFinished = *q.MinFinished
		}
		if q.SuccessPercent != nil {
			s.SuccessPercent = *q.SuccessPercent
		}
		if s.Percentage < 1 || s.Percentage > 100 {
			return nil, invalid(field+".percentage", "must be between 1 and 100")
		}
		if i > 0 && s.Percentage <= out[i-1].Percentage {
			return nil, invalid(field+".percentage", "must be greater than the previous stage's")
		}
		if s.MinFinished < 1 || s.MinFinished > maxMinFinished {
			return nil, invalid(field+".min_finished", "must be between 1 and %d", maxMinFinished)
		}
		if s.SuccessPercent < 0 || s.SuccessPercent > 100 {
			return nil, invalid(field+".success_percent", "must be between 0 and 100")
		}
		if s.Soak < 0 || s.Soak > MaxSoak {
			return nil, invalid(field+".soak_seconds", "must be between 0 and %d", int(MaxSoak/time.Second))
		}
		if s.Soak%time.Second != 0 { // stores keep seconds: one would drop the fraction, one keep it
			return nil, invalid(field+".soak_seconds", "must be whole seconds")
		}
		out[i] = s
	}
	return out, nil
}

// gateHolds reports whether a stage's gate holds on the stage's counts.
func gateHolds(s StageSpec, st TaskStats) bool {
	finished := st.Succeeded + st.Failed
	return finished >= s.MinFinished && st.Succeeded*100 >= s.SuccessPercent*finished
}

// gateFails reports whether the stage has its sample and missed the bar:
// the rollout stops there instead of widening (stage rule G3).
func gateFails(s StageSpec, st TaskStats) bool {
	finished := st.Succeeded + st.Failed
	return finished >= s.MinFinished && st.Succeeded*100 < s.SuccessPercent*finished
}
