package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// This file runs the service's real binary for tests that drive it from
// outside (tests/e2e, tests/faults): it builds otad once per test binary,
// starts instances of it on free ports with the environment a test chooses,
// waits until they are ready, signals them (SIGTERM, SIGKILL, SIGSTOP,
// SIGCONT), keeps their logs, and puts TCP proxies that can be cut, restored
// and slowed down between an instance and the services it depends on.

// OtadPackage is the import path of the service's main package.
const OtadPackage = "github.com/ai-device/ota"

// Bounds of an instance's life in tests.
const (
	// OtadReadyTimeout bounds a start: migrations (a no-op on a cloned
	// database), the Redis handshake, then /readyz answering 200.
	OtadReadyTimeout = 20 * time.Second
	// OtadStopTimeout bounds a graceful stop; otad drains for at most 15s.
	OtadStopTimeout = 20 * time.Second
	// OtadLogTail is how many lines of an instance's log a failing test shows.
	OtadLogTail = 60
)

var (
	otadOnce  sync.Once
	otadMu    sync.Mutex // guards otadDir for RunWithOtad
	otadDir   string     // the temporary directory holding the binary
	otadBin   string
	otadErr   error
	otadBuilt time.Duration
)

// OtadBinary returns the path of the otad binary, building it the first
// time a test of this binary asks (later callers wait for that build). It
// is built without the race detector: the tests exercise the process from
// outside, and its packages have their own race-enabled tests. Use
// RunWithOtad in TestMain so that the binary is removed afterwards.
func OtadBinary(t testing.TB) string {
	t.Helper()
	otadOnce.Do(buildOtad)
	if otadErr != nil {
		t.Fatalf("testenv: building otad: %v", otadErr)
	}
	return otadBin
}

func buildOtad() {
	dir, err := os.MkdirTemp("", "ota-otad-")
	if err != nil {
		otadErr = err
		return
	}
	otadMu.Lock()
	otadDir = dir
	otadMu.Unlock()
	bin := filepath.Join(dir, "otad")
	start := time.Now()
	cmd := exec.Command(goTool(), "build", "-o", bin, OtadPackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		otadErr = fmt.Errorf("%v\n%s", err, out)
		return
	}
	otadBin, otadBuilt = bin, time.Since(start)
}

// RunWithOtad is the body of a TestMain for tests that start otad: it runs
// the tests, reports skips as Main does, then removes the binary
// OtadBinary built (if any).
func RunWithOtad(m *testing.M) int {
	code := m.Run()
	stopSharedWeed()
	reportSkips()
	otadMu.Lock()
	dir := otadDir
	otadMu.Unlock()
	if dir != "" {
		if testing.Verbose() && otadErr == nil {
			fmt.Fprintf(os.Stderr, "testenv: otad was built in %v\n", otadBuilt.Round(time.Millisecond))
		}
		_ = os.RemoveAll(dir)
	}
	return code
}

func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// OtadConfig says how to run one otad. DatabaseURL, RedisURL and AdminToken
// are required; every other OTA_* variable takes the product's default
// unless Env sets it.
type OtadConfig struct {
	// Name tells instances apart in logs and errors.
	Name        string
	DatabaseURL string // OTA_DATABASE_URL
	RedisURL    string // OTA_REDIS_URL
	AdminToken  string // OTA_ADMIN_TOKEN (at least 16 characters)
	// Env adds variables (OTA_LOCK_WAIT, OTA_LOCK_TTL, OTA_LOG_LEVEL,
	// OTA_DEVICE_RATE_LIMIT, ...); they are applied last.
	Env map[string]string
	// ReadyTimeout bounds the start (OtadReadyTimeout when zero).
	ReadyTimeout time.Duration
}

// Otad is one running otad serve process.
type Otad struct {
	Name string
	Addr string // 127.0.0.1:port
	URL  string // http://127.0.0.1:port

	cmd  *exec.Cmd
	log  *LogBuffer
	done chan struct{} // closed when the process has exited

	waitErr error // cmd.Wait's answer, set before done closes

	killed atomic.Bool // Kill was called: an unclean exit is expected
	paused atomic.Bool // stopped with SIGSTOP and not resumed

	stopOnce sync.Once
	stopErr  error

	// artifactDir is the artifact store made for this instance (removed
	// when it stops), or "" when the test named one.
	artifactDir string
}

// StartOtad starts one instance and returns it once /readyz answers 200.
// When the test ends it is resumed if paused and stopped with SIGTERM, and
// must then exit 0 having logged that it stopped, unless the test killed it;
// a failing test shows the tail of its log.
func StartOtad(t testing.TB, cfg OtadConfig) *Otad {
	t.Helper()
	return StartOtads(t, cfg, cfg.Name)[0]
}

