// Command load is the OTA service's fleet simulator (go run ./tests/load,
// or make load).
//
// It registers N devices through the admin API, or bulk-seeds them with
// COPY (-seed: deterministic tokens, only their SHA-256 stored, existing
// rows reused), optionally adds historical finished tasks (-tasks-history)
// and publishes a firmware with a rollout (-publish). Then, for -duration,
// the devices act against one or several otad URLs:
//
//	poll   devices poll with jitter: no update, or the task they already have
//	burst  every device sends -dup concurrent duplicate checks, once
//	walk   devices with a task report downloading → downloaded → installing
//	       → succeeded, -fail-rate of them failing instead
//	mixed  all of it at once
//
// A live progress line goes to stderr every second; at the end the report
// (text, or -json) goes to stdout: throughput and p50/p95/p99/max latency
// per call, answers by code, and invariants read back from the database —
// at most one active task per device, every task a device was handed
// exists, no duplicate creation, one task per admitted device in a burst,
// no 5xx but 503 SERVICE_BUSY. It exits 1 when any invariant broke, 2 on
// bad flags. SIGINT ends the load early and still reports.
//
//	go run ./tests/load -seed -devices 10000 -mode poll -duration 10s \
//	    -urls http://127.0.0.1:8080,http://127.0.0.1:8081
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"

	// The driver registers itself as "postgres".
	_ "github.com/lib/pq"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, a second one kills as usual (the report
		// may be reading a large database).
		<-ctx.Done()
		stop()
	}()
	os.Exit(mainCode(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// mainCode runs the simulator and returns the exit code: 0 when every
// invariant held, 1 when one broke or the run failed, 2 on bad flags.
func mainCode(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "load:", err)
		return 2
	}
	var progress io.Writer = stderr
	if cfg.Quiet {
		progress = nil
	}
	r, err := run(ctx, cfg, progress)
	if err != nil {
		fmt.Fprintln(stderr, "load:", err)
		return 1
	}
	if cfg.JSON {
		if err := r.writeJSON(stdout); err != nil {
			fmt.Fprintln(stderr, "load:", err)
			return 1
		}
	} else {
		r.writeText(stdout)
	}
	if !r.OK {
		return 1
	}
	return 0
}

// verifyTimeout bounds the database checks after the load.
const verifyTimeout = 10 * time.Minute

// run sets the fleet up, plays the load and checks the outcome. progress,
// when not nil, gets the live line and setup notes. The load ends at
// -duration or when ctx ends (SIGINT); the report is made either way.
func run(ctx context.Context, cfg config, progress io.Writer) (*report, error) {
	logf := func(format string, args ...any) {
		if progress != nil {
			fmt.Fprintf(progress, format+"\n", args...)
		}
	}
	setup := newStats()
	cl := newClient(cfg, setup)
	defer cl.close()
	if err := cl.healthy(ctx); err != nil {
		return nil, err
	}

	var db *sqlx.DB
	if cfg.DatabaseURL != "" {
		var err error
		if db, err = sqlx.Open("postgres", cfg.DatabaseURL); err != nil {
			return nil, fmt.Errorf("-database-url: %w", err)
		}
		defer db.Close()
		db.SetMaxOpenConns(4)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = db.PingContext(pctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("-database-url: %w", err)
		}
	}

	f := newFleet(cfg.Model, cfg.BaseVersion, cfg.Devices)
	var seeded seedResult
	var err error
	if cfg.Seed {
		logf("seeding %d devices with COPY…", cfg.Devices)
		seeded, err = seedDevices(ctx, db, f, cfg.TokenSecret, cfg.BaseVersion)
	} else {
		logf("registering %d devices through the admin API…", cfg.Devices)
		seeded, err = registerDevices(ctx, cl, f, cfg.BaseVersion, cfg.Concurrency)
	}
	if err != nil {
		return nil, fmt.Errorf("setting the devices up: %w", err)
	}
	logf("devices: %d new, %d reused in %.1fs", seeded.Inserted, seeded.Existing, seeded.Seconds)
	if seeded.Mismatched > 0 {
		logf("warning: %d existing devices have another token or model; they will be refused", seeded.Mismatched)
	}
	var history *historyResult
	if cfg.TasksHistory > 0 {
		logf("keeping %d historical tasks…", cfg.TasksHistory)
		h, err := seedHistory(ctx, db, cl, f, cfg.TasksHistory)
		if err != nil {
			return nil, fmt.Errorf("seeding the task history: %w", err)
		}
		history = &h
		logf("history: %d added, %d kept in %.1fs", h.Inserted, h.Existing, h.Seconds)
	}
	var fw *published
	if cfg.Publish {
		p, err := publish(ctx, cl, cfg.Model, cfg.firmwareVersion(time.Now()), cfg.RolloutPercent, cfg.Stages, cfg.StageMinFinished)
		if err != nil {
			return nil, fmt.Errorf("publishing: %w", err)
		}
		fw = &p
		logf("published %s %s, rollout %s at %d%%", cfg.Model, p.Version, p.RolloutID, p.Percentage)
	}

	// The load, timed on its own stats.
	st := newStats()
	s := newSim(cfg, cl.withStats(st), f, fw, time.Now())
	runStart := time.Now()
	lctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	pctx, stopProgress := context.WithCancel(lctx)
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		if progress != nil {
			st.progress(pctx, progress, string(cfg.Mode), runStart)
		}
	}()
	var progressOfRollout *rolloutProgress
	watched := make(chan struct{})
	if fw != nil {
		until := 0
		if cfg.UntilComplete {
			until = cfg.Devices
		}
		go func() {
			defer close(watched)
			p := watchRollout(lctx, cl, fw.RolloutID, runStart, until, time.Second, cancel)
			progressOfRollout = &p
		}()
	} else {
		close(watched)
	}
	s.run(lctx, ctx)
	elapsed := time.Since(runStart)
	cancel()
	<-watched
	if fw != nil && len(cfg.Stages) > 0 {
		var ro struct {
			Percentage int    `json:"percentage"`
			Stage      int    `json:"stage"`
			Status     string `json:"status"`
			Paused     string `json:"paused_reason"`
		}
		if _, err := cl.admin(context.WithoutCancel(ctx), http.MethodGet, "/rollouts/"+fw.RolloutID, nil, &ro, http.StatusOK); err == nil {
			logf("staged rollout %s: stage %d of %d at %d%%, %s %s", fw.RolloutID, ro.Stage+1, len(cfg.Stages), ro.Percentage, ro.Status, ro.Paused)
		}
	}
	stopProgress()
	<-progressDone
	interrupted := ctx.Err() != nil

	var c *consistency
	skipped := ""
	if db != nil {
		logf("checking the database…")
		vctx, vcancel := context.WithTimeout(context.WithoutCancel(ctx), verifyTimeout)
		c, err = verify(vctx, db, f, fw, runStart, cfg.Mode == modeBurst)
		vcancel()
		if err != nil {
			return nil, fmt.Errorf("checking the database: %w", err)
		}
	} else {
		skipped = "no -database-url"
	}
	r := buildReport(cfg, st, s, elapsed, c)
	r.Seeded, r.History, r.StartedAt, r.Interrupted, r.DBCheckSkipped = &seeded, history, runStart.UTC(), interrupted, skipped
	r.Rollout = progressOfRollout
	return r, nil
}
