package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// LinDevice is a registered device a LinWorkload drives.
type LinDevice struct {
	ID, Token, Model, Version string
}

// LinWorkload drives devices against otad instances, several clients per
// device spread over the instances, and records every call in a History:
// checks, and progress events on the task a check handed out (moving it
// forward, sometimes failing it, sometimes repeating the last event with
// its id, as a device retrying after a lost answer does). An event answered
// SERVICE_BUSY or not at all is sent again, same id and body, until it is
// acknowledged, as devices do: this also keeps the histories checkable (each
// unacknowledged event is one more "maybe" for the checker).
type LinWorkload struct {
	URLs             []string
	Devices          []LinDevice
	ClientsPerDevice int
	OpsPerClient     int
	Timeout          time.Duration // per call; a call without an answer by then is "unknown"
	// Pause, if set, returns how long to wait between a client's calls.
	Pause func() time.Duration
	// Held, if set, names the clients that wait for Release to be closed
	// before their first call (so that the others go first).
	Held    func(client int) bool
	Release <-chan struct{}
}

// URLOf is the instance client id talks to.
func (w LinWorkload) URLOf(client int) string { return w.URLs[client%len(w.URLs)] }

// Clients is how many client ids the workload uses; admin changes may use
// the next one.
func (w LinWorkload) Clients() int { return len(w.Devices) * w.ClientsPerDevice }

// Run drives every client until it has made OpsPerClient calls or ctx ends.
func (w LinWorkload) Run(ctx context.Context, h *History) {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: w.Timeout}
	var wg sync.WaitGroup
	for d, dev := range w.Devices {
		for c := range w.ClientsPerDevice {
			id := d*w.ClientsPerDevice + c
			wg.Go(func() {
				if w.Held != nil && w.Held(id) {
					select {
					case <-w.Release:
					case <-ctx.Done():
						return
					}
				}
				w.client(ctx, h, hc, w.URLOf(id), dev, id)
			})
		}
	}
	wg.Wait()
}

// linEventSeq numbers events: a device never reuses an event id for
// another report, so ids are unique across workloads of the test binary.
var linEventSeq atomic.Int64

type linEvent struct {
	id, status string
	progress   int
}

func (w LinWorkload) client(ctx context.Context, h *History, hc *http.Client, base string, dev LinDevice, id int) {
	var (
		task   string
		status string
		prog   int
		last   *linEvent
		retry  bool // the last event got no acknowledgement
	)
	for range w.OpsPerClient {
		if ctx.Err() != nil {
			return
		}
		if w.Pause != nil {
			time.Sleep(w.Pause())
		}
		if task == "" || (!retry && rand.Float64() < 0.1) {
			out := h.Record(id, LinInput{Kind: "check", Device: dev.ID}, func() LinOutput {
				return linCall(ctx, hc, "check", http.MethodPost, base+"/api/v1/devices/"+dev.ID+"/ota/check", dev.Token,
					map[string]any{"model": dev.Model, "current_version": dev.Version})
			})
			task, status, prog, last, retry = "", "", 0, nil, false
			if out.Outcome == "ok" {
				task, status, prog = out.TaskID, out.Status, out.Progress
			}
			continue
		}
		ev := linEvent{id: fmt.Sprintf("c%d-e%d", id, linEventSeq.Add(1))}
		switch r := rand.Float64(); {
		case retry:
			ev = *last // unacknowledged: a device sends it again, same id, until it is
		case last != nil && r < 0.15:
			ev = *last // the answer may have been lost: the same event again
		case r < 0.22:
			ev.status = "failed"
		default:
			ev.status, ev.progress = nextStep(status, prog)
		}
		in := LinInput{Kind: "event", Device: dev.ID, TaskID: task, EventID: ev.id, Status: ev.status, Progress: ev.progress}
		out := h.Record(id, in, func() LinOutput {
			return linCall(ctx, hc, "event", http.MethodPost, base+"/api/v1/devices/"+dev.ID+"/ota/tasks/"+task+"/events", dev.Token,
				map[string]any{"event_id": ev.id, "status": ev.status, "progress": ev.progress})
		})
		last = &ev
		retry = out.Outcome == "busy" || out.Outcome == "unknown"
		switch {
		case out.Outcome == "ok":
			status, prog = out.Status, out.Progress
			if isFinal(status) {
				task = ""
			}
		case out.Outcome == "error":
			task = "" // finished, or another client moved it: look again
		}
	}
}