// StartOtads starts one instance per name, concurrently, with the same
// configuration, and returns them once every one is ready (see StartOtad).
func StartOtads(t testing.TB, cfg OtadConfig, names ...string) []*Otad {
	t.Helper()
	bin := OtadBinary(t)
	out := make([]*Otad, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		c := cfg
		c.Name = name
		wg.Go(func() { out[i], errs[i] = LaunchOtad(bin, c) })
	}
	wg.Wait()
	for i, o := range out {
		if errs[i] != nil || o == nil {
			continue // already stopped; its log is in the error
		}
		t.Cleanup(func() { o.cleanup(t) })
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("starting otad %s: %v", names[i], err)
		}
	}
	return out
}

func (o *Otad) cleanup(t testing.TB) {
	if err := o.Stop(); err != nil {
		t.Errorf("otad %s: %v", o.Name, err)
	} else if !o.killed.Load() && !strings.Contains(o.Log(), `"msg":"stopped"`) {
		t.Errorf("otad %s exited 0 without logging that it stopped cleanly", o.Name)
	}
	if t.Failed() {
		t.Logf("otad %s (%s) log, last %d lines:\n%s", o.Name, o.Addr, OtadLogTail, o.LogTail(OtadLogTail))
		if errs := o.log.Errors(OtadLogTail); errs != "" {
			// An answer that failed the test (a 500, say) is often long
			// before the tail: its cause is in the error lines.
			t.Logf("otad %s error lines (up to %d):\n%s", o.Name, OtadLogTail, errs)
		}
	}
}

// LaunchOtad starts the binary at bin on a free port and waits until it is
// ready. A port taken between choosing and binding it is retried on
// another. On failure the process is stopped, and the error carries the
// tail of its log. The caller stops the instance (Stop or Kill).
func LaunchOtad(bin string, cfg OtadConfig) (*Otad, error) {
	var lastErr error
	for range 3 {
		o, err := launchOnce(bin, cfg)
		if err == nil {
			return o, nil
		}
		lastErr = err
		if o == nil || !strings.Contains(o.Log(), "address already in use") {
			return nil, err
		}
	}
	return nil, lastErr
}

func launchOnce(bin string, cfg OtadConfig) (*Otad, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	o := &Otad{Name: cfg.Name, Addr: addr, URL: "http://" + addr, log: &LogBuffer{}, done: make(chan struct{})}
	o.cmd = exec.Command(bin, "serve")
	// Only this test's configuration: an OTA_* variable of the developer's
	// shell (OTA_STORE=memory, say) must not change what is tested.
	o.cmd.Env = append(environWithout("OTA_"),
		"OTA_HTTP_ADDR="+addr,
		"OTA_DATABASE_URL="+cfg.DatabaseURL,
		"OTA_REDIS_URL="+cfg.RedisURL,
		"OTA_ADMIN_TOKEN="+cfg.AdminToken,
	)
	if _, set := cfg.Env["OTA_ARTIFACT_STORE"]; !set {
		// Uploads go to a directory of this instance's own, not to the
		// default ./var/artifacts under the test's package.
		dir, err := os.MkdirTemp("", "otad-artifacts-")
		if err != nil {
			return nil, err
		}
		o.artifactDir = dir
		o.cmd.Env = append(o.cmd.Env, "OTA_ARTIFACT_STORE=file://"+dir)
	}
	for k, v := range cfg.Env {
		o.cmd.Env = append(o.cmd.Env, k+"="+v)
	}
	o.cmd.Stdout = o.log
	o.cmd.Stderr = o.log
	if err := o.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		o.waitErr = o.cmd.Wait()
		close(o.done)
	}()
	ready := cfg.ReadyTimeout
	if ready <= 0 {
		ready = OtadReadyTimeout
	}
	if err := o.WaitReady(ready); err != nil {
		_ = o.Stop()
		return o, fmt.Errorf("%w\nlog:\n%s", err, o.LogTail(OtadLogTail))
	}
	return o, nil
}

