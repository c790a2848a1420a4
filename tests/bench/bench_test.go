// Package bench holds `make bench` (bench.sh, seed.sql, check.lua): the
// check path's throughput measured with wrk beside pgbench
// (docs/BENCHMARKS.md). This test runs the
// whole script with tiny numbers, so that the script keeps working; the
// measurement itself is never part of `go test`.
package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/tests/testenv"
)

// TestBenchScriptSmoke runs tests/bench/bench.sh on 2,000 devices with
// one-second runs against throw-away databases, and checks that it reports
// every scenario with a rate, that every check was answered as its
// scenario says (creations created), and that the open loop got only 200s.
func TestBenchScriptSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the bench smoke test starts otad, wrk and pgbench")
	}
	for _, tool := range []string{"wrk", "pgbench", "psql", "jq", "curl", "nginx"} {
		if _, err := exec.LookPath(tool); err != nil && !fileExists("/usr/sbin/"+tool) {
			testenv.Skip(t, tool, tool+" is not installed, so the bench smoke test is skipped (make bench installs it: apt-get install -y wrk postgresql-contrib jq curl nginx-light)")
		}
	}
	dbURL, redisURL := os.Getenv("OTA_TEST_DATABASE_URL"), os.Getenv("OTA_TEST_REDIS_URL")
	if dbURL == "" || redisURL == "" {
		testenv.Skip(t, "OTA_TEST_DATABASE_URL and OTA_TEST_REDIS_URL", "OTA_TEST_DATABASE_URL and OTA_TEST_REDIS_URL must both be set for the bench smoke test (make test sets them when the services answer)")
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	server := *u
	server.Path, server.RawQuery = "", ""

	dir := t.TempDir()
	suffix := strconv.FormatUint(rand.Uint64()%1e12, 10)
	out := filepath.Join(dir, "results.md")
	// A bound for a hung script, not a speed target: at a load average of 10
	// (builds beside it) the whole run, cleanup included, took 90 s.
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "bench.sh")
	cmd.Env = append(os.Environ(),
		"BENCH_DEVICES=2000", "BENCH_HISTORY=1000", "BENCH_DELIVERY_BACKLOG=3000", "BENCH_DURATION=1", "BENCH_RUNS=1", "BENCH_WARMUP=0", "BENCH_PGBENCH_SCALE=1",
		"BENCH_PG="+server.String(), "BENCH_REDIS_URL="+redisURL,
		"BENCH_DB=ota_bench_smoke_"+suffix, "BENCH_PGBENCH_DB=ota_bench_smoke_pgb_"+suffix,
		"BENCH_ADDR="+freeAddr(t), "BENCH_DIR="+dir, "BENCH_OUT="+out, "BENCH_CLEANUP=1", "BENCH_INSTALL=0",
	)
	start := time.Now()
	logs, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench.sh: %v\n%s", err, logs)
	}
	t.Logf("bench.sh took %v", time.Since(start).Round(time.Millisecond))
	report, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no markdown report: %v\n%s", err, logs)
	}
	for _, sc := range []string{"noupdate", "reuse", "create"} {
		row := tableRow(string(report), sc)
		if row == nil {
			t.Fatalf("no %s row in the report:\n%s", sc, report)
		}
		if rate := number(row[1]); !(rate > 0) {
			t.Errorf("%s: checks/s %q", sc, row[1])
		}
		if tps := number(row[2]); !(tps > 0) {
			t.Errorf("%s: pgbench tps %q", sc, row[2])
		}
		if cpu, writes := number(row[5]), number(row[6]); !(cpu > 0) || !(writes > 0) {
			t.Errorf("%s: otad's CPU %q µs and %q writes per check were not measured", sc, row[5], row[6])
		}
		if sc != "create" && strings.TrimSpace(row[13]) != "yes" {
			t.Errorf("%s: the open loop got answers other than 200: %q", sc, row[13])
		}
	}
	// Webhook delivery: a backlog drained alone at some rate, and a row per
	// polling scenario comparing checks with and without deliveries.
	if m := regexp.MustCompile(`delivered alone in [0-9.]+ s, \*\*([0-9]+) events/s`).FindStringSubmatch(string(report)); m == nil || !(number(m[1]) > 0) {
		t.Errorf("no delivery rate in the report:\n%s", report)
	}
	if n := strings.Count(string(report), "| noupdate | ") + strings.Count(string(report), "| reuse | "); n < 6 {
		t.Errorf("want the delivery rows of noupdate and reuse beside the others:\n%s", report)
	}
	if !strings.Contains(string(report), "other +0") || strings.Contains(string(report), "created +0,") {
		t.Errorf("some checks were neither no_update, reused nor created, or none created:\n%s", report)
	}
}

// tableRow returns the cells of the summary row of a scenario.
func tableRow(report, scenario string) []string {
	for _, l := range strings.Split(report, "\n") {
		cells := strings.Split(strings.Trim(l, "| "), "|")
		if len(cells) >= 15 && strings.TrimSpace(cells[0]) == scenario {
			return cells
		}
	}
	return nil
}

func number(cell string) float64 {
	v, err := strconv.ParseFloat(strings.Trim(strings.TrimSpace(cell), "*"), 64)
	if err != nil {
		return -1
	}
	return v
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr())
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