// nextStep is a device's next report from status/progress.
func nextStep(status string, progress int) (string, int) {
	switch status {
	case "pending":
		return "downloading", 10
	case "downloading":
		if progress < 100 && rand.Float64() < 0.6 {
			return "downloading", min(progress+30, 100)
		}
		return "downloaded", 100
	case "downloaded":
		return "installing", 0
	}
	return "succeeded", 100
}

// LinRolloutStart records the start of version's rollout to the whole
// fleet with maxAttempts (0: the default), which start makes (publishing
// the firmware and starting the rollout through the admin API); client is
// the workload's Clients().
func LinRolloutStart(h *History, client int, version string, maxAttempts int, start func() error) LinOutput {
	return h.Record(client, LinInput{Kind: "rollout", Firmware: version, Status: "active", MaxAttempts: maxAttempts}, func() LinOutput {
		if err := start(); err != nil {
			return LinOutput{Outcome: "bad", Detail: err.Error()}
		}
		return LinOutput{Outcome: "ok", Status: "active"}
	})
}

// LinRolloutChange pauses or resumes version's rollout through the admin
// API and records it (client id: the workload's Clients()).
func LinRolloutChange(ctx context.Context, h *History, client int, baseURL, adminToken, rolloutID, version, status string) LinOutput {
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	return h.Record(client, LinInput{Kind: "rollout", Firmware: version, Status: status}, func() LinOutput {
		return linCall(ctx, hc, "rollout", http.MethodPatch, baseURL+"/api/v1/admin/rollouts/"+rolloutID, adminToken,
			map[string]any{"status": status})
	})
}

// linCall makes one call and turns its answer into the model's terms.
func linCall(ctx context.Context, hc *http.Client, kind, method, url, token string, body any) LinOutput {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(b))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return LinOutputOf(kind, 0, "", nil, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return LinOutputOf(kind, 0, "", nil, err)
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if resp.StatusCode >= 400 {
		_ = json.Unmarshal(data, &e)
	}
	return LinOutputOf(kind, resp.StatusCode, e.Error.Code, data, nil)
}

// linDecode reads a 200 answer.
func linDecode(kind string, body []byte) LinOutput {
	var v struct {
		// check
		UpdateAvailable bool `json:"update_available"`
		Task            *struct {
			ID       string `json:"id"`
			Status   string `json:"status"`
			Progress int    `json:"progress"`
			Attempt  int    `json:"attempt"`
			Firmware struct {
				Version string `json:"version"`
			} `json:"firmware"`
		} `json:"task"`
		// event (a task) and rollout
		ID       string `json:"id"`
		Status   string `json:"status"`
		Progress int    `json:"progress"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return LinOutput{Outcome: "bad", Detail: "undecodable 200: " + err.Error()}
	}
	switch kind {
	case "check":
		if v.Task == nil {
			if v.UpdateAvailable {
				return LinOutput{Outcome: "bad", Detail: "update_available without a task"}
			}
			return LinOutput{Outcome: "none"}
		}
		if v.Task.Attempt < 1 {
			return LinOutput{Outcome: "bad", Detail: fmt.Sprintf("a task with attempt %d", v.Task.Attempt)}
		}
		return LinOutput{Outcome: "ok", TaskID: v.Task.ID, Firmware: v.Task.Firmware.Version, Status: v.Task.Status, Progress: v.Task.Progress,
			Attempt: v.Task.Attempt}
	case "event":
		return LinOutput{Outcome: "ok", TaskID: v.ID, Status: v.Status, Progress: v.Progress}
	}
	return LinOutput{Outcome: "ok", Status: v.Status}
}
