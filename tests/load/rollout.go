package main

import (
	"context"
	"net/http"
	"time"
)

// rolloutProgress is how a staged rollout of the run went, read from the
// admin API once a second: when each stage started, counted from the
// start of the load, and when every device had finished its task
// (-until-complete).
type rolloutProgress struct {
	Stages []stageStart `json:"stages"`
	// CompleteAfter is the seconds from the start of the load until every
	// device had finished (succeeded or failed) in the rollout; 0 if the
	// run ended first.
	CompleteAfter float64 `json:"complete_after_seconds"`
	Status        string  `json:"status"`
	Percentage    int     `json:"percentage"`
	Succeeded     int     `json:"succeeded"`
	Failed        int     `json:"failed"`
}

// stageStart is when a stage opened, and at what percentage.
type stageStart struct {
	Stage        int     `json:"stage"`
	Percentage   int     `json:"percentage"`
	StartedAfter float64 `json:"started_after_seconds"`
}

// rolloutWire is what the watcher reads of GET /rollouts/{id}.
type rolloutWire struct {
	Percentage   int    `json:"percentage"`
	Status       string `json:"status"`
	StageHistory []struct {
		Stage      int       `json:"stage"`
		Percentage int       `json:"percentage"`
		StartedAt  time.Time `json:"started_at"`
	} `json:"stage_history"`
	Stats *struct {
		Succeeded int `json:"succeeded"`
		Failed    int `json:"failed"`
	} `json:"stats"`
}

// watchRollout reads the rollout every interval until ctx ends. When
// devices > 0 and that many devices have finished in it, it calls done
// once (the load then stops) and records when. It returns the last
// progress it read.
func watchRollout(ctx context.Context, cl *client, rolloutID string, start time.Time, devices int, interval time.Duration, done func()) rolloutProgress {
	var p rolloutProgress
	read := func(ctx context.Context) bool {
		var ro rolloutWire
		if _, err := cl.admin(ctx, http.MethodGet, "/rollouts/"+rolloutID, nil, &ro, http.StatusOK); err != nil {
			return false
		}
		p.Status, p.Percentage, p.Stages = ro.Status, ro.Percentage, p.Stages[:0]
		for _, h := range ro.StageHistory {
			if n := len(p.Stages); n > 0 && p.Stages[n-1].Stage == h.Stage {
				continue // a pause and a resume restart the stage: its first start counts
			}
			p.Stages = append(p.Stages, stageStart{Stage: h.Stage, Percentage: h.Percentage, StartedAfter: h.StartedAt.Sub(start).Seconds()})
		}
		if ro.Stats != nil {
			p.Succeeded, p.Failed = ro.Stats.Succeeded, ro.Stats.Failed
		}
		return devices > 0 && p.Succeeded+p.Failed >= devices
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if read(ctx) && p.CompleteAfter == 0 {
			p.CompleteAfter = time.Since(start).Seconds()
			done()
		}
		select {
		case <-ctx.Done():
			read(context.WithoutCancel(ctx)) // the final state, after the load
			return p
		case <-tick.C:
		}
	}
}
