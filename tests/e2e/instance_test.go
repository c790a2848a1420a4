package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/tests/testenv"
)

const (
	// readyDeadline bounds an instance's start: migrations (a no-op on a
	// cloned database), the Redis handshake, then /readyz answering 200.
	readyDeadline = 20 * time.Second
	// stopDeadline bounds a graceful stop; otad drains for at most 15s.
	stopDeadline = 20 * time.Second
	// tailLines is how much of an instance's log a failing test shows.
	tailLines = 60
)

// env is one test's world: its own database (cloned from the migrated
// template), the shared Redis, and an admin token its instances share.
type env struct {
	db         *sqlx.DB
	dbURL      string
	redisURL   string
	adminToken string
}

// newEnv gives the test a database and Redis, or skips it when testenv has
// none to give.
func newEnv(t *testing.T) *env {
	t.Helper()
	db, dbURL := testenv.PostgresDB(t)
	return &env{db: db, dbURL: dbURL, redisURL: testenv.RedisURL(t), adminToken: "adm-" + randomHex(16)}
}

// instanceConfig tunes one otad; zero fields take the env's values and the
// product's defaults.
type instanceConfig struct {
	redisURL string // default: env's Redis
	lockWait string // OTA_LOCK_WAIT, default 500ms
	logLevel string // OTA_LOG_LEVEL, default info
	// env adds variables, such as the per-device rate limit
	// (OTA_DEVICE_RATE_LIMIT, 0 turning it off) for scenarios that send
	// more requests per device than a device would.
	env map[string]string
}

// instance is one running otad process.
type instance struct {
	name   string
	addr   string // 127.0.0.1:port
	base   string // http://127.0.0.1:port
	cmd    *exec.Cmd
	stderr *syncBuffer

	done    chan struct{} // closed when the process has exited
	waitErr error         // cmd.Wait's answer, set before done closes

	stopOnce sync.Once
	stopErr  error
}

// start launches otad instances concurrently and returns them once every one
// answers /readyz with 200. They are stopped with SIGTERM when the test ends,
// and each must then exit 0; a failing test shows the tail of their logs.
func (e *env) start(t *testing.T, cfg instanceConfig, names ...string) []*instance {
	t.Helper()
	out := make([]*instance, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { out[i], errs[i] = e.launch(name, cfg) })
	}
	wg.Wait()
	for i, inst := range out {
		if errs[i] != nil {
			continue // already stopped; its log is in the error
		}
		t.Cleanup(func() {
			if err := inst.stop(); err != nil {
				t.Errorf("otad %s: %v", inst.name, err)
			} else if !strings.Contains(inst.stderr.String(), `"msg":"stopped"`) {
				t.Errorf("otad %s exited 0 without logging that it stopped cleanly", inst.name)
			}
			if t.Failed() {
				t.Logf("otad %s (%s) log, last %d lines:\n%s", inst.name, inst.addr, tailLines, inst.stderr.tail(tailLines))
			}
		})
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("starting otad %s: %v", names[i], err)
		}
	}
	return out
}

// launch starts one otad on a free port and waits until it is ready. A port
// taken between choosing and binding it is retried on another.
func (e *env) launch(name string, cfg instanceConfig) (*instance, error) {
	var lastErr error
	for range 3 {
		inst, err := e.launchOnce(name, cfg)
		if err == nil {
			return inst, nil
		}
		lastErr = err
		if inst == nil || !strings.Contains(inst.stderr.String(), "address already in use") {
			return inst, err
		}
	}
	return nil, lastErr
}

func (e *env) launchOnce(name string, cfg instanceConfig) (*instance, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	redisURL := cfg.redisURL
	if redisURL == "" {
		redisURL = e.redisURL
	}
	lockWait := cfg.lockWait
	if lockWait == "" {
		lockWait = "500ms"
	}
	logLevel := cfg.logLevel
	if logLevel == "" {
		logLevel = "info"
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	inst := &instance{
		name: name, addr: addr, base: "http://" + addr,
		stderr: &syncBuffer{}, done: make(chan struct{}),
	}
	inst.cmd = exec.Command(otadPath, "serve")
	// Only this test's configuration: an OTA_* variable of the developer's
	// shell (OTA_STORE=memory, say) must not change what is tested.
	inst.cmd.Env = append(environWithout("OTA_"),
		"OTA_HTTP_ADDR="+addr,
		"OTA_DATABASE_URL="+e.dbURL,
		"OTA_REDIS_URL="+redisURL,
		"OTA_ADMIN_TOKEN="+e.adminToken,
		"OTA_LOCK_WAIT="+lockWait,
		"OTA_LOG_LEVEL="+logLevel,
	)
	for k, v := range cfg.env {
		inst.cmd.Env = append(inst.cmd.Env, k+"="+v)
	}
	inst.cmd.Stdout = inst.stderr
	inst.cmd.Stderr = inst.stderr
	if err := inst.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		inst.waitErr = inst.cmd.Wait()
		close(inst.done)
	}()
	if err := inst.waitReady(readyDeadline); err != nil {
		_ = inst.stop()
		return inst, fmt.Errorf("%w\nlog:\n%s", err, inst.stderr.tail(tailLines))
	}
	return inst, nil
}

// waitReady polls /readyz until it answers 200, the process exits, or the
// deadline passes.
func (inst *instance) waitReady(deadline time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	end := time.Now().Add(deadline)
	for {
		select {
		case <-inst.done:
			return fmt.Errorf("otad %s exited before it was ready: %v", inst.name, inst.waitErr)
		default:
		}
		resp, err := hc.Get(inst.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(end) {
			return fmt.Errorf("otad %s not ready within %v (last: %v)", inst.name, deadline, describe(resp, err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func describe(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// signal sends sig to the process.
func (inst *instance) signal(sig os.Signal) error { return inst.cmd.Process.Signal(sig) }

// wait waits for the process to exit, at most d, and returns its exit error
// (nil for exit code 0).
func (inst *instance) wait(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-inst.done:
		return inst.waitErr
	case <-t.C:
		return fmt.Errorf("did not exit within %v", d)
	}
}

// exited reports whether the process has ended.
func (inst *instance) exited() bool {
	select {
	case <-inst.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM (unless the process already ended) and waits for a
// clean exit; a process that does not stop in time is killed and reported.
// It is idempotent.
func (inst *instance) stop() error {
	inst.stopOnce.Do(func() {
		if !inst.exited() {
			if err := inst.signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				inst.stopErr = fmt.Errorf("sending SIGTERM: %w", err)
			}
		}
		if err := inst.wait(stopDeadline); err != nil {
			if !inst.exited() {
				_ = inst.cmd.Process.Kill()
				<-inst.done
			}
			inst.stopErr = errors.Join(inst.stopErr, fmt.Errorf("unclean stop (want exit code 0 after SIGTERM): %w", err))
		}
	})
	return inst.stopErr
}

// freePort asks the kernel for a port nobody listens on.
func freePort() (int, error) {
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

// syncBuffer collects a process's output; the process writes while tests
// read.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail returns the last n lines.
func (b *syncBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… %d earlier lines", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// uniq makes an identifier no other test (or earlier run) uses.
func uniq(prefix string) string { return prefix + "-" + randomHex(6) }

// ctxTimeout is a context for one database assertion.
func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
