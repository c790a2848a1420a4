package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// callReport is the throughput and latency of one kind of call.
type callReport struct {
	Count  int64   `json:"count"`
	OK     int64   `json:"ok"` // 2xx
	RPS    float64 `json:"rps"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// invariant is one promise checked after the run.
type invariant struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// simCounters is what the devices noticed.
type simCounters struct {
	DupGroups      int64 `json:"dup_groups"`
	DivergentDups  int64 `json:"divergent_dup_groups"`
	AllBusyGroups  int64 `json:"all_busy_dup_groups"`
	Reused         int64 `json:"reused"`
	Switched       int64 `json:"switched"`
	Vanished       int64 `json:"vanished"`
	TaskFinished   int64 `json:"task_finished"`
	EventsRefused  int64 `json:"events_refused"`
	TasksSucceeded int64 `json:"tasks_succeeded"`
	TasksFailed    int64 `json:"tasks_failed"`
	DispatchLate   int64 `json:"dispatch_late"`
}

// report is the outcome of a run; -json prints it as is.
type report struct {
	Mode           string                `json:"mode"`
	URLs           []string              `json:"urls"`
	Model          string                `json:"model"`
	Devices        int                   `json:"devices"`
	Concurrency    int                   `json:"concurrency"`
	Dup            int                   `json:"dup"`
	FailRate       float64               `json:"fail_rate"`
	Rate           float64               `json:"rate"`
	Seeded         *seedResult           `json:"devices_setup,omitempty"`
	History        *historyResult        `json:"history,omitempty"`
	Published      *published            `json:"published,omitempty"`
	Rollout        *rolloutProgress      `json:"rollout,omitempty"`
	StartedAt      time.Time             `json:"started_at"`
	Seconds        float64               `json:"seconds"`
	Interrupted    bool                  `json:"interrupted"`
	Calls          map[string]callReport `json:"calls"`
	Codes          map[string]int64      `json:"codes"`
	BusyShare      float64               `json:"service_busy_share"` // of check answers
	BusyTargetMet  bool                  `json:"service_busy_target_met"`
	Sim            simCounters           `json:"sim"`
	Consistency    *consistency          `json:"consistency,omitempty"`
	DBCheckSkipped string                `json:"db_check_skipped,omitempty"`
	Invariants     []invariant           `json:"invariants"`
	OK             bool                  `json:"ok"`
}

// busyTarget is the largest acceptable share of SERVICE_BUSY answers.
const busyTarget = 0.01

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// buildReport gathers the run's numbers and judges the invariants.
func buildReport(cfg config, st *stats, s *sim, elapsed time.Duration, c *consistency) *report {
	r := &report{
		Mode: string(cfg.Mode), URLs: cfg.URLs, Model: cfg.Model, Devices: cfg.Devices,
		Concurrency: cfg.Concurrency, Dup: cfg.Dup, FailRate: cfg.FailRate, Rate: cfg.Rate,
		Published: s.fw, Seconds: elapsed.Seconds(),
		Calls: map[string]callReport{}, Codes: map[string]int64{}, Consistency: c,
	}
	codes := st.snapshot()
	for _, k := range []call{callCheck, callEvent} {
		h := &st.hist[k]
		var ok int64
		for ck, n := range codes {
			if ck.Call == k && ck.Status >= 200 && ck.Status < 300 {
				ok += n
			}
		}
		r.Calls[k.String()] = callReport{
			Count: int64(h.count()), OK: ok, RPS: rate(int64(h.count()), elapsed),
			MeanMs: ms(h.mean()), P50Ms: ms(h.quantile(0.50)), P95Ms: ms(h.quantile(0.95)),
			P99Ms: ms(h.quantile(0.99)), MaxMs: ms(h.maximum()),
		}
	}
	var busy, checks, bad5xx, transport, bad4xx int64
	var bad5xxNames, bad4xxNames []string
	for k, n := range codes {
		r.Codes[k.String()] += n
		if k.Call == callCheck {
			checks += n
		}
		switch {
		case k.Status == 0:
			transport += n
		case k.Status == http.StatusServiceUnavailable && k.Code == "SERVICE_BUSY":
			if k.Call == callCheck {
				busy += n
			}
		case k.Status >= 500:
			bad5xx += n
			bad5xxNames = append(bad5xxNames, fmt.Sprintf("%s=%d", k, n))
		case k.Status >= 400 && k.Call != callAdmin && k.Status != http.StatusTooManyRequests &&
			!(k.Status == http.StatusConflict && k.Code == "TASK_FINISHED"):
			bad4xx += n
			bad4xxNames = append(bad4xxNames, fmt.Sprintf("%s=%d", k, n))
		}
	}
	if checks > 0 {
		r.BusyShare = float64(busy) / float64(checks)
	}
	r.BusyTargetMet = r.BusyShare < busyTarget
	r.Sim = simCounters{
		DupGroups: s.groups.Load(), DivergentDups: s.divergent.Load(), AllBusyGroups: s.busyGroups.Load(),
		Reused: s.reused.Load(), Switched: s.switched.Load(), Vanished: s.vanished.Load(),
		TaskFinished: s.finished.Load(), EventsRefused: s.refused.Load(),
		TasksSucceeded: s.succeeded.Load(), TasksFailed: s.failed.Load(), DispatchLate: s.dispatchLag.Load(),
	}

	add := func(name string, ok bool, format string, args ...any) {
		r.Invariants = append(r.Invariants, invariant{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	if c != nil {
		add("at most one active task per device", c.MultiActiveDevices == 0,
			"%d devices with more than one%s", c.MultiActiveDevices, sample(c.MultiActiveSample))
		add("every task handed out is in the database", c.MissingTasks == 0 && c.WrongDevice == 0 && c.WrongFinal == 0,
			"%d handed, %d missing%s, %d on another device, %d with another final status",
			c.HandedTasks, c.MissingTasks, sample(c.MissingSample), c.WrongDevice, c.WrongFinal)
		add("no duplicate task creation", c.DuplicatePairs == 0,
			"%d device/firmware pairs with a task created while another was live%s; %d tasks created in the run, %d not seen by any device",
			c.DuplicatePairs, sample(c.DuplicateSample), c.RunTasks, c.UnseenTasks)
		if b := c.Burst; b != nil {
			add("burst: one task per admitted device", b.Duplicates == 0 && b.NotAdmittedTasks == 0 && b.AdmittedNoUpdate == 0,
				"%d admitted by the rollout: %d with exactly one task, %d with none (busy, or handed an older task); %d with duplicates; %d outside the rollout with a task; %d admitted answered no update",
				b.Admitted, b.WithOneTask, b.WithoutTask, b.Duplicates, b.NotAdmittedTasks, b.AdmittedNoUpdate)
		}
	}
	add("concurrent duplicate checks agree", r.Sim.DivergentDups == 0,
		"%d of %d groups named different tasks", r.Sim.DivergentDups, r.Sim.DupGroups)
	add("no 5xx except 503 SERVICE_BUSY", bad5xx == 0, "%d%s", bad5xx, sample(bad5xxNames))
	add("every request answered", transport == 0, "%d transport errors", transport)
	add("no unexpected 4xx on device calls", bad4xx == 0, "%d%s", bad4xx, sample(bad4xxNames))
	add("SERVICE_BUSY under 1% of checks", r.BusyTargetMet, "%d of %d checks (%.3f%%)", busy, checks, 100*r.BusyShare)
	r.OK = true
	for _, inv := range r.Invariants {
		r.OK = r.OK && inv.OK
	}
	return r
}

func sample(s []string) string {
	if len(s) == 0 {
		return ""
	}
	sort.Strings(s)
	if len(s) > 5 {
		s = append(s[:5:5], "…")
	}
	return " (" + strings.Join(s, ", ") + ")"
}

// writeText prints the report for people.
func (r *report) writeText(w io.Writer) {
	fmt.Fprintf(w, "OTA fleet simulator: mode %s, %d devices of %s, %d URL(s), concurrency %d, dup %d, %.1fs",
		r.Mode, r.Devices, r.Model, len(r.URLs), r.Concurrency, r.Dup, r.Seconds)
	if r.Interrupted {
		fmt.Fprint(w, " (interrupted)")
	}
	fmt.Fprintln(w)
	if s := r.Seeded; s != nil {
		fmt.Fprintf(w, "devices: %d new, %d reused (%d with another token or model) in %.1fs\n",
			s.Inserted, s.Existing, s.Mismatched, s.Seconds)
	}
	if h := r.History; h != nil {
		fmt.Fprintf(w, "history: %d finished tasks added, %d kept, in %.1fs\n", h.Inserted, h.Existing, h.Seconds)
	}
	if p := r.Published; p != nil {
		fmt.Fprintf(w, "published: firmware %s (%s), rollout %s at %d%%\n", p.Version, p.FirmwareID, p.RolloutID, p.Percentage)
	}
	if ro := r.Rollout; ro != nil {
		fmt.Fprintf(w, "rollout: %s at %d%%, %d devices succeeded, %d failed", ro.Status, ro.Percentage, ro.Succeeded, ro.Failed)
		if ro.CompleteAfter > 0 {
			fmt.Fprintf(w, ", every device finished after %.1fs", ro.CompleteAfter)
		}
		fmt.Fprintln(w)
		for _, st := range ro.Stages {
			fmt.Fprintf(w, "  stage %d (%d%%) started after %.1fs\n", st.Stage+1, st.Percentage, st.StartedAfter)
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "call\tcount\t2xx\treq/s\tmean\tp50\tp95\tp99\tmax\t")
	for _, name := range []string{"check", "event"} {
		c := r.Calls[name]
		if c.Count == 0 && name != "check" {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.2fms\t%.2fms\t%.2fms\t%.2fms\t%.2fms\t\n",
			name, c.Count, c.OK, c.RPS, c.MeanMs, c.P50Ms, c.P95Ms, c.P99Ms, c.MaxMs)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nanswers by code:")
	names := make([]string, 0, len(r.Codes))
	for n := range r.Codes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-36s %d\n", n, r.Codes[n])
	}
	met := "met"
	if !r.BusyTargetMet {
		met = "NOT met"
	}
	fmt.Fprintf(w, "\nSERVICE_BUSY: %.3f%% of checks (target < 1%%: %s)\n", 100*r.BusyShare, met)
	s := r.Sim
	fmt.Fprintf(w, "devices: %d duplicate-check groups (%d all busy, %d divergent); %d reuses; %d tasks succeeded, %d failed; %d TASK_FINISHED, %d events refused; %d switched, %d vanished",
		s.DupGroups, s.AllBusyGroups, s.DivergentDups, s.Reused, s.TasksSucceeded, s.TasksFailed, s.TaskFinished, s.EventsRefused, s.Switched, s.Vanished)
	if r.Rate > 0 {
		fmt.Fprintf(w, "; %d steps dispatched late", s.DispatchLate)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "\ninvariants:")
	if r.DBCheckSkipped != "" {
		fmt.Fprintf(w, "  [skip] database checks: %s\n", r.DBCheckSkipped)
	}
	for _, inv := range r.Invariants {
		mark := "ok"
		if !inv.OK {
			mark = "BROKEN"
		}
		fmt.Fprintf(w, "  [%s] %s: %s\n", mark, inv.Name, inv.Detail)
	}
	if r.OK {
		fmt.Fprintln(w, "\nresult: PASS")
	} else {
		fmt.Fprintln(w, "\nresult: FAIL (an invariant broke)")
	}
}

// writeJSON prints the report for machines.
func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
