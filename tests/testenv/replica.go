package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// StreamingPair is a private Postgres primary and a streaming replica of
// it, started for one test from the server binaries (initdb, pg_ctl,
// pg_basebackup) in a temporary directory, on free ports of 127.0.0.1.
// It never touches the machine's own cluster, whose pg_hba.conf allows no
// replication. Both are stopped and their files removed when the test
// ends.
type StreamingPair struct {
	// PrimaryURL and ReplicaURL name database "ota" on each, migrated.
	PrimaryURL, ReplicaURL string

	bin, dir, primaryData, replicaData string
	primaryPort                        int
	runAs                              []string // runuser prefix when root
}

// postgresBinDir finds the server binaries: pg_config --bindir, else
// Debian's folder.
func postgresBinDir() (string, error) {
	var dirs []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(m) > 0 {
		dirs = append(dirs, m[len(m)-1])
	}
	for _, d := range dirs {
		if fileExists(filepath.Join(d, "initdb")) && fileExists(filepath.Join(d, "pg_basebackup")) && fileExists(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", errors.New("no Postgres server binaries (initdb, pg_ctl, pg_basebackup) in pg_config --bindir or /usr/lib/postgresql/*/bin")
}

// StartPrivatePrimary starts a private Postgres server (no replica) with
// database "ota" migrated; PrimaryURL names it. For measurements that no
// other user of the machine's cluster may disturb (WAL bytes written).
func StartPrivatePrimary(t testing.TB) *StreamingPair {
	t.Helper()
	bin, err := postgresBinDir()
	if err != nil {
		Skip(t, "the Postgres server binaries (initdb, pg_ctl, pg_basebackup)", "testenv: a private Postgres needs "+err.Error())
	}
	p := &StreamingPair{bin: bin}
	// Postgres refuses to run as root: run it as the postgres user, in a
	// directory that user owns.
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			Skip(t, "a postgres user to run a private cluster as", "testenv: running as root and there is no postgres user to run a private cluster as")
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		p.runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	if p.dir, err = os.MkdirTemp("", "ota-pgpair-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.cleanup)
	if uid >= 0 {
		if err := os.Chown(p.dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	p.primaryData, p.replicaData = filepath.Join(p.dir, "primary"), filepath.Join(p.dir, "replica")
	if p.primaryPort, err = FreePort(); err != nil {
		t.Fatal(err)
	}
	p.run(t, "initdb", "-D", p.primaryData, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	conf := fmt.Sprintf(`
port = %d
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
max_connections = 40
shared_buffers = 16MB
fsync = off
full_page_writes = on
wal_level = replica
max_wal_senders = 4
wal_keep_size = 64MB
hot_standby = on
hot_standby_feedback = on
logging_collector = off
# Measurements of WAL per request must not see autovacuum's.
autovacuum = off
`, p.primaryPort, p.dir)
	p.appendFile(t, filepath.Join(p.primaryData, "postgresql.conf"), conf)
	p.run(t, "pg_ctl", "-D", p.primaryData, "-l", filepath.Join(p.dir, "primary.log"), "-w", "-t", "30", "start")
	p.PrimaryURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/ota?sslmode=disable", p.primaryPort)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := sqlx.Open("postgres", strings.Replace(p.PrimaryURL, "/ota?", "/postgres?", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE ota`); err != nil {
		t.Fatalf("testenv: creating the private primary's database: %v\n%s", err, p.Logs())
	}
	if err := postgresMigrate(ctx, p.PrimaryURL); err != nil {
		t.Fatalf("testenv: migrating the private primary: %v", err)
	}
	return p
}

// StartStreamingPair starts a private primary (StartPrivatePrimary) and a
// streaming replica of it made with pg_basebackup -R, which starts with
// the migrated schema. The test is skipped, loudly, when the binaries are
// missing.
func StartStreamingPair(t testing.TB) *StreamingPair {
	t.Helper()
	p := StartPrivatePrimary(t)
	replicaPort, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p.run(t, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.primaryPort), "-U", "postgres",
		"-D", p.replicaData, "-R", "-X", "stream", "--no-sync", "-c", "fast")
	p.appendFile(t, filepath.Join(p.replicaData, "postgresql.auto.conf"), fmt.Sprintf("port = %d\n", replicaPort))
	p.run(t, "pg_ctl", "-D", p.replicaData, "-l", filepath.Join(p.dir, "replica.log"), "-w", "-t", "30", "start")
	p.ReplicaURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/ota?sslmode=disable", replicaPort)
	return p
}

// Open is a pool on url, closed when the test ends.
func (p *StreamingPair) Open(t testing.TB, url string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// KillReplica stops the replica at once (pg_ctl stop -m immediate: no
// shutdown checkpoint, connections cut), as a crash would.
func (p *StreamingPair) KillReplica(t testing.TB) {
	t.Helper()
	p.run(t, "pg_ctl", "-D", p.replicaData, "-m", "immediate", "-w", "stop")
}

// RestartPrimaryWith restarts the private primary with settings appended
// to its postgresql.conf (later lines win), for a run that needs the
// server a deployment would have rather than the one the per-request
// measurements want: StartPrivatePrimary turns autovacuum off and keeps
// shared_buffers small, which a long run pays for in dead rows and
// page-cache reads. It needs no replica.
func (p *StreamingPair) RestartPrimaryWith(t testing.TB, settings string) {
	t.Helper()
	p.appendFile(t, filepath.Join(p.primaryData, "postgresql.conf"), "\n"+settings+"\n")
	p.run(t, "pg_ctl", "-D", p.primaryData, "-l", filepath.Join(p.dir, "primary.log"), "-w", "-t", "60", "restart")
}

// Logs are both servers' logs, for a failing test's message.
func (p *StreamingPair) Logs() string {
	var b strings.Builder
	for _, f := range []string{"primary.log", "replica.log"} {
		data, _ := os.ReadFile(filepath.Join(p.dir, f))
		fmt.Fprintf(&b, "--- %s\n%s", f, tailLines(string(data), 30))
	}
	return b.String()
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

func (p *StreamingPair) run(t testing.TB, tool string, args ...string) {
	t.Helper()
	argv := append(append(append([]string{}, p.runAs...), filepath.Join(p.bin, tool)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = p.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: %s: %v\n%s\n%s", tool, err, out, p.Logs())
	}
}

// appendFile appends to a file of a data directory (written as the
// directory's owner would: appending keeps the owner).
func (p *StreamingPair) appendFile(t testing.TB, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

func (p *StreamingPair) cleanup() {
	for _, d := range []string{p.replicaData, p.primaryData} {
		if d == "" || !fileExists(filepath.Join(d, "postmaster.pid")) {
			continue
		}
		argv := append(append(append([]string{}, p.runAs...), filepath.Join(p.bin, "pg_ctl")), "-D", d, "-m", "immediate", "-w", "stop")
		_ = exec.Command(argv[0], argv[1:]...).Run()
	}
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}

// PrimaryPID is the private primary's postmaster process id (its backends
// are its children), for measuring the server's CPU.
func (p *StreamingPair) PrimaryPID() (int, error) {
	data, err := os.ReadFile(filepath.Join(p.primaryData, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(data), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}