// WaitReady polls /readyz until it answers 200, the process exits, or d
// passes.
func (o *Otad) WaitReady(d time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	end := time.Now().Add(d)
	for {
		if o.Exited() {
			return fmt.Errorf("otad %s exited before it was ready: %v", o.Name, o.waitErr)
		}
		resp, err := hc.Get(o.URL + "/readyz")
		last := ""
		if err != nil {
			last = err.Error()
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		}
		if time.Now().After(end) {
			return fmt.Errorf("otad %s not ready within %v (last: %s)", o.Name, d, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pid is the process id.
func (o *Otad) Pid() int { return o.cmd.Process.Pid }

// Signal sends sig to the process.
func (o *Otad) Signal(sig os.Signal) error { return o.cmd.Process.Signal(sig) }

// Pause stops the process with SIGSTOP and returns once the kernel shows it
// stopped: from then on it runs no code, answers nothing and renews
// nothing, while its sockets stay open. Resume undoes it.
func (o *Otad) Pause() error {
	if err := o.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	o.paused.Store(true)
	return waitProcState(o.Pid(), func(state byte) bool { return state == 'T' || state == 't' }, 2*time.Second)
}

// Resume continues a paused process with SIGCONT.
func (o *Otad) Resume() error {
	if err := o.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	o.paused.Store(false)
	return nil
}

// Kill ends the process with SIGKILL, as a crash or the OOM killer would,
// and waits for it to be gone. The test's cleanup then expects no clean
// exit of it.
func (o *Otad) Kill() error {
	o.killed.Store(true)
	if !o.Exited() {
		if err := o.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
	}
	select {
	case <-o.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("otad %s still running 5s after SIGKILL", o.Name)
	}
}

// Wait waits for the process to exit, at most d, and returns its exit error
// (nil for exit code 0).
func (o *Otad) Wait(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-o.done:
		return o.waitErr
	case <-t.C:
		return fmt.Errorf("did not exit within %v", d)
	}
}

// Exited reports whether the process has ended.
func (o *Otad) Exited() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// ExitErr is cmd.Wait's answer once the process has exited (nil for exit
// code 0, and while it runs).
func (o *Otad) ExitErr() error {
	if !o.Exited() {
		return nil
	}
	return o.waitErr
}

// Stop resumes the process if it was paused, sends SIGTERM (unless it
// already ended) and waits for a clean exit; a process that does not stop
// in time is killed and reported. After Kill it only makes sure the process
// is gone. It is idempotent.
func (o *Otad) Stop() error {
	o.stopOnce.Do(func() {
		if o.artifactDir != "" {
			defer os.RemoveAll(o.artifactDir)
		}
		if o.killed.Load() {
			o.stopErr = o.Kill()
			return
		}
		if !o.Exited() {
			if o.paused.Load() {
				_ = o.Resume()
			}
			if err := o.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				o.stopErr = fmt.Errorf("sending SIGTERM: %w", err)
			}
		}
		if err := o.Wait(OtadStopTimeout); err != nil {
			if !o.Exited() {
				_ = o.cmd.Process.Kill()
				<-o.done
			}
			o.stopErr = errors.Join(o.stopErr, fmt.Errorf("unclean stop (want exit code 0 after SIGTERM): %w", err))
		}
	})
	return o.stopErr
}

// Log is everything the process wrote to stdout and stderr so far.
func (o *Otad) Log() string { return o.log.String() }

// LogTail returns the last n lines of the log.
func (o *Otad) LogTail(n int) string { return o.log.Tail(n) }

// Metric scrapes /metrics and sums the samples of the metric name whose
// labels contain every one of labels (such as `reason="lost"`). Metric
// names are diagnostics, not the product's contract.
func (o *Otad) Metric(name string, labels ...string) (float64, error) {
	return ScrapeMetric(o.URL, name, labels...)
}

// ScrapeMetric scrapes baseURL/metrics over a connection of its own (so
// that it leaves no idle connection behind) and sums the samples of name
// whose labels contain every one of labels.
func ScrapeMetric(baseURL, name string, labels ...string) (float64, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := hc.Get(baseURL + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	var sum float64
	found := false
	for line := range strings.SplitSeq(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		sample, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(sample, l) {
				match = false
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err == nil {
			sum += v
			found = true
		}
	}
	if !found && len(labels) == 0 {
		return 0, fmt.Errorf("metric %s not exposed", name)
	}
	return sum, nil
}

// waitProcState waits until the state letter of /proc/pid/stat satisfies
// ok. Where /proc is not there it returns at once.
func waitProcState(pid int, ok func(byte) bool, d time.Duration) error {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	end := time.Now().Add(d)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && !fileExists("/proc/self/stat") {
				return nil
			}
			return err
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && ok(b[i+2]) {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("process %d did not reach the expected state within %v: %s", pid, d, b)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// FreePort asks the kernel for a port nobody listens on.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// environWithout is the test process's environment minus the variables
// starting with prefix.
func environWithout(prefix string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return out
}

// LogBuffer collects a process's output; the process writes while tests
// read.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Tail returns the last n lines (with a count of the earlier ones).
func (b *LogBuffer) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… %d earlier lines", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// Errors returns the first n lines logged at level ERROR.
func (b *LogBuffer) Errors(n int) string {
	var out []string
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			out = append(out, line)
			if len(out) == n {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
