package testenv

import "testing"

func TestSkipSummary(t *testing.T) {
	skipped.n, skipped.needs = 0, nil
	if got := skipSummary("integration"); got != "" {
		t.Fatalf("no skip: summary %q, want none", got)
	}
	skipped.n, skipped.needs = 12, []string{PostgresURLEnv, RedisURLEnv, "redis-server"}
	want := "integration: 12 tests skipped: set OTA_TEST_DATABASE_URL and OTA_TEST_REDIS_URL (make test does); " +
		"install redis-server; OTA_TEST_REQUIRE_SERVICES=1 turns skips into failures"
	if got := skipSummary("integration"); got != want {
		t.Fatalf("summary\n got %q\nwant %q", got, want)
	}
	skipped.n, skipped.needs = 0, nil
}
