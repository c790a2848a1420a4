package redislock_test

import (
	"bufio"
	"context"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/ai-device/ota/adapters/redislock"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// The benchmarks compare, in one run, the adapter with the lock the PHP
// service used (setnxLocker below). docs/BENCHMARKS.md has the numbers and
// the command.

// setnxLocker is the baseline: SET key token NX PX ttl, and when that fails
// sleep a fixed interval and try again until the wait is over; release is a
// Lua compare-and-delete. It lives in a test file only, as a yardstick.
type setnxLocker struct {
	client   rueidis.Client
	prefix   string
	ttl      time.Duration
	wait     time.Duration
	interval time.Duration
}

var compareAndDelete = rueidis.NewLuaScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

func (l *setnxLocker) WithLock(ctx context.Context, name string, fn func(context.Context) error) error {
	key := l.prefix + ":" + name
	token := uuid.NewString()
	deadline := time.Now().Add(l.wait)
	for {
		err := l.client.Do(ctx, l.client.B().Set().Key(key).Value(token).Nx().PxMilliseconds(l.ttl.Milliseconds()).Build()).Error()
		if err == nil {
			break
		}
		if !rueidis.IsRedisNil(err) {
			return &ports.BusyError{Reason: ports.LockUnavailable, Err: err}
		}
		if time.Until(deadline) < l.interval {
			return &ports.BusyError{Reason: ports.LockTimeout}
		}
		time.Sleep(l.interval)
	}
	defer compareAndDelete.Exec(context.WithoutCancel(ctx), l.client, []string{key}, []string{token})
	return fn(ctx)
}

// benchLockers builds each contender on its own client (one per call, like
// one replica), with a wait long enough never to expire here.
func benchLockers(redisURL string) []struct {
	name string
	new  func(b *testing.B, prefix string) ports.Locker
} {
	const wait = 2 * time.Second
	return []struct {
		name string
		new  func(b *testing.B, prefix string) ports.Locker
	}{
		{"rueidislock", func(b *testing.B, prefix string) ports.Locker {
			l, cleanup, err := redislock.New(redislock.Config{URL: redisURL, KeyPrefix: prefix, Wait: wait}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(cleanup)
			return l
		}},
		{"setnx-sleep100ms", func(b *testing.B, prefix string) ports.Locker {
			return &setnxLocker{client: rawClient(b, redisURL), prefix: prefix, ttl: redislock.DefaultTTL, wait: wait, interval: 100 * time.Millisecond}
		}},
	}
}

// rawRueidislock is rueidislock's TryWithContext and release with nothing
// around them (no bounded wait, no waiting at all), to show what the
// adapter's own machinery costs on top of the library.
type rawRueidislock struct{ lk rueidislock.Locker }

func (r rawRueidislock) WithLock(ctx context.Context, name string, fn func(context.Context) error) error {
	lockCtx, cancel, err := r.lk.TryWithContext(ctx, name)
	if err != nil {
		return err
	}
	defer cancel()
	return fn(lockCtx)
}

// BenchmarkUncontended measures one acquire+release of a free lock, and
// counts the Redis commands it costs from INFO commandstats deltas.
func BenchmarkUncontended(b *testing.B) {
	redisURL := testenv.RedisURL(b)
	raw := rawClient(b, redisURL)
	impls := append(benchLockers(redisURL), struct {
		name string
		new  func(b *testing.B, prefix string) ports.Locker
	}{"rueidislock-bare", func(b *testing.B, prefix string) ports.Locker {
		opt, err := rueidis.ParseURL(redisURL)
		if err != nil {
			b.Fatal(err)
		}
		opt.DisableRetry = true
		lk, err := rueidislock.NewLocker(rueidislock.LockerOption{
			ClientOption: opt, KeyPrefix: prefix, KeyMajority: 1, NoLoopTracking: true,
			TryNextAfter: time.Second, // the 20ms default times out on a busy 2-core box
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(lk.Close)
		return rawRueidislock{lk}
	}})
	for _, impl := range impls {
		b.Run(impl.name, func(b *testing.B) {
			lk := impl.new(b, newPrefix())
			ctx := context.Background()
			name := uuid.NewString()
			noop := func(context.Context) error { return nil }
			// The first call loads the scripts (EVALSHA, NOSCRIPT, EVAL).
			if err := lk.WithLock(ctx, name, noop); err != nil {
				b.Fatal(err)
			}
			before := commandStats(b, raw)
			for b.Loop() {
				if err := lk.WithLock(ctx, name, noop); err != nil {
					b.Fatal(err)
				}
			}
			after := commandStats(b, raw)
			var total int64
			var per []string
			for cmd, n := range after {
				if d := n - before[cmd]; d > 0 && cmd != "info" && cmd != "ping" {
					total += d
					per = append(per, cmd+"="+strconv.FormatFloat(float64(d)/float64(b.N), 'f', 3, 64))
				}
			}
			slices.Sort(per)
			// commandstats counts the commands scripts run as well.
			b.ReportMetric(float64(total)/float64(b.N), "redis-cmds/op")
			b.Logf("N=%d, INFO commandstats calls per op (INFO and PING excluded): %s", b.N, strings.Join(per, " "))

			// Which of those the client sent (round trips) and which ran
			// inside scripts, from MONITOR over a few more ops (MONITOR
			// slows Redis down, so not during the timed loop).
			const ops = 200
			sent, inScripts := monitorCommands(b, redisURL, raw, name, func() {
				for range ops {
					if err := lk.WithLock(ctx, name, noop); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(len(sent))/ops, "sent-cmds/op")
			b.Logf("MONITOR over %d ops: %.2f commands sent per op, %.2f run inside scripts; one op sent: %s",
				ops, float64(len(sent))/ops, float64(inScripts)/ops, strings.Join(sent[len(sent)-len(sent)/ops:], ", "))
		})
	}
}

// BenchmarkHandoff measures how long a waiter takes to get in after the
// holder leaves: from the holder's fn returning (release starts) to the
// waiter's fn starting, holder and waiter on different clients. The holder
// keeps the lock 2ms + U[0,100ms) (the same seeded sequence for both), so
// the waiter is parked and the baseline's sleep phase is uniform. ns/op is
// dominated by that hold; the hand-off percentiles are the result.
func BenchmarkHandoff(b *testing.B) {
	redisURL := testenv.RedisURL(b)
	for _, impl := range benchLockers(redisURL) {
		b.Run(impl.name, func(b *testing.B) {
			prefix := newPrefix()
			holder, waiter := impl.new(b, prefix), impl.new(b, prefix)
			ctx := context.Background()
			name := uuid.NewString()
			rng := rand.New(rand.NewPCG(1, 2))
			var handoffs []time.Duration
			for b.Loop() {
				hold := 2*time.Millisecond + time.Duration(rng.Int64N(int64(100*time.Millisecond)))
				var leftAt, enteredAt time.Time
				waited := make(chan error, 1)
				err := holder.WithLock(ctx, name, func(context.Context) error {
					go func() {
						waited <- waiter.WithLock(ctx, name, func(context.Context) error {
							enteredAt = time.Now()
							return nil
						})
					}()
					time.Sleep(hold)
					leftAt = time.Now()
					return nil
				})
				if err != nil {
					b.Fatalf("holder: %v", err)
				}
				if err := <-waited; err != nil {
					b.Fatalf("waiter: %v", err)
				}
				if enteredAt.Before(leftAt) {
					b.Fatalf("waiter entered %v before the holder left", leftAt.Sub(enteredAt))
				}
				handoffs = append(handoffs, enteredAt.Sub(leftAt))
			}
			slices.Sort(handoffs)
			pct := func(p float64) float64 {
				return float64(handoffs[int(p*float64(len(handoffs)-1))]) / float64(time.Millisecond)
			}
			b.ReportMetric(pct(0.50), "p50-handoff-ms")
			b.ReportMetric(pct(0.95), "p95-handoff-ms")
			b.ReportMetric(pct(1), "max-handoff-ms")
		})
	}
}

// commandStats returns calls per command from INFO commandstats. The
// counters are server-wide: the benchmarks assume nothing else uses this
// Redis meanwhile (the per-command breakdown they log shows if it did).
func commandStats(b *testing.B, raw rueidis.Client) map[string]int64 {
	b.Helper()
	info, err := raw.Do(context.Background(), raw.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatalf("INFO commandstats: %v", err)
	}
	stats := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		// cmdstat_evalsha:calls=12,usec=34,usec_per_call=2.83,...
		line, ok := strings.CutPrefix(sc.Text(), "cmdstat_")
		if !ok {
			continue
		}
		cmd, fields, _ := strings.Cut(line, ":")
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				stats[cmd] = n
			}
		}
	}
	return stats
}

// monitorCommands runs fn under MONITOR and returns the commands (names
// only) that mention name and came from a client, and how many more ran
// inside scripts. Filtering on the lock's unique name keeps other users of
// the Redis out of the count.
func monitorCommands(b *testing.B, redisURL string, raw rueidis.Client, name string, fn func()) (sent []string, inScripts int) {
	b.Helper()
	opt, err := rueidis.ParseURL(redisURL)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", opt.InitAddress[0], 5*time.Second)
	if err != nil {
		b.Fatalf("MONITOR connection: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(conn)
	cmd := "MONITOR\r\n"
	if opt.Password != "" {
		user := opt.Username
		if user == "" {
			user = "default"
		}
		cmd = "AUTH " + user + " " + opt.Password + "\r\n" + cmd
	}
	if _, err := conn.Write([]byte(cmd)); err != nil {
		b.Fatalf("MONITOR: %v", err)
	}
	for range strings.Count(cmd, "\r\n") {
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
			b.Fatalf("MONITOR: %q, %v", line, err)
		}
	}
	fn()
	marker := "monitor-end-" + uuid.NewString()
	if err := raw.Do(context.Background(), raw.B().Echo().Message(marker).Build()).Error(); err != nil {
		b.Fatal(err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			b.Fatalf("reading MONITOR: %v", err)
		}
		if strings.Contains(line, marker) {
			return sent, inScripts
		}
		if !strings.Contains(line, name) {
			continue
		}
		// +1700000000.123456 [0 127.0.0.1:5000] "EVALSHA" "..." ... or [0 lua]
		_, rest, _ := strings.Cut(line, "] ")
		command, _, _ := strings.Cut(strings.Trim(rest, "\""), "\"")
		if strings.Contains(line, " lua] ") {
			inScripts++
		} else {
			sent = append(sent, command)
		}
	}
}
