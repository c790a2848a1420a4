package faults

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ai-device/ota/tests/testenv"
)

// redisServer is a redis-server process of the test's own, on a port of its
// own, that the test really stops and starts again on the same port. It
// keeps its data across restarts the way a production Redis with RDB
// snapshots does (SHUTDOWN saves, start-up loads), so lock keys that
// existed when it stopped come back with the expiry they had.
type redisServer struct {
	t    *testing.T
	bin  string
	port int
	dir  string

	mu   sync.Mutex // guards cmd and done
	cmd  *exec.Cmd
	done chan struct{}
	log  testenv.LogBuffer
}

// startRedisServer starts a private redis-server, or skips the test when
// the binary is not installed. It is stopped when the test ends.
func startRedisServer(t *testing.T) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Skip(t, "redis-server", "faults: redis-server is not on PATH; the Redis restart needs a Redis of its own to stop")
	}
	rs := &redisServer{t: t, bin: bin, dir: t.TempDir()}
	var lastErr error
	for range 3 { // a port taken between choosing and binding it: another one
		if rs.port, err = testenv.FreePort(); err != nil {
			t.Fatal(err)
		}
		if lastErr = rs.start(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("starting redis-server: %v", lastErr)
	}
	t.Cleanup(func() {
		if _, err := rs.stop(); err != nil {
			t.Errorf("stopping redis-server: %v", err)
		}
	})
	return rs
}

// url is the server's URL, the same across restarts.
func (rs *redisServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", rs.port) }

func (rs *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(rs.port) }

// start runs redis-server on rs.port and returns once it answers PING.
func (rs *redisServer) start() error {
	cmd := exec.Command(rs.bin,
		"--port", strconv.Itoa(rs.port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--dir", rs.dir, "--dbfilename", "dump.rdb", "--save", "3600 1", "--appendonly", "no",
		"--daemonize", "no", "--logfile", "", "--loglevel", "warning")
	cmd.Stdout = &rs.log
	cmd.Stderr = &rs.log
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	rs.mu.Lock()
	rs.cmd, rs.done = cmd, done
	rs.mu.Unlock()
	end := time.Now().Add(10 * time.Second)
	for {
		if err := ping(rs.addr()); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server exited at start: %s", rs.log.String())
		default:
		}
		if time.Now().After(end) {
			_, _ = rs.stop()
			return errors.New("redis-server did not answer PING within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop sends SIGTERM (Redis saves its snapshot and exits) and waits for
// the process to end; it returns how long that took. It is a no-op when the
// server is not running.
func (rs *redisServer) stop() (time.Duration, error) {
	rs.mu.Lock()
	cmd, done := rs.cmd, rs.done
	rs.cmd = nil
	rs.mu.Unlock()
	if cmd == nil {
		return 0, nil
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case <-done:
		return time.Since(start), nil
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return time.Since(start), errors.New("redis-server did not exit within 10s of SIGTERM")
	}
}

// snapshotExists reports whether the server left an RDB snapshot.
func (rs *redisServer) snapshotExists() bool {
	_, err := os.Stat(filepath.Join(rs.dir, "dump.rdb"))
	return err == nil
}

// ping sends PING over a fresh connection and wants PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}
