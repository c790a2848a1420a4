// Package faults breaks the OTA service's dependencies for real and checks
// that it loses nothing and duplicates nothing when they misbehave. Each
// test runs the built otad binary (tests/testenv builds it once per test
// binary) against its own database cloned on the real Postgres and against
// a real Redis, and then:
//
//   - stops a private redis-server (SIGTERM) for seconds under steady check
//     load and starts it again on the same port (TestRedisRestart);
//   - cuts the connections to Postgres through a TCP proxy, as a restart
//     does, under load (TestPostgresRestart);
//   - freezes an instance (SIGSTOP) inside its critical section for longer
//     than the lock's TTL, lets another instance take the lock and create
//     the task, then thaws it (TestLockLostMidCriticalSection);
//   - kills an instance (SIGKILL) while it holds locks (TestKilledLockHolder);
//   - slows Redis and Postgres down through the proxy, checking deadlines
//     and that goroutines return to their baseline, in the binary
//     (go_goroutines) and in an in-process stack under goleak
//     (TestSlowRedis, TestSlowPostgres, TestNoGoroutineLeakInProcess).
//
// After each, the database is queried: no device has two active tasks, no
// row is half-written (every task has its device, firmware and matching
// rollout, no event without its task, no task moved by an event without
// that event recorded), and nothing a client was told was kept went
// missing. No response may be a 500.
//
// Postgres and Redis come from tests/testenv (OTA_TEST_DATABASE_URL and
// OTA_TEST_REDIS_URL, else Docker); without them the tests are skipped. The
// Redis restart needs the redis-server binary on PATH, and is skipped
// without it. The shared servers are never stopped: faults are played
// through proxies and private processes the tests own.
//
//	OTA_TEST_DATABASE_URL='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' \
//	OTA_TEST_REDIS_URL=redis://127.0.0.1:6379/0 \
//	go test -race -count=1 -v ./tests/faults/
//
// The figures each test measures are logged (t.Logf, lines starting with
// "FIGURES"); docs/RELIABILITY.md reports them.
package faults
