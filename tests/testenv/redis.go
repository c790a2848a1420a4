package testenv

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

// RedisURLEnv names the variable holding the URL of a Redis (>= 7.0.5) that
// tests may use, such as redis://127.0.0.1:6379/0. Tests share it and keep
// apart by key prefix, so it needs no flushing and may be a developer's own.
const RedisURLEnv = "OTA_TEST_REDIS_URL"

// RedisImage is the image started when RedisURLEnv is unset and a Docker
// engine answers. rueidislock's NOLOOP tracking needs Redis 7.0.5 or later.
const RedisImage = "redis:7-alpine"

var (
	redisOnce sync.Once
	redisURL  string // the server every test of this binary uses
	redisSkip string // why tests cannot have Redis (skip)
	redisErr  error  // why starting Redis failed (fail)
)

// RedisURL returns the URL of a Redis for the test: RedisURLEnv's, else one
// container per test binary (testcontainers; its reaper removes it when the
// binary exits, as for Postgres, so tests do not pay a container each), else
// the test is skipped with a message saying how to provide one.
func RedisURL(t testing.TB) string {
	t.Helper()
	redisOnce.Do(redisSetup)
	if redisSkip != "" {
		Skip(t, RedisURLEnv, redisSkip)
	}
	if redisErr != nil {
		t.Fatalf("testenv: %v", redisErr)
	}
	return redisURL
}

// redisSetup finds or starts the server. It runs once per test binary.
func redisSetup() {
	if redisURL = os.Getenv(RedisURLEnv); redisURL != "" {
		return
	}
	if !dockerAvailable() {
		redisSkip = "testenv: no Redis for this test: set " + RedisURLEnv +
			" (e.g. redis://127.0.0.1:6379/0) or run a Docker engine"
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctr, err := tcredis.Run(ctx, RedisImage)
	if err != nil {
		redisErr = fmt.Errorf("starting %s: %w", RedisImage, err)
		return
	}
	if redisURL, err = ctr.ConnectionString(ctx); err != nil {
		redisErr = fmt.Errorf("reading the Redis container's URL: %w", err)
	}
}
