package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// mode is what the simulated fleet does.
type mode string

const (
	modePoll  mode = "poll"  // devices poll with jitter: no update, or the task they already have
	modeBurst mode = "burst" // every device sends -dup concurrent checks once: the creation burst
	modeWalk  mode = "walk"  // devices with tasks report their way to succeeded (some fail)
	modeMixed mode = "mixed" // all of it at once
)

// config is one simulator run.
type config struct {
	URLs           []string
	AdminToken     string
	DatabaseURL    string // "" skips seeding and the database checks
	Devices        int
	Model          string
	BaseVersion    string // the version devices start from
	Seed           bool   // COPY the devices into the database instead of registering them
	TokenSecret    string // keys the deterministic device tokens of seeded devices
	TasksHistory   int    // finished tasks to keep in the database (COPY), 0 for none
	Duration       time.Duration
	Concurrency    int
	Dup            int
	Mode           mode
	FailRate       float64
	RolloutPercent int
	// Stages, when given, make -publish start a hands-off rollout of these
	// percentages (docs/DOMAIN.md, rules G1–G3), each gate StageMinFinished finished tasks of
	// the stage, 95% of them succeeded.
	Stages           []int
	StageMinFinished int
	// UntilComplete ends the load, before -duration, once every device
	// has finished its task in the published rollout.
	UntilComplete bool
	Publish       bool
	Version       string  // the firmware version -publish creates ("" picks one)
	Rate          float64 // device steps per second over the fleet, 0 for as fast as the workers go
	// HonourPoll has a device answered no update wait the answer's
	// poll_after_seconds before its next check, as a real agent does:
	// a fleet waiting for its stage then costs what a real one costs
	// (OTA_POLL_INTERVAL on otad paces it), not a check per free worker.
	HonourPoll bool
	Timeout    time.Duration
	JSON       bool
	Quiet      bool // no live progress line
}

const (
	defaultURL         = "http://127.0.0.1:8080"
	defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/ota?sslmode=disable"
	maxDevices         = 10_000_000
)

var modelRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,56}$`)

// parseConfig reads flags, with environment fallbacks through getenv. It
// returns flag.ErrHelp for -h.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	env := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	var cfg config
	var urls, modeS string
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./tests/load [flags]\n\nSimulates a device fleet against one or several otad instances, then checks the database.\n\nflags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&urls, "urls", env("OTA_LOAD_URLS", defaultURL), "comma-separated otad base URLs (env OTA_LOAD_URLS)")
	fs.StringVar(&cfg.AdminToken, "admin-token", getenv("OTA_ADMIN_TOKEN"), "admin token (env OTA_ADMIN_TOKEN)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", env("OTA_DATABASE_URL", defaultDatabaseURL),
		"Postgres URL for -seed, -tasks-history and the consistency check; empty skips them (env OTA_DATABASE_URL)")
	fs.IntVar(&cfg.Devices, "devices", 1000, "number of devices")
	fs.StringVar(&cfg.Model, "model", "loadsim", "device model (≤ 56 chars of [A-Za-z0-9._:-]); device ids are <model>-<n>")
	fs.StringVar(&cfg.BaseVersion, "base-version", "1.0.0", "version devices report before they install anything")
	fs.BoolVar(&cfg.Seed, "seed", false, "bulk-seed the devices with COPY (existing rows are kept) instead of registering them through the admin API")
	fs.StringVar(&cfg.TokenSecret, "token-secret", env("OTA_LOAD_TOKEN_SECRET", "ota-load-simulator"),
		"key of the deterministic tokens of seeded devices (env OTA_LOAD_TOKEN_SECRET)")
	fs.IntVar(&cfg.TasksHistory, "tasks-history", 0, "keep at least N finished historical tasks (COPY) on the fleet, for growth measurements")
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long the load runs (burst stops earlier when done)")
	fs.IntVar(&cfg.Concurrency, "concurrency", 64, "HTTP workers")
	fs.IntVar(&cfg.Dup, "dup", 4, "concurrent duplicate checks per device (burst, and some checks in mixed)")
	fs.StringVar(&modeS, "mode", string(modeMixed), "poll, burst, walk or mixed")
	fs.Float64Var(&cfg.FailRate, "fail-rate", 0.1, "share of walked tasks that fail (0–1)")
	fs.IntVar(&cfg.RolloutPercent, "rollout-percent", 100, "percentage of the rollout -publish starts")
	fs.Func("stages", "with -publish: a staged rollout of these percentages, such as 1,10,50,100, that widens by itself as walked devices succeed", func(v string) error {
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				return fmt.Errorf("%q is not a percentage", p)
			}
			cfg.Stages = append(cfg.Stages, n)
		}
		return nil
	})
	fs.IntVar(&cfg.StageMinFinished, "stage-min-finished", 20, "with -stages: finished tasks of a stage its gate needs")
	fs.BoolVar(&cfg.UntilComplete, "until-complete", false, "with -publish: end the run, before -duration, once every device has finished its task in the rollout (time to 100 %, in the report)")
	fs.BoolVar(&cfg.Publish, "publish", false, "publish a new firmware version and roll it out before starting, so checks create tasks")
	fs.StringVar(&cfg.Version, "version", "", "firmware version for -publish (default 2.<unix time>.0)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "device steps per second over the fleet, Poisson-spaced (0: as fast as the workers go)")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.BoolVar(&cfg.JSON, "json", false, "print the final report as JSON")
	fs.BoolVar(&cfg.Quiet, "quiet", false, "no live progress line")
	fs.BoolVar(&cfg.HonourPoll, "honour-poll", false, "a device answered no update waits the answer's poll_after_seconds before it checks again, its first wait a share of it so that the fleet does not poll in step (set OTA_POLL_INTERVAL on otad to pace the fleet)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	for _, u := range strings.Split(urls, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			cfg.URLs = append(cfg.URLs, u)
		}
	}
	cfg.Mode = mode(modeS)
	return cfg, cfg.validate()
}

// validate refuses a run that cannot work, naming the flag.
func (c config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.URLs) == 0 {
		bad("-urls: at least one otad URL is needed")
	}
	for _, raw := range c.URLs {
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("-urls: %q is not an http(s) base URL", raw)
		}
	}
	switch c.Mode {
	case modePoll, modeBurst, modeWalk, modeMixed:
	default:
		bad("-mode: %q must be poll, burst, walk or mixed", c.Mode)
	}
	if c.Devices < 1 || c.Devices > maxDevices {
		bad("-devices: must be between 1 and %d", maxDevices)
	}
	if !modelRE.MatchString(c.Model) {
		bad("-model: %q must be 1–56 characters of [A-Za-z0-9._:-]", c.Model)
	}
	if c.Concurrency < 1 || c.Concurrency > 10_000 {
		bad("-concurrency: must be between 1 and 10000")
	}
	if c.Dup < 1 || c.Dup > 100 {
		bad("-dup: must be between 1 and 100")
	}
	if c.Duration <= 0 {
		bad("-duration: must be positive")
	}
	if c.Timeout <= 0 {
		bad("-timeout: must be positive")
	}
	if c.FailRate < 0 || c.FailRate > 1 {
		bad("-fail-rate: must be between 0 and 1")
	}
	if c.RolloutPercent < 0 || c.RolloutPercent > 100 {
		bad("-rollout-percent: must be between 0 and 100")
	}
	if c.Rate < 0 {
		bad("-rate: must not be negative")
	}
	if len(c.Stages) > 0 && (!c.Publish || c.Mode == modeBurst) {
		bad("-stages: needs -publish, and a mode other than burst (whose check assumes a fixed percentage)")
	}
	if c.UntilComplete && (!c.Publish || c.Mode == modeBurst || c.Mode == modePoll) {
		bad("-until-complete: needs -publish, and devices that report (-mode walk or mixed)")
	}
	if len(c.Stages) > 0 && c.StageMinFinished < 1 {
		bad("-stage-min-finished: must be at least 1")
	}
	if c.TasksHistory < 0 {
		bad("-tasks-history: must not be negative")
	}
	if c.DatabaseURL == "" && (c.Seed || c.TasksHistory > 0) {
		bad("-database-url: -seed and -tasks-history write to the database")
	}
	if c.DatabaseURL != "" {
		if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			bad("-database-url: must be a postgres:// URL")
		}
	}
	if c.AdminToken == "" && (c.Publish || !c.Seed || c.TasksHistory > 0) {
		bad("-admin-token: needed to register devices (without -seed), -publish or -tasks-history (env OTA_ADMIN_TOKEN)")
	}
	if c.Seed && c.TokenSecret == "" {
		bad("-token-secret: seeded devices need it")
	}
	return errors.Join(errs...)
}

// firmwareVersion is the version -publish creates.
func (c config) firmwareVersion(now time.Time) string {
	if c.Version != "" {
		return c.Version
	}
	return "2." + strconv.FormatInt(now.Unix(), 10) + ".0"
}
